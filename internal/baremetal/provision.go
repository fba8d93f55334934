package baremetal

import (
	"context"
	"errors"
	"strings"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// Keys of instance_info the conductor owns.
const (
	keyRescueHash = "hashed_rescue_password"
	keyRescuePass = "rescue_password" // never stored; removed if a client put it there
	// keyConfigDrive is the config drive of the deployed instance, as
	// Ironic keeps it: the deploy's configdrive, dropped by a deploy
	// without one and by the tear-down. The API masks it.
	keyConfigDrive = "configdrive"
)

// A phase is one piece of work of a provision action, ended by an event
// of the state table: deploying ends with done, deleting with clean. Impl
// is the implementation of the interface doing the work, fixed when the
// action is accepted, so a resumed job runs the same steps.
type phase struct {
	Work string       `json:"work"`
	Then states.Event `json:"then"`
	Impl string       `json:"impl,omitempty"`
}

// Kinds of work. What each does depends on the machine's interfaces
// (work.go); with fake interfaces, nothing.
const (
	workVerify   = "verify"
	workClean    = "clean"
	workInspect  = "inspect"
	workDeploy   = "deploy"
	workTearDown = "tear down"
	workRescue   = "rescue"
	workUnrescue = "unrescue"
	workAdopt    = "adopt"
)

// provisionUnit runs one provision action (the API's PUT
// .../states/provision). Its plan is the machine, the event, and the
// phases decided before the first step.
type provisionUnit struct {
	d      *Deps
	UUID   string       `json:"uuid"`
	Target string       `json:"target"`
	Event  states.Event `json:"event"`
	From   states.State `json:"from"`
	Manual bool         `json:"manual_clean,omitempty"`
	Phases []phase      `json:"phases"`
	// Reserved is the reservation the first step took ("" before it).
	Reserved string `json:"reserved,omitempty"`
	// TakesOver is the reservation of a job parked in a wait state that
	// this action (abort, delete) ends.
	TakesOver string `json:"takes_over,omitempty"`
	// Deadline is when the wait for the agent gives up (seconds since the
	// epoch), set when the machine enters its wait state.
	Deadline float64 `json:"deadline,omitempty"`
	// Conductor is the node acting on the machine.
	Conductor string `json:"conductor,omitempty"`
}

func (u *provisionUnit) Locks(op *opcodes.Op) []locking.Request {
	return machineLocks(u.d.Cfg, op.Str("machine"))
}

func (u *provisionUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	m, err := u.d.Cfg.MustMachine(op.Str("machine"))
	if err != nil {
		return err
	}
	u.UUID, u.Target, u.From = m.UUID, op.Str("target"), states.State(m.ProvisionState)
	ev, _, err := states.NextVerb(u.From, u.Target)
	if err != nil {
		var te *states.TransitionError
		if errors.As(err, &te) {
			return te.ECode(op.Str("machine"))
		}
		return err
	}
	u.Event = ev
	if err := u.checkMachine(m, op); err != nil {
		return err
	}
	u.Manual = states.ManualClean(u.From, ev)
	u.Phases = phasesOf(ev, u.Manual, automatedClean(m))
	for i := range u.Phases {
		if w := u.Phases[i].Work; w != "" {
			u.Phases[i].Impl = *interfaceField(&m.Interfaces, workInterface[w])
			if err := checkImpl(m, w, u.Phases[i].Impl); err != nil {
				return err
			}
		}
	}
	u.TakesOver = m.Reservation
	if needsConductor(m) {
		n, err := u.d.conductor(m)
		if err != nil {
			return err
		}
		u.Conductor = n.UUID
	}
	return nil
}

// checkMachine applies the rules beyond the state table: the machine is
// free (an abort or delete may take it from a job parked in a wait state),
// not in maintenance for a user action, and a rescue has a password hash
// and a rescue interface.
func (u *provisionUnit) checkMachine(m *config.Machine, op *opcodes.Op) error {
	if m.Reservation != "" && !(takesOverWait(u.Event) && waitState(u.From)) {
		return lockedError(m)
	}
	if m.Maintenance {
		return ecode.Errorf(ecode.State, "The requested action \"%s\" could not be understood or is not allowed while node %s is in maintenance mode.", u.Target, m.UUID)
	}
	if u.Event == states.EventRescue {
		if m.Interfaces.Rescue == "no-rescue" || m.Interfaces.Rescue == "" {
			return ecode.Errorf(ecode.Inval, "Node %s does not support rescue: its rescue interface is %q.", m.UUID, m.Interfaces.Rescue)
		}
		if strings.TrimSpace(op.Str("rescue_password_hash")) == "" {
			return ecode.Errorf(ecode.Inval, `A non-empty "rescue_password" is required when setting target provision state to rescue`)
		}
	}
	return nil
}

// takesOverWait says whether ev may act on a machine whose job is parked
// waiting for its agent: abort and delete end that wait.
func takesOverWait(ev states.Event) bool {
	return ev == states.EventAbort || ev == states.EventDelete
}

func waitState(s states.State) bool {
	switch s {
	case states.DeployWait, states.CleanWait, states.RescueWait, states.InspectWait:
		return true
	}
	return false
}

func automatedClean(m *config.Machine) bool {
	return m.AutomatedClean == nil || *m.AutomatedClean
}

// phasesOf lists the work of an action after its first transition.
func phasesOf(ev states.Event, manualClean, autoClean bool) []phase {
	clean := phase{Work: workClean, Then: states.CleanDone(manualClean)}
	switch ev {
	case states.EventManage:
		return []phase{{Work: workVerify, Then: states.EventDone}}
	case states.EventProvide, states.EventClean:
		if !autoClean && !manualClean {
			clean.Work = "" // nothing to erase: straight to available
		}
		return []phase{clean}
	case states.EventInspect:
		return []phase{{Work: workInspect, Then: states.EventDone}}
	case states.EventDeploy, states.EventRebuild:
		return []phase{{Work: workDeploy, Then: states.EventDone}}
	case states.EventDelete:
		if !autoClean {
			clean.Work = ""
		}
		return []phase{{Work: workTearDown, Then: states.EventClean}, clean}
	case states.EventRescue:
		return []phase{{Work: workRescue, Then: states.EventDone}}
	case states.EventUnrescue:
		return []phase{{Work: workUnrescue, Then: states.EventDone}}
	case states.EventAdopt:
		return []phase{{Work: workAdopt, Then: states.EventDone}}
	}
	return nil // abort: the first transition is the whole action
}

func (u *provisionUnit) Steps() []engine.Step {
	steps := []engine.Step{{Name: "accept " + u.Target, Run: u.accept}}
	if u.TakesOver != "" {
		// Once the takeover is committed, the job parked in the wait
		// state wakes, finds the machine no longer its own and ends.
		steps = append(steps, engine.Step{Name: "end the wait of " + u.TakesOver, Run: func(ctx context.Context, s *engine.StepCtx) error {
			if u.d.Notify != nil {
				return u.d.Notify(AgentEvent(u.UUID))
			}
			return nil
		}})
	}
	for i, ph := range u.Phases {
		subs := u.d.workSteps(u, ph)
		for j, sub := range subs {
			last := j == len(subs)-1
			steps = append(steps, engine.Step{Name: sub.name, Run: func(ctx context.Context, s *engine.StepCtx) error {
				return u.runSub(ctx, s, i, sub, last)
			}})
		}
	}
	return steps
}

// A subStep is one step of a phase's work.
type subStep struct {
	name string
	run  func(ctx context.Context, s *engine.StepCtx, m *config.Machine) error
}

// accept makes the first transition and reserves the machine, in the
// same commit: a client polling the machine sees the transient state and
// its target as soon as the job is accepted.
func (u *provisionUnit) accept(ctx context.Context, s *engine.StepCtx) error {
	m, err := s.Cfg().MustMachine(u.UUID)
	if err != nil {
		return err
	}
	mine := Reservation(s.JobID())
	if m.Reservation == mine {
		return nil // committed before a restart
	}
	if string(m.ProvisionState) != string(u.From) {
		return ecode.Errorf(ecode.State, "Node %s changed state to %q before the action started.", m.UUID, m.ProvisionState)
	}
	if err := u.checkMachine(m, s.Op()); err != nil {
		return err
	}
	to, err := states.Next(u.From, u.Event)
	if err != nil {
		return err
	}
	m.LastError = ""
	u.setState(m, to)
	if u.Event == states.EventRescue {
		if m.InstanceInfo == nil {
			m.InstanceInfo = map[string]any{}
		}
		m.InstanceInfo[keyRescueHash] = s.Op().Str("rescue_password_hash")
	}
	keepConfigDrive(m, u.Event, s.Op())
	if u.Conductor != "" {
		m.Conductor = u.Conductor
	}
	if u.TakesOver != "" {
		// The wait this action ends set up a ramdisk boot and a token.
		u.d.undoWork(ctx, s, m)
	}
	if len(u.Phases) == 0 || states.Stable(to) || states.Failure(to) {
		u.finish(m, to)
	} else {
		m.Reservation = mine
		u.Reserved = mine
	}
	s.Tx().PutMachine(m)
	return nil
}

// keepConfigDrive records a deploy's config drive in instance_info and
// drops it when the instance goes.
func keepConfigDrive(m *config.Machine, ev states.Event, op *opcodes.Op) {
	switch ev {
	case states.EventDeploy, states.EventRebuild:
		cd := op.Params["configdrive"]
		if cd == nil {
			delete(m.InstanceInfo, keyConfigDrive)
			return
		}
		if m.InstanceInfo == nil {
			m.InstanceInfo = map[string]any{}
		}
		m.InstanceInfo[keyConfigDrive] = cd
	case states.EventDelete:
		delete(m.InstanceInfo, keyConfigDrive)
	}
}

// setState moves m to state to, with the target the table shows there.
func (u *provisionUnit) setState(m *config.Machine, to states.State) {
	m.ProvisionState = string(to)
	m.TargetProvisionState = ""
	if t, ok := states.Target(to, u.Manual); ok {
		m.TargetProvisionState = string(t)
	}
	stampProvision(u.d, m)
}

// finish frees the machine once it rests (or failed): no target, no
// reservation, no rescue password.
func (u *provisionUnit) finish(m *config.Machine, to states.State) {
	if states.Stable(to) {
		m.TargetProvisionState = ""
	}
	m.Reservation = ""
	delete(m.InstanceInfo, keyRescueHash)
	delete(m.InstanceInfo, keyRescuePass)
}

// runSub runs one step of phase i's work; the phase's last step takes
// its closing transition in the same commit.
func (u *provisionUnit) runSub(ctx context.Context, s *engine.StepCtx, i int, sub subStep, last bool) error {
	m, err := u.own(s)
	if err != nil {
		return err
	}
	if sub.run != nil {
		if err := sub.run(ctx, s, m); err != nil {
			return err
		}
	}
	if !last {
		s.Tx().PutMachine(m)
		return nil
	}
	ph := u.Phases[i]
	to, err := states.Next(states.State(m.ProvisionState), ph.Then)
	if err != nil {
		return err
	}
	u.setState(m, to)
	if i == len(u.Phases)-1 || states.Stable(to) {
		u.finish(m, to)
	}
	s.Tx().PutMachine(m)
	return nil
}

// own reads the machine and checks the job still holds it.
func (u *provisionUnit) own(s *engine.StepCtx) (*config.Machine, error) {
	m, err := s.Cfg().MustMachine(u.UUID)
	if err != nil {
		return nil, err
	}
	if m.Reservation != u.Reserved {
		return nil, errTakenOver(m)
	}
	return m, nil
}

func errTakenOver(m *config.Machine) error {
	return ecode.Errorf(ecode.State, "node %s was taken over by another action (now %q, reserved by %q)", m.UUID, m.ProvisionState, m.Reservation)
}

func (u *provisionUnit) Result() any { return nil }

// Revert moves a machine whose action failed to the failure state the
// table gives, records the error and undoes what the action set up; a
// machine another action took over is left alone.
func (u *provisionUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	if u.Reserved == "" {
		return
	}
	m, ok := s.Cfg().Machine(u.UUID)
	if !ok || m.Reservation != u.Reserved {
		return
	}
	u.d.undoWork(ctx, s, m)
	to, err := states.Next(states.State(m.ProvisionState), states.EventFail)
	if err != nil {
		to = states.Error
	}
	u.setState(m, to)
	u.finish(m, to)
	m.LastError = failed.Error()
	s.Tx().PutMachine(m)
}
