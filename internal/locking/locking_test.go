package locking

import (
	"errors"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    Level
		wantErr bool
	}{
		{"cluster", LevelCluster, false},
		{"node_alloc", LevelNodeAlloc, false},
		{"node-alloc", LevelNodeAlloc, false},
		{"instance", LevelInstance, false},
		{"nodegroup", LevelNodeGroup, false},
		{"network", LevelNetwork, false},
		{"node", LevelNode, false},
		{"node_res", LevelNodeRes, false},
		{"node-res", LevelNodeRes, false},
		{"", 0, true},
		{"Instance", 0, true},
		{"instances", 0, true},
		{"level(3)", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.in)
		if tt.wantErr {
			if !errors.Is(err, ErrInvalid) || ecode.ClassOf(err) != ecode.Inval {
				t.Errorf("ParseLevel(%q) error = %v, want ErrInvalid of class Inval", tt.in, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestLevelStringOrder(t *testing.T) {
	want := []string{"cluster", "node_alloc", "instance", "nodegroup", "network", "node", "node_res", "machine", "coe"}
	levels := Levels()
	if len(levels) != len(want) {
		t.Fatalf("Levels() has %d levels, want %d", len(levels), len(want))
	}
	for i, l := range levels {
		if l.String() != want[i] {
			t.Errorf("level %d = %q, want %q", i, l.String(), want[i])
		}
		if i > 0 && levels[i-1] >= l {
			t.Errorf("levels out of order at %d", i)
		}
	}
	if got := Level(42).String(); got != "level(42)" {
		t.Errorf("Level(42).String() = %q", got)
	}
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"shared", Shared, false},
		{"exclusive", Exclusive, false},
		{"", 0, true},
		{"Shared", 0, true},
		{"excl", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if tt.wantErr != (err != nil) || (err == nil && got != tt.want) {
			t.Errorf("ParseMode(%q) = %v, %v", tt.in, got, err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseMode(%q) error %v is not ErrInvalid", tt.in, err)
		}
	}
}

// FuzzParseLevel checks that whatever parses prints back to a name that
// parses to the same level, and that failures are classified.
func FuzzParseLevel(f *testing.F) {
	for _, s := range []string{"cluster", "node_alloc", "node-alloc", "instance", "nodegroup", "network", "node", "node_res", "node-res", "", "*", "node_\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLevel(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseLevel(%q): unclassified error %v", s, err)
			}
			return
		}
		if !l.valid() {
			t.Fatalf("ParseLevel(%q) = invalid level %d", s, int(l))
		}
		back, err := ParseLevel(l.String())
		if err != nil || back != l {
			t.Fatalf("round trip of %q: %v, %v", s, back, err)
		}
	})
}

func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"shared", "exclusive", "", "EXCLUSIVE", "shared "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMode(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseMode(%q): unclassified error %v", s, err)
			}
			return
		}
		if m.String() != s {
			t.Fatalf("ParseMode(%q) = %v, which prints differently", s, m)
		}
	})
}
