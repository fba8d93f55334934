package query

import (
	"reflect"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ippool"
)

// TestNetworkFields checks the network resource's values as Ganeti's
// query answers them: pool counts and map, external reservations as one
// string, groups as [name, mode, link, vlan], the instances on it, and
// unset optional values unavailable.
func TestNetworkFields(t *testing.T) {
	n := &config.Network{Meta: config.Meta{UUID: "n-1", Name: "net1", Serial: 3, Tags: []string{"a", "b"}},
		Network: "192.0.2.0/29", Gateway: "192.0.2.1"}
	p, err := ippool.Initialize(n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Take(); err != nil {
		t.Fatal(err)
	}
	p.Update(n)
	groups := []*config.NodeGroup{
		{Meta: config.Meta{UUID: "g-2", Name: "rack2"}, Networks: map[string]config.NetParams{"n-1": {Mode: "routed", Link: "100"}}},
		{Meta: config.Meta{UUID: "g-1", Name: "default"}, Networks: map[string]config.NetParams{"n-1": {Mode: "bridged", Link: "br0", VLAN: "7"}}},
		{Meta: config.Meta{UUID: "g-3", Name: "other"}},
	}
	insts := []*config.Instance{
		{Meta: config.Meta{UUID: "i-2", Name: "web2"}, NICs: []config.NIC{{Network: "n-1", IP: "192.0.2.2"}}},
		{Meta: config.Meta{UUID: "i-1", Name: "web1"}, NICs: []config.NIC{{IP: "10.0.0.1"}}},
	}
	rows := NetworkRows([]*config.Network{n}, groups, insts)
	fields := []string{"name", "network", "gateway", "network6", "mac_prefix", "free_count", "reserved_count", "map",
		"external_reservations", "group_cnt", "group_list", "inst_cnt", "inst_list", "serial_no", "tags"}
	got := Networks().Values(rows, fields)[0]
	want := []any{"net1", "192.0.2.0/29", "192.0.2.1", nil, nil, 4, 4, "XXX....X",
		"192.0.2.0, 192.0.2.1, 192.0.2.7", 2, [][]string{{"default", "bridged", "br0", "7"}, {"rack2", "routed", "100", ""}},
		1, []string{"web2"}, int64(3), []string{"a", "b"}}
	for i, f := range fields {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s = %#v, want %#v", f, got[i], want[i])
		}
	}
}
