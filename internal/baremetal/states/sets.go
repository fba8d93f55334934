package states

import (
	"fmt"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

type stateInfo struct {
	stable  bool
	failure bool
	target  State // shown as target_provision_state; "" for stable states
	lookup  bool  // the agent may look the machine up
}

var info = map[State]stateInfo{
	Enroll:     {stable: true},
	Manageable: {stable: true},
	Available:  {stable: true},
	Active:     {stable: true},
	Error:      {stable: true},
	Rescue:     {stable: true},

	Verifying: {target: Manageable},

	Deploying:    {target: Active, lookup: true},
	DeployWait:   {target: Active, lookup: true},
	DeployFailed: {target: Active, failure: true},

	// Cleaning's target is Available here; Target turns it into
	// Manageable for a manual clean.
	Cleaning:    {target: Available, lookup: true},
	CleanWait:   {target: Available, lookup: true},
	CleanFailed: {target: Available, failure: true},

	Deleting: {target: Available},

	Inspecting:    {target: Manageable, lookup: true},
	InspectWait:   {target: Manageable, lookup: true},
	InspectFailed: {target: Manageable, failure: true},

	Adopting:    {target: Active},
	AdoptFailed: {target: Active, failure: true},

	Rescuing:       {target: Rescue, lookup: true},
	RescueWait:     {target: Rescue, lookup: true},
	RescueFailed:   {target: Rescue, failure: true},
	Unrescuing:     {target: Active},
	UnrescueFailed: {target: Active, failure: true},
}

// Stable reports whether s is a state a machine stays in until someone
// asks for an action: enroll, manageable, available, active, error,
// rescue. target_provision_state is empty (null) in them.
func Stable(s State) bool { return info[s].stable }

// Failure reports whether s is one of the "... failed" states an action
// stops in when it fails: deploy, clean, inspect, adopt, rescue and
// unrescue failed. Error, where a failed tear-down ends, is a stable state
// and not in this set (as in Ironic); a client waiting for an action
// treats both as failure.
func Failure(s State) bool { return info[s].failure }

// Target returns the target_provision_state shown while a machine is in the
// transient state s, and false for a stable or unknown state. Cleaning,
// clean wait and clean failed aim at available after provide or a
// tear-down, but at manageable for a manual clean (the clean verb from
// manageable): manualClean says which. A stored machine's current target
// tells: a clean whose target is manageable is manual.
func Target(s State, manualClean bool) (State, bool) {
	in, ok := info[s]
	if !ok || in.stable {
		return "", false
	}
	if manualClean && (s == Cleaning || s == CleanWait || s == CleanFailed) {
		return Manageable, true
	}
	return in.target, true
}

// ManualClean reports whether ev from state from starts a manual clean, the
// one whose target is manageable and which finishes with the manage event
// rather than done.
func ManualClean(from State, ev Event) bool {
	return from == Manageable && ev == EventClean
}

// CleanDone is the event that ends a successful clean: manage for a manual
// clean (back to manageable), done otherwise (to available).
func CleanDone(manualClean bool) Event {
	if manualClean {
		return EventManage
	}
	return EventDone
}

// deleteAllowed is the order the API lists the states in its refusal.
var deleteAllowed = []State{Manageable, Enroll, AdoptFailed, Available}

// DeleteAllowed reports whether a machine in state s may be deleted (when
// not in maintenance: in maintenance any state may).
func DeleteAllowed(s State) bool {
	for _, a := range deleteAllowed {
		if a == s {
			return true
		}
	}
	return false
}

// DeleteAllowedStates returns the states DeleteAllowed accepts, in the
// order the API's refusal lists them.
func DeleteAllowedStates() []State { return append([]State(nil), deleteAllowed...) }

// A DeleteError refuses to delete a machine in a state where deletion is
// not allowed.
type DeleteError struct {
	State State
}

func (e *DeleteError) Error() string {
	return fmt.Sprintf(`can not delete a machine in provision state "%s"`, e.State)
}

// Message is the Bare Metal API's text for the refusal on the machine with
// uuid node.
func (e *DeleteError) Message(node string) string {
	quoted := make([]string, len(deleteAllowed))
	for i, s := range deleteAllowed {
		quoted[i] = "'" + string(s) + "'"
	}
	return fmt.Sprintf(`Can not delete node "%s" while it is in provision state "%s". `+
		`Valid provision states to perform deletion are: "(%s)", or set the node into maintenance mode`,
		node, e.State, strings.Join(quoted, ", "))
}

// ECode is the error classified as a wrong state (HTTP 409, as the API
// answers), with Message(node) as its text and e in its chain.
func (e *DeleteError) ECode(node string) *ecode.Error {
	return &ecode.Error{Kind: ecode.OpPrereqError, Class: ecode.State, Msg: e.Message(node), Err: e}
}

// CheckDelete returns a *DeleteError unless a machine in state s may be
// deleted; maintenance allows any state.
func CheckDelete(s State, maintenance bool) error {
	if maintenance || DeleteAllowed(s) {
		return nil
	}
	return &DeleteError{State: s}
}

// LookupAllowed reports whether the agent on a machine in state s may look
// the machine up (and so heartbeat): while it deploys, cleans, inspects or
// rescues, the states in which the machine runs the agent's ramdisk.
func LookupAllowed(s State) bool { return info[s].lookup }

// A Power is a target of PUT /v1/nodes/X/states/power, and for "power on"
// and "power off" also a power_state.
type Power string

// The power targets.
const (
	PowerOn       Power = "power on"
	PowerOff      Power = "power off"
	Rebooting     Power = "rebooting"
	SoftPowerOff  Power = "soft power off"
	SoftRebooting Power = "soft rebooting"
)

// PowerTarget returns the power target named target, and false when the
// API does not accept it.
func PowerTarget(target string) (Power, bool) {
	switch p := Power(target); p {
	case PowerOn, PowerOff, Rebooting, SoftPowerOff, SoftRebooting:
		return p, true
	}
	return "", false
}

// EndsIn is the power_state a machine is in once the action p is done, and
// the target_power_state shown meanwhile: power on after power on and both
// reboots, power off after both power offs. An unknown target ends in "".
func (p Power) EndsIn() Power {
	switch p {
	case PowerOn, Rebooting, SoftRebooting:
		return PowerOn
	case PowerOff, SoftPowerOff:
		return PowerOff
	}
	return ""
}
