package devcluster

import (
	"context"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
)

func TestOptionsMasters(t *testing.T) {
	for _, tc := range []struct {
		store   string
		masters int
		want    int
		err     string
	}{
		{store: "bbolt", want: 1},
		{store: "bbolt", masters: 1, want: 1},
		{store: "bbolt", masters: 3, err: "need --store etcd"},
		{store: "etcd", want: 1},
		{store: "etcd", masters: 3, want: 3},
		{store: "etcd", masters: -1, err: "1 to 9"},
		{store: "etcd", masters: 10, err: "1 to 9"},
	} {
		o := Options{StateDir: t.TempDir(), BinDir: "/bin", Hypervisors: []string{"fake"}, Store: tc.store, Masters: tc.masters}
		err := o.fill()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("store %s masters %d: %v, want error %q", tc.store, tc.masters, err, tc.err)
			}
			continue
		}
		if err != nil || o.Masters != tc.want {
			t.Errorf("store %s masters %d: %v, got %d, want %d", tc.store, tc.masters, err, o.Masters, tc.want)
		}
	}
}

func TestCandidates(t *testing.T) {
	st := &State{RunDir: "/run/crl-x", Socket: "/run/crl-x/master/luxi.sock", Procs: []Proc{
		{Name: "corral-node node1"}, {Name: "corrald"}, {Name: EtcdMemberName(1)},
		{Name: "corrald 2", Args: []string{"/bin/corrald", "--candidate-name", "node1-2", "--forward-address", "127.0.0.1:4242"}}, {Name: "corrald 3"},
	}}
	want := []Candidate{
		{Proc: "corrald", Name: "node1", Socket: "/run/crl-x/master/luxi.sock"},
		{Proc: "corrald 2", Name: "node1-2", Socket: "/run/crl-x/c2/master/luxi.sock", Forward: "127.0.0.1:4242"},
		{Proc: "corrald 3", Name: "node1-3", Socket: "/run/crl-x/c3/master/luxi.sock"},
	}
	if got := st.Candidates(); !reflect.DeepEqual(got, want) {
		t.Fatalf("candidates %+v, want %+v", got, want)
	}
	// Nobody answers on sockets that do not exist.
	st.RunDir, st.Socket = t.TempDir(), ""
	if _, err := Leader(context.Background(), st); !errors.Is(err, ErrNoMaster) {
		t.Fatalf("leader of a dead cluster: %v", err)
	}
}

func TestCandidateArgs(t *testing.T) {
	got, err := candidateArgs("/run/crl-x", 2, Options{}.candidateName(2), false)
	if want := []string{"--candidate-name", "node1-2", "--candidate-address", "/run/crl-x/c2/master/luxi.sock"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("without forwarding: %q, %v; want %q", got, err, want)
	}
	got, err = candidateArgs("/run/crl-x", 3, Options{CandidatesOnNodes: true}.candidateName(3), true)
	if err != nil || len(got) != 4 || got[0] != "--candidate-name" || got[1] != "node3" || got[2] != "--forward-address" {
		t.Fatalf("with forwarding: %q, %v", got, err)
	}
	host, port, err := net.SplitHostPort(got[3])
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("forward address %q: %v", got[3], err)
	}
	// The dev cluster reads it back from the process's arguments.
	st := &State{RunDir: "/run/crl-x", Procs: []Proc{{Name: "corrald"}, {Name: "corrald 2"}, {Name: "corrald 3", Args: append([]string{"/bin/corrald"}, got...)}}}
	if c := st.Candidates()[2]; c.Forward != got[3] {
		t.Fatalf("candidate %+v, want forward address %s", c, got[3])
	}
}
