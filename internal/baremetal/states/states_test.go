package states

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// specTable is the transition table of Ironic 21.4 as the project's
// OpenStack fact sheet writes it (section 5), one "from | event → to; ..."
// row per state, "a/b" for two events with the same result. The manual
// clean's end (cleaning —manage→ manageable) is its own entry there too.
const specTable = `
enroll | manage → verifying
verifying | done → manageable; fail → enroll
manageable | provide → cleaning; clean → cleaning; inspect → inspecting; adopt → adopting
cleaning | done → available; fail → clean failed; wait → clean wait; manage → manageable
clean wait | resume → cleaning; fail → clean failed; abort → clean failed
clean failed | manage → manageable
available | deploy → deploying; manage → manageable
deploying | done → active; fail → deploy failed; wait → wait call-back
wait call-back | resume → deploying; fail → deploy failed; delete → deleting
deploy failed | deploy/rebuild → deploying; delete → deleting
active | rebuild → deploying; delete → deleting; rescue → rescuing
deleting | clean → cleaning; fail → error
error | rebuild → deploying; delete → deleting
inspecting | done → manageable; fail → inspect failed; wait → inspect wait
inspect wait | done → manageable; fail/abort → inspect failed
inspect failed | manage → manageable; inspect → inspecting
adopting | done → active; fail → adopt failed
adopt failed | adopt → adopting; manage → manageable
rescuing | done → rescue; wait → rescue wait; fail → rescue failed
rescue wait | resume → rescuing; fail → rescue failed; abort → rescue failed; delete → deleting
rescue | rescue → rescuing; unrescue → unrescuing; delete → deleting
rescue failed | rescue → rescuing; unrescue → unrescuing; delete → deleting
unrescuing | done → active; fail → unrescue failed
unrescue failed | rescue → rescuing; unrescue → unrescuing; delete → deleting
`

var specStates = []string{
	"enroll", "verifying", "manageable", "available", "active", "deploying",
	"wait call-back", "deploy failed", "deleting", "cleaning", "clean wait",
	"clean failed", "error", "inspecting", "inspect wait", "inspect failed",
	"adopting", "adopt failed", "rescuing", "rescue wait", "rescue",
	"rescue failed", "unrescuing", "unrescue failed",
}

var specEvents = []string{
	"deploy", "delete", "manage", "provide", "inspect", "abort", "clean",
	"adopt", "rescue", "unrescue", "rebuild", "done", "fail", "wait", "resume",
}

type edge struct{ from, event string }

func parseSpecTable(t testing.TB) map[edge]string {
	t.Helper()
	table := map[edge]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(specTable), "\n") {
		from, rest, ok := strings.Cut(line, " | ")
		if !ok {
			t.Fatalf("bad row %q", line)
		}
		for item := range strings.SplitSeq(rest, "; ") {
			evs, to, ok := strings.Cut(item, " → ")
			if !ok {
				t.Fatalf("bad item %q in row %q", item, line)
			}
			for ev := range strings.SplitSeq(evs, "/") {
				if !slices.Contains(specEvents, ev) || !slices.Contains(specStates, from) || !slices.Contains(specStates, to) {
					t.Fatalf("row %q names an unknown state or event", line)
				}
				table[edge{from, ev}] = to
			}
		}
	}
	return table
}

func TestStatesAndEventsAreIronics(t *testing.T) {
	var got []string
	for _, s := range States() {
		got = append(got, string(s))
		if !Known(s) {
			t.Errorf("Known(%q) = false", s)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(specStates))) {
		t.Errorf("States() = %q, want %q", got, specStates)
	}
	got = got[:0]
	for _, e := range Events() {
		got = append(got, string(e))
	}
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(specEvents))) {
		t.Errorf("Events() = %q, want %q", got, specEvents)
	}
	for _, s := range []State{"", "deleted", "deploy complete", "Active", "rebuild", "undeploy"} {
		if Known(s) {
			t.Errorf("Known(%q) = true", s)
		}
	}
}

