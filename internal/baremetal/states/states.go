// Package states is the provision state machine of a bare-metal machine, as
// OpenStack Ironic 21.4 defines it: the states and their names on the wire,
// the events that move a machine between them, the API verbs that start
// those events, the target shown while a machine is in a transient state,
// and the sets of states in which deletion and agent lookup are allowed. It
// also names the power targets of the power API. The package is a pure
// table: it decides, it does not act.
package states

import (
	"fmt"

	"github.com/corral/corral/internal/ecode"
)

// A State is a provision state, spelled as the Bare Metal API shows it in
// provision_state and target_provision_state.
type State string

// The provision states.
const (
	Enroll         State = "enroll"
	Verifying      State = "verifying"
	Manageable     State = "manageable"
	Available      State = "available"
	Active         State = "active"
	Deploying      State = "deploying"
	DeployWait     State = "wait call-back"
	DeployFailed   State = "deploy failed"
	Deleting       State = "deleting"
	Cleaning       State = "cleaning"
	CleanWait      State = "clean wait"
	CleanFailed    State = "clean failed"
	Error          State = "error"
	Inspecting     State = "inspecting"
	InspectWait    State = "inspect wait"
	InspectFailed  State = "inspect failed"
	Adopting       State = "adopting"
	AdoptFailed    State = "adopt failed"
	Rescuing       State = "rescuing"
	RescueWait     State = "rescue wait"
	Rescue         State = "rescue"
	RescueFailed   State = "rescue failed"
	Unrescuing     State = "unrescuing"
	UnrescueFailed State = "unrescue failed"
)

var allStates = []State{
	Enroll, Verifying, Manageable, Available, Active,
	Deploying, DeployWait, DeployFailed, Deleting,
	Cleaning, CleanWait, CleanFailed, Error,
	Inspecting, InspectWait, InspectFailed, Adopting, AdoptFailed,
	Rescuing, RescueWait, Rescue, RescueFailed, Unrescuing, UnrescueFailed,
}

// States returns every provision state, in a fixed order.
func States() []State { return append([]State(nil), allStates...) }

// Known reports whether s is one of the provision states.
func Known(s State) bool {
	_, ok := info[s]
	return ok
}

// An Event moves a machine from one state to another. The first twelve are
// started by a user through the API (see Verb); done, fail, wait and resume
// are the conductor's own: an action finished, failed, is waiting for the
// machine to call back, or got that call.
type Event string

// The events.
const (
	EventDeploy   Event = "deploy"
	EventDelete   Event = "delete"
	EventManage   Event = "manage"
	EventProvide  Event = "provide"
	EventInspect  Event = "inspect"
	EventAbort    Event = "abort"
	EventClean    Event = "clean"
	EventAdopt    Event = "adopt"
	EventRescue   Event = "rescue"
	EventUnrescue Event = "unrescue"
	EventRebuild  Event = "rebuild"
	EventDone     Event = "done"
	EventFail     Event = "fail"
	EventWait     Event = "wait"
	EventResume   Event = "resume"
)

var allEvents = []Event{
	EventDeploy, EventDelete, EventManage, EventProvide, EventInspect,
	EventAbort, EventClean, EventAdopt, EventRescue, EventUnrescue,
	EventRebuild, EventDone, EventFail, EventWait, EventResume,
}

// Events returns every event, in a fixed order.
func Events() []Event { return append([]Event(nil), allEvents...) }

// verbs maps the target of PUT /v1/nodes/X/states/provision to its event.
var verbs = map[string]Event{
	"active":   EventDeploy,
	"deploy":   EventDeploy,
	"deleted":  EventDelete,
	"undeploy": EventDelete,
	"manage":   EventManage,
	"provide":  EventProvide,
	"inspect":  EventInspect,
	"abort":    EventAbort,
	"clean":    EventClean,
	"adopt":    EventAdopt,
	"rescue":   EventRescue,
	"unrescue": EventUnrescue,
	"rebuild":  EventRebuild,
}

// Verb returns the event a provision target of the API starts ("active" and
// "deploy" deploy, "deleted" and "undeploy" delete, the other verbs are
// their event's name). The conductor's own events are not verbs.
func Verb(target string) (Event, bool) {
	ev, ok := verbs[target]
	return ev, ok
}

