package config

import (
	"regexp"
	"testing"
	"time"
)

func TestFillAndStrings(t *testing.T) {
	def := Params{"a": float64(1), "b": true, "c": "x"}
	got := Fill(def, Params{"b": false, "d": 2.5})
	want := map[string]string{"a": "1", "b": "False", "c": "x", "d": "2.5"}
	for k, v := range want {
		if got.Strings()[k] != v {
			t.Errorf("%s: %q, want %q", k, got.Strings()[k], v)
		}
	}
	if def["b"] != true {
		t.Fatal("Fill changed the defaults")
	}
}

func TestTouch(t *testing.T) {
	var m Meta
	now := time.Unix(1000, 500000000)
	m.Touch(now)
	if m.UUID == "" || m.Serial != 1 || m.CTime != 1000.5 || m.MTime != 1000.5 {
		t.Fatalf("first touch: %+v", m)
	}
	m.Touch(now.Add(time.Second))
	if m.Serial != 2 || m.CTime != 1000.5 || m.MTime != 1001.5 {
		t.Fatalf("second touch: %+v", m)
	}
}

func TestCloneIsDeep(t *testing.T) {
	i := &Instance{Meta: Meta{Tags: []string{"a"}}, BEParams: Params{"vcpus": 1.0}, NICs: []NIC{{MAC: "m"}}}
	c := i.Clone()
	c.Tags[0], c.BEParams["vcpus"], c.NICs[0].MAC = "b", 2.0, "n"
	if i.Tags[0] != "a" || i.BEParams["vcpus"] != 1.0 || i.NICs[0].MAC != "m" {
		t.Fatal("clone shares state with the original")
	}
	cl := &Cluster{HVParams: map[string]Params{"kvm": {"acpi": true}}}
	cc := cl.Clone()
	cc.HVParams["kvm"]["acpi"] = false
	if cl.HVParams["kvm"]["acpi"] != true {
		t.Fatal("cluster clone shares hvparams")
	}
}

func TestRolesAndMemory(t *testing.T) {
	n := &Node{Meta: Meta{UUID: "u"}}
	for _, c := range []struct {
		mod  func(*Node)
		want string
	}{
		{func(n *Node) {}, "R"}, {func(n *Node) { n.MasterCandidate = true }, "C"},
		{func(n *Node) { n.MasterCandidate = false; n.Drained = true }, "D"},
		{func(n *Node) { n.Drained = false; n.Offline = true }, "O"},
	} {
		c.mod(n)
		if r := n.Role("other"); r != c.want {
			t.Errorf("role %s, want %s", r, c.want)
		}
	}
	if n.Role("u") != "M" || RoleName("C") != "master-candidate" {
		t.Fatal("master role")
	}
	if MemoryMiB(Params{"maxmem": 512.0}) != 512 || VCPUs(Params{}) != 1 {
		t.Fatal("be accessors")
	}
	if !regexp.MustCompile(`^aa:00:00(:[0-9a-f]{2}){3}$`).MatchString(NewMAC("aa:00:00")) {
		t.Fatal("MAC format")
	}
	if typ, ok := BEParamType("memory"); !ok || typ != "int" {
		t.Fatal("memory is an int backend parameter")
	}
	if _, ok := BEParamType("nope"); ok {
		t.Fatal("unknown backend parameter accepted")
	}
}