// TestEveryTransition tries every event in every state: the ones in the
// spec's table go where it says, all others are refused with an error that
// names the event and the state.
func TestEveryTransition(t *testing.T) {
	table := parseSpecTable(t)
	if len(table) != 63 {
		t.Fatalf("spec table has %d transitions, want 63", len(table))
	}
	for _, from := range specStates {
		for _, ev := range specEvents {
			to, err := Next(State(from), Event(ev))
			want, allowed := table[edge{from, ev}]
			switch {
			case allowed && err != nil:
				t.Errorf("%s —%s→: %v, want %s", from, ev, err, want)
			case allowed && string(to) != want:
				t.Errorf("%s —%s→ %s, want %s", from, ev, to, want)
			case !allowed && err == nil:
				t.Errorf("%s —%s→ %s, want refused", from, ev, to)
			case !allowed:
				var te *TransitionError
				if !errors.As(err, &te) || te.Action != ev || string(te.State) != from || to != "" {
					t.Errorf("%s —%s→: %q, %#v: want a TransitionError naming both", from, ev, to, err)
				}
			}
		}
	}
}

// TestSeedRescueTransitions checks the transitions the rescue design adds,
// as its text lists them (from, to), each reachable by one event.
func TestSeedRescueTransitions(t *testing.T) {
	seed := [][2]State{
		{"active", "rescuing"}, {"rescuing", "rescue"}, {"rescuing", "rescue wait"},
		{"rescuing", "rescue failed"}, {"rescue wait", "rescuing"}, {"rescue wait", "rescue failed"},
		{"rescue wait", "deleting"}, {"rescue", "rescuing"}, {"rescue", "deleting"},
		{"rescue", "unrescuing"}, {"unrescuing", "unrescue failed"}, {"unrescuing", "active"},
		{"unrescue failed", "rescuing"}, {"unrescue failed", "unrescuing"}, {"unrescue failed", "deleting"},
		{"rescue failed", "rescuing"}, {"rescue failed", "unrescuing"}, {"rescue failed", "deleting"},
	}
	for _, p := range seed {
		found := false
		for _, ev := range Events() {
			if to, err := Next(p[0], ev); err == nil && to == p[1] {
				found = true
			}
		}
		if !found {
			t.Errorf("no event moves %s to %s", p[0], p[1])
		}
	}
}

func TestVerbs(t *testing.T) {
	want := map[string]string{
		"active": "deploy", "deploy": "deploy", "deleted": "delete", "undeploy": "delete",
		"manage": "manage", "provide": "provide", "inspect": "inspect", "abort": "abort",
		"clean": "clean", "adopt": "adopt", "rescue": "rescue", "unrescue": "unrescue",
		"rebuild": "rebuild",
	}
	for verb, ev := range want {
		got, ok := Verb(verb)
		if !ok || string(got) != ev {
			t.Errorf("Verb(%q) = %q, %v; want %q", verb, got, ok, ev)
		}
	}
	for _, verb := range []string{"", "bogus", "done", "fail", "wait", "resume", "Active", "rescue ", "unhold", "service"} {
		if ev, ok := Verb(verb); ok {
			t.Errorf("Verb(%q) = %q, want not a verb", verb, ev)
		}
	}
}

func TestNextVerbNamesTheTargetAsGiven(t *testing.T) {
	ev, to, err := NextVerb(Available, "active")
	if err != nil || ev != EventDeploy || to != Deploying {
		t.Fatalf("NextVerb(available, active) = %q, %q, %v", ev, to, err)
	}
	ev, to, err = NextVerb(Active, "deleted")
	if err != nil || ev != EventDelete || to != Deleting {
		t.Fatalf("NextVerb(active, deleted) = %q, %q, %v", ev, to, err)
	}
	const id = "2bd7a4c6-4b8f-4a55-9f59-2f8a8f4b6f0e"
	for _, c := range []struct {
		from   State
		target string
		msg    string
	}{
		{Available, "rescue", `The requested action "rescue" can not be performed on node "` + id + `" while it is in state "available".`},
		{Available, "bogus", `The requested action "bogus" can not be performed on node "` + id + `" while it is in state "available".`},
		{Available, "deleted", `The requested action "deleted" can not be performed on node "` + id + `" while it is in state "available".`},
		{Active, "active", `The requested action "active" can not be performed on node "` + id + `" while it is in state "active".`},
		{Rescuing, "done", `The requested action "done" can not be performed on node "` + id + `" while it is in state "rescuing".`},
	} {
		_, _, err := NextVerb(c.from, c.target)
		var te *TransitionError
		if !errors.As(err, &te) {
			t.Fatalf("NextVerb(%s, %s) = %v, want a TransitionError", c.from, c.target, err)
		}
		if got := te.Message(id); got != c.msg {
			t.Errorf("Message = %q\nwant      %q", got, c.msg)
		}
		ee := te.ECode(id)
		if ee.Msg != c.msg || ecode.HTTPStatus(ee) != http.StatusBadRequest || !errors.As(error(ee), &te) {
			t.Errorf("ECode = %#v (status %d), want the message, 400 and the TransitionError in its chain", ee, ecode.HTTPStatus(ee))
		}
	}
}