// transitions is Ironic 21.4's table: from state, event, to state. A
// manual clean (manageable —clean→ cleaning) finishes with the manage
// event, an automated one with done, as Ironic's conductor does.
var transitions = []struct {
	from State
	ev   Event
	to   State
}{
	{Enroll, EventManage, Verifying},
	{Verifying, EventDone, Manageable},
	{Verifying, EventFail, Enroll},

	{Manageable, EventProvide, Cleaning},
	{Manageable, EventClean, Cleaning},
	{Manageable, EventInspect, Inspecting},
	{Manageable, EventAdopt, Adopting},

	{Cleaning, EventDone, Available},
	{Cleaning, EventManage, Manageable},
	{Cleaning, EventFail, CleanFailed},
	{Cleaning, EventWait, CleanWait},
	{CleanWait, EventResume, Cleaning},
	{CleanWait, EventFail, CleanFailed},
	{CleanWait, EventAbort, CleanFailed},
	{CleanFailed, EventManage, Manageable},

	{Available, EventDeploy, Deploying},
	{Available, EventManage, Manageable},

	{Deploying, EventDone, Active},
	{Deploying, EventFail, DeployFailed},
	{Deploying, EventWait, DeployWait},
	{DeployWait, EventResume, Deploying},
	{DeployWait, EventFail, DeployFailed},
	{DeployWait, EventDelete, Deleting},
	{DeployFailed, EventDeploy, Deploying},
	{DeployFailed, EventRebuild, Deploying},
	{DeployFailed, EventDelete, Deleting},

	{Active, EventRebuild, Deploying},
	{Active, EventDelete, Deleting},
	{Active, EventRescue, Rescuing},

	{Deleting, EventClean, Cleaning},
	{Deleting, EventFail, Error},
	{Error, EventRebuild, Deploying},
	{Error, EventDelete, Deleting},

	{Inspecting, EventDone, Manageable},
	{Inspecting, EventFail, InspectFailed},
	{Inspecting, EventWait, InspectWait},
	{InspectWait, EventDone, Manageable},
	{InspectWait, EventFail, InspectFailed},
	{InspectWait, EventAbort, InspectFailed},
	{InspectFailed, EventManage, Manageable},
	{InspectFailed, EventInspect, Inspecting},

	{Adopting, EventDone, Active},
	{Adopting, EventFail, AdoptFailed},
	{AdoptFailed, EventAdopt, Adopting},
	{AdoptFailed, EventManage, Manageable},

	{Rescuing, EventDone, Rescue},
	{Rescuing, EventWait, RescueWait},
	{Rescuing, EventFail, RescueFailed},
	{RescueWait, EventResume, Rescuing},
	{RescueWait, EventFail, RescueFailed},
	{RescueWait, EventAbort, RescueFailed},
	{RescueWait, EventDelete, Deleting},
	{Rescue, EventRescue, Rescuing},
	{Rescue, EventUnrescue, Unrescuing},
	{Rescue, EventDelete, Deleting},
	{RescueFailed, EventRescue, Rescuing},
	{RescueFailed, EventUnrescue, Unrescuing},
	{RescueFailed, EventDelete, Deleting},
	{Unrescuing, EventDone, Active},
	{Unrescuing, EventFail, UnrescueFailed},
	{UnrescueFailed, EventRescue, Rescuing},
	{UnrescueFailed, EventUnrescue, Unrescuing},
	{UnrescueFailed, EventDelete, Deleting},
}

var next = func() map[State]map[Event]State {
	m := make(map[State]map[Event]State, len(allStates))
	for _, t := range transitions {
		if m[t.from] == nil {
			m[t.from] = make(map[Event]State)
		}
		m[t.from][t.ev] = t.to
	}
	return m
}()

// Next returns the state ev moves a machine in state from to. An event the
// table does not allow in from (or an unknown state or event) is a
// *TransitionError naming the event as the action.
func Next(from State, ev Event) (State, error) {
	if to, ok := next[from][ev]; ok {
		return to, nil
	}
	return "", &TransitionError{Action: string(ev), State: from}
}

// NextVerb is Next for a provision target of the API: it returns the event
// the target starts and the state it leads to. An unknown target and a
// verb not allowed in from are both a *TransitionError naming the target as
// given, which is what the API answers for either.
func NextVerb(from State, target string) (Event, State, error) {
	ev, ok := Verb(target)
	if !ok {
		return "", "", &TransitionError{Action: target, State: from}
	}
	to, err := Next(from, ev)
	if err != nil {
		return "", "", &TransitionError{Action: target, State: from}
	}
	return ev, to, nil
}

// A TransitionError is an action the state machine does not allow in a
// machine's current state.
type TransitionError struct {
	Action string // the API target or event as requested
	State  State  // the machine's provision state
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf(`the requested action "%s" can not be performed while in state "%s"`, e.Action, e.State)
}

// Message is the Bare Metal API's text for the error on the machine named
// node (its uuid, or the name or uuid the client asked for).
func (e *TransitionError) Message(node string) string {
	return fmt.Sprintf(`The requested action "%s" can not be performed on node "%s" while it is in state "%s".`,
		e.Action, node, e.State)
}

// ECode is the error classified as invalid input (HTTP 400, as the API
// answers), with Message(node) as its text and e in its chain.
func (e *TransitionError) ECode(node string) *ecode.Error {
	return &ecode.Error{Kind: ecode.OpPrereqError, Class: ecode.Inval, Msg: e.Message(node), Err: e}
}
