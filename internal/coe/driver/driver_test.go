package driver

import (
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
)

type provider struct {
	Driver
	name string
	p    []Provision
}

func (p provider) Type() string          { return p.name }
func (p provider) Provides() []Provision { return p.p }

// TestChooseTakesAnExactOSBeforeAnyOS: a driver naming the os wins over
// one serving any os; any os serves the rest of its server type only.
func TestChooseTakesAnExactOSBeforeAnyOS(t *testing.T) {
	r := NewRegistry(
		provider{name: "a-any", p: []Provision{{ServerType: "bm", OS: AnyOS, COE: "kubernetes"}}},
		provider{name: "b-exact", p: []Provision{{ServerType: "bm", OS: "flatcar", COE: "kubernetes"}}},
		provider{name: "vm", p: []Provision{{ServerType: "vm", OS: "kwok", COE: "kubernetes"}}},
	)
	for _, tc := range []struct{ st, os, want string }{
		{"bm", "flatcar", "b-exact"},
		{"bm", "debian", "a-any"},
		{"vm", "kwok", "vm"},
	} {
		d, err := r.Choose(tc.st, tc.os, "kubernetes")
		if err != nil || d.Type() != tc.want {
			t.Errorf("Choose(%s, %s) = %v, %v; want %s", tc.st, tc.os, d, err, tc.want)
		}
	}
	if _, err := r.Choose("vm", "debian", "kubernetes"); err == nil || !strings.Contains(err.Error(), "(vm, debian, kubernetes) not supported") {
		t.Errorf("vm debian: %v", err)
	}
}

// TestPlaceInt reads the placement's numbers in every form they arrive in:
// set by this process, or decoded from the store.
func TestPlaceInt(t *testing.T) {
	c := &Cluster{COECluster: &config.COECluster{}}
	if got := c.PlaceInt("none"); got != 0 {
		t.Fatalf("unset: %d", got)
	}
	c.SetPlace("int", 7)
	c.SetPlace("int64", int64(1<<40))
	c.SetPlace("float", float64(42))
	c.SetPlace("string", "1700000000")
	c.SetPlace("junk", "x")
	for k, want := range map[string]int64{"int": 7, "int64": 1 << 40, "float": 42, "string": 1700000000, "junk": 0} {
		if got := c.PlaceInt(k); got != want {
			t.Errorf("PlaceInt(%s) = %d, want %d", k, got, want)
		}
	}
}
