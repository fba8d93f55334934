package reconcile

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ParseInterval parses one NAME=DURATION setting of a reconciler's own
// interval (corrald's repeatable --reconciler-interval). DURATION is a Go
// duration ("30s", "5m", "1h30m") and must be positive: a reconciler that
// should not run is paused, which an operator can see and undo.
func ParseInterval(spec string) (name string, every time.Duration, err error) {
	name, text, ok := strings.Cut(spec, "=")
	name, text = strings.TrimSpace(name), strings.TrimSpace(text)
	if !ok || name == "" || text == "" {
		return "", 0, fmt.Errorf("reconciler interval %q: want NAME=DURATION, such as instance-restart=30s", spec)
	}
	every, err = time.ParseDuration(text)
	if err != nil {
		return "", 0, fmt.Errorf("reconciler interval %q: %w", spec, err)
	}
	if every <= 0 {
		return "", 0, fmt.Errorf("reconciler interval %q: the duration must be positive (pause a reconciler to stop it)", spec)
	}
	return name, every, nil
}

// CheckNames refuses a name of names that is not one of known, listing
// the known ones, so that a misspelt setting fails at start-up instead of
// being ignored. what, when not "", says where the names come from.
func CheckNames(what string, names []string, known []string) error {
	for _, n := range names {
		if !slices.Contains(known, n) {
			sorted := slices.Sorted(slices.Values(known))
			err := fmt.Errorf("no reconciler is named %q; the reconcilers are: %s", n, strings.Join(sorted, ", "))
			if what != "" {
				err = fmt.Errorf("%s: %w", what, err)
			}
			return err
		}
	}
	return nil
}

// UntilResumed is the pause end that holds a reconciler until an operator
// resumes it.
const UntilResumed = 0

// Pauses are the reconcilers' own pause switches as the cluster
// configuration keeps them: reconciler name -> the Unix time the pause
// ends, or UntilResumed. A reconciler without an entry, or whose pause
// ended, runs.
type Pauses map[string]float64

// PausedUntil reports whether the named reconciler is paused at now, and
// until when (UntilResumed: until resumed).
func (p Pauses) PausedUntil(name string, now time.Time) (until float64, paused bool) {
	until, ok := p[name]
	if !ok {
		return 0, false
	}
	if until == UntilResumed {
		return UntilResumed, true
	}
	return until, until > float64(now.Unix())
}

// With returns a copy of p with name paused until until (UntilResumed or a
// Unix time), and without the pauses that have ended by now.
func (p Pauses) With(name string, until float64, now time.Time) Pauses {
	out := p.live(now)
	out[name] = until
	return out
}

// Without returns a copy of p without name's pause, nor the pauses that
// have ended by now; nil when none is left.
func (p Pauses) Without(name string, now time.Time) Pauses {
	out := p.live(now)
	delete(out, name)
	if len(out) == 0 {
		return nil
	}
	return out
}

// live copies the pauses still in force at now.
func (p Pauses) live(now time.Time) Pauses {
	out := Pauses{}
	for n := range p {
		if until, paused := p.PausedUntil(n, now); paused {
			out[n] = until
		}
	}
	return out
}
