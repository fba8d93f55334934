package query

import (
	"encoding/json"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

func rows() []*InstanceRow {
	c := &config.Cluster{BEParams: config.DefaultBEParams(), HVParams: map[string]config.Params{"fake": {}}}
	up := &config.Node{Meta: config.Meta{Name: "n1", UUID: "u1"}}
	off := &config.Node{Meta: config.Meta{Name: "n2", UUID: "u2"}, Offline: true}
	mk := func(name, admin string, node *config.Node, live *nodeapi.RunningInstance, st int) *InstanceRow {
		return &InstanceRow{Inst: &config.Instance{Meta: config.Meta{Name: name, UUID: name + "-u"}, AdminState: admin,
			Hypervisor: "fake", Disks: []config.Disk{{SizeMiB: 10}, {SizeMiB: 20}}}, Cluster: c, PNode: node, Live: live, LiveState: st}
	}
	return []*InstanceRow{
		mk("a", "up", up, &nodeapi.RunningInstance{MemoryMiB: 128}, RSNormal),
		mk("b", "up", up, nil, RSNormal),
		mk("c", "down", up, nil, RSNormal),
		mk("d", "down", up, &nodeapi.RunningInstance{}, RSNormal),
		mk("e", "up", off, nil, RSOffline),
		mk("f", "offline", up, nil, RSNormal),
	}
}

func TestInstanceStatus(t *testing.T) {
	want := []string{"running", "ERROR_down", "ADMIN_down", "ERROR_up", "ERROR_nodeoffline", "ADMIN_offline"}
	for i, r := range rows() {
		if s, _ := r.Status(); s != want[i] {
			t.Errorf("%s: status %v, want %s", r.Inst.Name, s, want[i])
		}
	}
}

func TestValuesAndCells(t *testing.T) {
	res := Instances()
	if err := res.Check([]string{"name", "bogus"}); err == nil || ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("unknown field: %v", err)
	}
	v := res.Values(rows()[:1], []string{"name", "disk.sizes", "disk_usage", "oper_ram", "beparams"})
	b, _ := json.Marshal(v)
	if string(b) != `[["a",[10,20],30,128,{"always_failover":false,"auto_balance":true,"maxmem":128,"memory":128,"minmem":128,"spindle_use":1,"vcpus":1}]]` {
		t.Fatalf("values: %s", b)
	}
	cells := res.Rows(rows()[4:5], []string{"oper_state", "nope"})
	if cells[0][0][0] != RSOffline || cells[0][1][0] != RSUnknown {
		t.Fatalf("cells: %v", cells)
	}
	if !res.NeedsLive([]string{"name", "status"}) || res.NeedsLive([]string{"name", "pnode"}) {
		t.Fatal("NeedsLive")
	}
}

func TestFilter(t *testing.T) {
	res := Instances()
	cases := []struct {
		filter string
		want   string
	}{
		{`["=", "name", "a"]`, "a"},
		{`["|", ["=", "name", "a"], ["=", "name", "c"]]`, "ac"},
		{`["&", ["=", "admin_state", "up"], ["!", ["=", "status", "running"]]]`, "be"},
		{`["=~", "name", "^[a-c]$"]`, "abc"},
		{`[">", "disk_usage", 29]`, "abcdef"},
		{`["<", "disk_usage", 29]`, ""},
		{`["?", "oper_state"]`, "ad"},
		{`["=[]", "disk.sizes", 20]`, "abcdef"},
		{`["!=", "admin_state", "up"]`, "cdf"},
	}
	for _, c := range cases {
		var f any
		if err := json.Unmarshal([]byte(c.filter), &f); err != nil {
			t.Fatal(err)
		}
		got, err := Filter(res, rows(), f)
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		s := ""
		for _, r := range got {
			s += r.Inst.Name
		}
		if s != c.want {
			t.Errorf("%s: got %q, want %q", c.filter, s, c.want)
		}
	}
	for _, bad := range []string{`[]`, `["=", "nosuch", 1]`, `["~", "name", 1]`, `["=~", "name", "("]`, `["!", 1, 2]`, `"x"`, `[1]`} {
		var f any
		_ = json.Unmarshal([]byte(bad), &f)
		if _, err := Filter(res, rows(), f); err == nil || ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: want an Inval error, got %v", bad, err)
		}
	}
}

func FuzzFilter(f *testing.F) {
	f.Add(`["=", "name", "a"]`)
	f.Add(`["|", ["&", ["?", "oper_state"]], ["!", ["=~", "name", "x"]]]`)
	f.Add(`["<=", "disk_usage", "x"]`)
	f.Add(`[[[[[[]]]]]]`)
	res := Instances()
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		got, err := Filter(res, rows(), v)
		if err != nil {
			if _, ok := ecode.As(err); !ok {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if len(got) > len(rows()) {
			t.Fatal("filter invented rows")
		}
	})
}
