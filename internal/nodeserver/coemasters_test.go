package nodeserver

import (
	"encoding/json"
	"testing"

	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/nodeapi"
)

// TestCOERecordKeepsTheMasters: a master of several is kept in the
// node's record and comes back from it (a daemon restart adopts by
// command line) as its etcd member, the members, leader election and
// whether it runs kwok; a record without masters is one master as before.
func TestCOERecordKeepsTheMasters(t *testing.T) {
	s := coeServer(t)
	r := &coeRecord{Cluster: "c1", Name: "c1", BindAddress: "127.0.0.2",
		Ports: nodeapi.COEControlPlanePorts{APIServer: 20001, EtcdClient: 20002, EtcdPeer: 20003}, UID: 3900001,
		Masters: &nodeapi.COEMasters{Member: "master-1", Members: []nodeapi.COEEtcdMember{
			{Name: "master-0", PeerURL: "https://127.0.0.1:21003", ClientURL: "https://127.0.0.1:21002"},
			{Name: "master-1", PeerURL: "https://127.0.0.2:20003", ClientURL: "https://127.0.0.2:20002"},
		}}}
	if err := s.coe.save(r); err != nil {
		t.Fatal(err)
	}
	back, err := s.coe.record("c1")
	if err != nil {
		t.Fatal(err)
	}
	spec := s.coe.spec(back)
	want := []controlplane.EtcdMember{{Name: "master-0", PeerURL: "https://127.0.0.1:21003", ClientURL: "https://127.0.0.1:21002"},
		{Name: "master-1", PeerURL: "https://127.0.0.2:20003", ClientURL: "https://127.0.0.2:20002"}}
	got, _ := json.Marshal(spec.EtcdMembers)
	exp, _ := json.Marshal(want)
	if spec.EtcdMember != "master-1" || !spec.LeaderElect || !spec.NoKwok || string(got) != string(exp) {
		t.Fatalf("spec from the record: member %q elect %v nokwok %v members %s", spec.EtcdMember, spec.LeaderElect, spec.NoKwok, got)
	}
	one := s.coe.spec(&coeRecord{Cluster: "c2", BindAddress: "127.0.0.1", UID: 3900002})
	if one.EtcdMember != "" || one.LeaderElect || one.NoKwok || one.EtcdMembers != nil {
		t.Fatalf("one master: %+v", one)
	}
}