func TestTargets(t *testing.T) {
	// The fact sheet's "target while in it" list; stable states have none.
	want := map[string]string{
		"verifying": "manageable", "deploying": "active", "wait call-back": "active",
		"deploy failed": "active", "cleaning": "available", "clean wait": "available",
		"clean failed": "available", "deleting": "available", "inspecting": "manageable",
		"inspect wait": "manageable", "inspect failed": "manageable", "adopting": "active",
		"adopt failed": "active", "rescuing": "rescue", "rescue wait": "rescue",
		"rescue failed": "rescue", "unrescuing": "active", "unrescue failed": "active",
	}
	for _, s := range specStates {
		for _, manual := range []bool{false, true} {
			got, ok := Target(State(s), manual)
			exp, transient := want[s]
			if manual && strings.HasPrefix(s, "clean") {
				exp = "manageable"
			}
			if ok != transient || string(got) != exp {
				t.Errorf("Target(%q, manual=%v) = %q, %v; want %q, %v", s, manual, got, ok, exp, transient)
			}
		}
	}
	if got, ok := Target("bogus", false); ok || got != "" {
		t.Errorf("Target(bogus) = %q, %v", got, ok)
	}
}

func TestStateSets(t *testing.T) {
	sets := []struct {
		name string
		fn   func(State) bool
		want []string
	}{
		{"Stable", Stable, []string{"enroll", "manageable", "available", "active", "error", "rescue"}},
		{"Failure", Failure, []string{"deploy failed", "clean failed", "inspect failed", "adopt failed", "rescue failed", "unrescue failed"}},
		{"DeleteAllowed", DeleteAllowed, []string{"manageable", "enroll", "adopt failed", "available"}},
		{"LookupAllowed", LookupAllowed, []string{"deploying", "wait call-back", "cleaning", "clean wait", "inspecting", "inspect wait", "rescuing", "rescue wait"}},
	}
	for _, set := range sets {
		for _, s := range specStates {
			if got, want := set.fn(State(s)), slices.Contains(set.want, s); got != want {
				t.Errorf("%s(%q) = %v, want %v", set.name, s, got, want)
			}
		}
		if set.fn("bogus") || set.fn("") {
			t.Errorf("%s accepts an unknown state", set.name)
		}
	}
}

func TestCheckDelete(t *testing.T) {
	const id = "2bd7a4c6-4b8f-4a55-9f59-2f8a8f4b6f0e"
	err := CheckDelete(Active, false)
	var de *DeleteError
	if !errors.As(err, &de) {
		t.Fatalf("CheckDelete(active) = %v", err)
	}
	want := `Can not delete node "` + id + `" while it is in provision state "active". Valid provision states to perform deletion are: "('manageable', 'enroll', 'adopt failed', 'available')", or set the node into maintenance mode`
	if got := de.Message(id); got != want {
		t.Errorf("Message = %q\nwant      %q", got, want)
	}
	if st := ecode.HTTPStatus(de.ECode(id)); st != http.StatusConflict {
		t.Errorf("ECode status %d, want 409", st)
	}
	if err := CheckDelete(Active, true); err != nil {
		t.Errorf("CheckDelete(active, maintenance) = %v", err)
	}
	for _, s := range DeleteAllowedStates() {
		if err := CheckDelete(s, false); err != nil {
			t.Errorf("CheckDelete(%s) = %v", s, err)
		}
	}
}

func TestPowerTargets(t *testing.T) {
	want := map[string]Power{
		"power on": "power on", "power off": "power off", "rebooting": "power on",
		"soft power off": "power off", "soft rebooting": "power on",
	}
	for target, ends := range want {
		p, ok := PowerTarget(target)
		if !ok || string(p) != target || p.EndsIn() != ends {
			t.Errorf("PowerTarget(%q) = %q, %v, ends in %q; want it, ending in %q", target, p, ok, p.EndsIn(), ends)
		}
	}
	for _, target := range []string{"", "on", "reboot", "Power On", "power cycle"} {
		if p, ok := PowerTarget(target); ok {
			t.Errorf("PowerTarget(%q) = %q, want refused", target, p)
		}
	}
	if Power("bogus").EndsIn() != "" {
		t.Error("an unknown power target ends in a state")
	}
}

