package reconcile

import (
	"strings"
	"testing"
	"time"
)

func TestParseInterval(t *testing.T) {
	good := map[string]struct {
		name  string
		every time.Duration
	}{
		"instance-restart=30s": {"instance-restart", 30 * time.Second},
		" job-archive = 1h30m": {"job-archive", 90 * time.Minute},
	}
	for spec, want := range good {
		name, every, err := ParseInterval(spec)
		if err != nil || name != want.name || every != want.every {
			t.Errorf("ParseInterval(%q) = %q, %v, %v; want %q, %v", spec, name, every, err, want.name, want.every)
		}
	}
	for _, spec := range []string{"", "a", "a=", "=1s", "a=1", "a=0s", "a=-1s", "a=soon"} {
		if name, every, err := ParseInterval(spec); err == nil {
			t.Errorf("ParseInterval(%q) = %q, %v; want an error", spec, name, every)
		}
	}
}

func FuzzParseInterval(f *testing.F) {
	for _, s := range []string{"instance-restart=30s", "a=1h", "=", "a==1s", "a=9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		name, every, err := ParseInterval(spec)
		if err != nil {
			return
		}
		if name == "" || every <= 0 || strings.Contains(name, "=") {
			t.Fatalf("ParseInterval(%q) = %q, %v: accepted a setting it must refuse", spec, name, every)
		}
	})
}

func TestCheckNames(t *testing.T) {
	known := []string{"b", "a"}
	if err := CheckNames("flag", []string{"a", "b"}, known); err != nil {
		t.Fatal(err)
	}
	err := CheckNames("flag", []string{"a", "c"}, known)
	if err == nil || err.Error() != `flag: no reconciler is named "c"; the reconcilers are: a, b` {
		t.Fatalf("CheckNames = %v", err)
	}
}

func TestPauses(t *testing.T) {
	now := time.Unix(1000, 0)
	var p Pauses
	if _, paused := p.PausedUntil("a", now); paused {
		t.Fatal("no pause switch set, yet paused")
	}
	p = p.With("a", UntilResumed, now).With("b", 2000, now).With("c", 500, now)
	for name, want := range map[string]bool{"a": true, "b": true, "c": false, "d": false} {
		if _, paused := p.PausedUntil(name, now); paused != want {
			t.Errorf("%s paused %v, want %v", name, paused, want)
		}
	}
	if until, _ := p.PausedUntil("b", now); until != 2000 {
		t.Errorf("b paused until %v", until)
	}
	if _, paused := p.PausedUntil("b", time.Unix(2000, 0)); paused {
		t.Error("b still paused when its pause ends")
	}
	if _, paused := p.PausedUntil("a", time.Unix(1<<40, 0)); !paused {
		t.Error("a pause until resumed ended by itself")
	}
	// Setting or clearing one switch drops the pauses that ended.
	q := p.Without("a", now)
	if len(q) != 1 || q["b"] != 2000 {
		t.Errorf("Without(a) = %v, want only b", q)
	}
	if _, paused := p.PausedUntil("a", now); !paused {
		t.Error("Without changed the pauses it was called on")
	}
	if q := q.Without("b", now); q != nil {
		t.Errorf("Without the last pause = %v, want nil", q)
	}
}
