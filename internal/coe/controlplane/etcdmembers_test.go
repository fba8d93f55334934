package controlplane

import (
	"slices"
	"strconv"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// TestNewWithEtcdMembers: a master of three runs its etcd as its own
// member with the three in the initial cluster, its API server lists its
// own etcd first and then the others', the controller manager and the
// scheduler elect a leader, and without kwok when another master runs it.
// A member list that does not name this node's member at its ports is
// refused.
func TestNewWithEtcdMembers(t *testing.T) {
	base := baseDir(t)
	tools := fakeToolsDir(t, base)
	spec := testSpec(t, base, "c1", tools)
	self := EtcdMember{Name: "master-1", PeerURL: "https://127.0.0.1:" + strconv.Itoa(spec.EtcdPeerPort),
		ClientURL: "https://127.0.0.1:" + strconv.Itoa(spec.EtcdClientPort)}
	spec.EtcdMembers = []EtcdMember{
		{Name: "master-0", PeerURL: "https://192.0.2.1:2380", ClientURL: "https://192.0.2.1:2379"},
		self,
		{Name: "master-2", PeerURL: "https://192.0.2.3:2380", ClientURL: "https://192.0.2.3:2379"},
	}
	spec.EtcdMember, spec.LeaderElect, spec.NoKwok = "master-1", true, true
	cp, err := New(spec)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cp.Components() {
		names = append(names, c.Name)
	}
	if want := []string{Etcd, APIServer, ControllerManager, Scheduler}; !slices.Equal(names, want) {
		t.Fatalf("components %v, want %v", names, want)
	}
	etcd := argsOf(cp, Etcd)
	for _, want := range []string{"--name=master-1",
		"--initial-cluster=master-0=https://192.0.2.1:2380,master-1=" + self.PeerURL + ",master-2=https://192.0.2.3:2380",
		"--initial-advertise-peer-urls=" + self.PeerURL, "--initial-cluster-state=new"} {
		if !slices.Contains(etcd, want) {
			t.Errorf("etcd lacks %s: %v", want, etcd)
		}
	}
	want := "--etcd-servers=" + self.ClientURL + ",https://192.0.2.1:2379,https://192.0.2.3:2379"
	if api := argsOf(cp, APIServer); !slices.Contains(api, want) {
		t.Errorf("kube-apiserver lacks %s: %v", want, api)
	}
	for _, c := range []string{ControllerManager, Scheduler} {
		if !slices.Contains(argsOf(cp, c), "--leader-elect=true") {
			t.Errorf("%s does not elect a leader: %v", c, argsOf(cp, c))
		}
	}
	if got := EtcdInitialCluster(spec.EtcdMembers[:1]); got != "master-0=https://192.0.2.1:2380" {
		t.Errorf("initial cluster of one: %s", got)
	}

	for what, bad := range map[string]func(s *Spec){
		"self missing":     func(s *Spec) { s.EtcdMember = "master-9" },
		"self elsewhere":   func(s *Spec) { s.EtcdMembers[1].PeerURL = "https://127.0.0.1:1" },
		"duplicate member": func(s *Spec) { s.EtcdMembers[2].Name = "master-0" },
		"http peer":        func(s *Spec) { s.EtcdMembers[0].PeerURL = "http://192.0.2.1:2380" },
	} {
		s := spec
		s.EtcdMembers = slices.Clone(spec.EtcdMembers)
		bad(&s)
		if _, err := New(s); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: %v", what, err)
		}
	}
	// One master: etcd named etcd, alone, no leader election.
	one, err := New(testSpec(t, base, "c2", tools))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(argsOf(one, Etcd), "--name=etcd") || !slices.Contains(argsOf(one, Scheduler), "--leader-elect=false") {
		t.Errorf("one master: %v %v", argsOf(one, Etcd), argsOf(one, Scheduler))
	}
}