// TestWalks follows the actions a client drives, with the target the API
// shows at each transient step.
func TestWalks(t *testing.T) {
	type step struct {
		ev     Event
		to     State
		target State
	}
	walks := map[string]struct {
		from   State
		manual bool
		steps  []step
	}{
		"enroll to active through agent boots": {Enroll, false, []step{
			{EventManage, Verifying, Manageable}, {EventDone, Manageable, ""},
			{EventProvide, Cleaning, Available}, {EventWait, CleanWait, Available},
			{EventResume, Cleaning, Available}, {EventDone, Available, ""},
			{EventDeploy, Deploying, Active}, {EventWait, DeployWait, Active},
			{EventResume, Deploying, Active}, {EventDone, Active, ""},
		}},
		"agent rescue, abort, unrescue, rescue again": {Active, false, []step{
			{EventRescue, Rescuing, Rescue}, {EventWait, RescueWait, Rescue},
			{EventAbort, RescueFailed, Rescue}, {EventUnrescue, Unrescuing, Active},
			{EventDone, Active, ""}, {EventRescue, Rescuing, Rescue},
			{EventWait, RescueWait, Rescue}, {EventResume, Rescuing, Rescue},
			{EventDone, Rescue, ""}, {EventDelete, Deleting, Available},
			{EventClean, Cleaning, Available}, {EventDone, Available, ""},
		}},
		"manual clean": {Manageable, true, []step{
			{EventClean, Cleaning, Manageable}, {EventWait, CleanWait, Manageable},
			{EventFail, CleanFailed, Manageable}, {EventManage, Manageable, ""},
			{EventClean, Cleaning, Manageable}, {CleanDone(true), Manageable, ""},
		}},
	}
	for name, w := range walks {
		s := w.from
		for _, st := range w.steps {
			to, err := Next(s, st.ev)
			if err != nil || to != st.to {
				t.Fatalf("%s: %s —%s→ %q, %v; want %s", name, s, st.ev, to, err, st.to)
			}
			if got, _ := Target(to, w.manual); got != st.target {
				t.Errorf("%s: target in %s = %q, want %q", name, to, got, st.target)
			}
			s = to
		}
	}
	if !ManualClean(Manageable, EventClean) || ManualClean(Manageable, EventProvide) || ManualClean(Deleting, EventClean) {
		t.Error("ManualClean does not tell the clean verb from manageable apart")
	}
	if CleanDone(false) != EventDone {
		t.Error("an automated clean does not end with done")
	}
}

func FuzzNext(f *testing.F) {
	table := parseSpecTable(f)
	for _, s := range specStates {
		for _, e := range specEvents {
			f.Add(s, e)
		}
	}
	f.Add("", "")
	f.Add("rescue\x00", "rescue")
	f.Add("available", "active")
	f.Fuzz(func(t *testing.T, from, ev string) {
		to, err := Next(State(from), Event(ev))
		want, allowed := table[edge{from, ev}]
		if allowed != (err == nil) {
			t.Fatalf("Next(%q, %q) = %q, %v; in table: %v", from, ev, to, err, allowed)
		}
		if err == nil && (string(to) != want || !Known(to)) {
			t.Fatalf("Next(%q, %q) = %q, want %q", from, ev, to, want)
		}
		if err != nil && (to != "" || !strings.Contains(err.Error(), `"`+ev+`"`)) {
			t.Fatalf("Next(%q, %q) = %q, %v", from, ev, to, err)
		}

		vev, vto, verr := NextVerb(State(from), ev)
		pev, isVerb := Verb(ev)
		if isVerb != slices.Contains([]string{"active", "deploy", "deleted", "undeploy", "manage", "provide",
			"inspect", "abort", "clean", "adopt", "rescue", "unrescue", "rebuild"}, ev) {
			t.Fatalf("Verb(%q) = %q, %v", ev, pev, isVerb)
		}
		want, allowed = table[edge{from, string(pev)}]
		if (isVerb && allowed) != (verr == nil) {
			t.Fatalf("NextVerb(%q, %q) = %v; verb %v, in table %v", from, ev, verr, isVerb, allowed)
		}
		if verr == nil && (vev != pev || string(vto) != want) {
			t.Fatalf("NextVerb(%q, %q) = %q, %q, want %q, %q", from, ev, vev, vto, pev, want)
		}
		var te *TransitionError
		if verr != nil && (!errors.As(verr, &te) || te.Action != ev || string(te.State) != from) {
			t.Fatalf("NextVerb(%q, %q) error %#v does not name the target", from, ev, verr)
		}
	})
}
