package cmdlib

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/storecfg"
)

// fakeEtcd is an etcd cluster's membership as the API shows it. A learner
// is refused promotion notReady times, and removals are refused as unsafe
// unsafe times, as a real cluster does right after a change.
type fakeEtcd struct {
	mu       sync.Mutex
	members  []etcdproc.MemberInfo
	next     uint64
	adds     int
	notReady int
	unsafe   int
	unhealth map[string]bool // member names Health reports unhealthy
}

func (f *fakeEtcd) Members(ctx context.Context) ([]etcdproc.MemberInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members), nil
}

func (f *fakeEtcd) AddLearner(ctx context.Context, peerURL string) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	f.adds++
	f.members = append(f.members, etcdproc.MemberInfo{ID: f.next, PeerURLs: []string{peerURL}, Learner: true})
	return f.next, nil
}

func (f *fakeEtcd) PromoteMember(ctx context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.members {
		if f.members[i].ID != id {
			continue
		}
		if f.members[i].Name == "" || f.notReady > 0 {
			f.notReady--
			return fmt.Errorf("fake: %w", store.ErrLearnerNotReady)
		}
		f.members[i].Learner = false
		return nil
	}
	return store.ErrMemberNotFound
}

func (f *fakeEtcd) RemoveMember(ctx context.Context, id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unsafe > 0 {
		f.unsafe--
		return fmt.Errorf("fake: %w", store.ErrReconfigUnsafe)
	}
	for i := range f.members {
		if f.members[i].ID == id {
			f.members = slices.Delete(f.members, i, i+1)
			return nil
		}
	}
	return store.ErrMemberNotFound
}

func (f *fakeEtcd) health(ctx context.Context) ([]store.MemberHealth, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.MemberHealth
	for _, m := range f.members {
		out = append(out, store.MemberHealth{Name: m.Name, Healthy: !f.unhealth[m.Name]})
	}
	return out, nil
}

func (f *fakeEtcd) byName(name string) *etcdproc.MemberInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.members {
		if m.Name == name {
			return &m
		}
	}
	return nil
}

// etcdNode is the node daemon's side: starting a member gives it its name
// (as a started etcd member announces itself).
type etcdNode struct {
	*nodeDouble
	etcd   *fakeEtcd
	starts []nodeapi.EtcdMemberStartArgs
	stops  []string
}

func (n *etcdNode) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	switch method {
	case nodeapi.EtcdMemberStart:
		a := args.(nodeapi.EtcdMemberStartArgs)
		n.etcd.mu.Lock()
		n.starts = append(n.starts, a)
		for i := range n.etcd.members {
			if slices.Contains(n.etcd.members[i].PeerURLs, a.PeerURL) {
				n.etcd.members[i].Name = a.Name
				n.etcd.members[i].ClientURLs = []string{a.ClientURL}
			}
		}
		n.etcd.mu.Unlock()
	case nodeapi.EtcdMemberStop:
		n.etcd.mu.Lock()
		n.stops = append(n.stops, args.(nodeapi.EtcdMemberStopArgs).Name)
		n.etcd.mu.Unlock()
	}
	return n.nodeDouble.Call(ctx, node, method, opID, args, reply)
}

// openEtcdEnv is openEnv with a processor that manages etcd members.
func openEtcdEnv(t *testing.T, f *fakeEtcd, managed bool) (*env, *etcdNode) {
	t.Helper()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	e.q.Stop()
	node := &etcdNode{nodeDouble: e.node, etcd: f}
	ca, err := pki.NewCA("c1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	proc := NewProcessor(e.cfg, node, slog.New(slog.DiscardHandler))
	proc.StoreHealth = f.health
	proc.Etcd = &EtcdMembership{API: f, CA: ca}
	if managed {
		proc.Etcd.Managed = &storecfg.ManagedMembers{ClientPort: 2379, PeerPort: 2380}
	}
	q, err := jobqueue.New(jobqueue.Options{Store: e.st, Runner: newEngine(t, proc), Summary: opcodes.Default().Summary})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.q = q
	t.Cleanup(e.close)
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("node add: %s %v", st, res)
	}
	return e, node
}

func setCandidate(t *testing.T, e *env, node string, on bool) (string, []any) {
	t.Helper()
	return e.run(t, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, "master_candidate": on})
}

func bootstrapMember() etcdproc.MemberInfo {
	return etcdproc.MemberInfo{ID: 100, Name: "m0", PeerURLs: []string{"https://127.0.0.2:40000"}, ClientURLs: []string{"https://127.0.0.2:40001"}}
}

func TestEtcdPromoteDemote(t *testing.T) {
	f := &fakeEtcd{members: []etcdproc.MemberInfo{bootstrapMember()}, notReady: 2, unsafe: 2}
	e, node := openEtcdEnv(t, f, true)
	// n2 became a candidate when added, without a member: demoting it
	// changes no member.
	if st, res := setCandidate(t, e, "n2", false); st != "success" {
		t.Fatalf("demote: %s %v", st, res)
	}
	// (the node is still asked to clean up what an interrupted demotion
	// may have left.)
	if len(f.members) != 1 || !slices.Equal(node.stops, []string{"n2"}) {
		t.Fatalf("demoting a node without a member: members %+v, stops %v", f.members, node.stops)
	}
	node.stops = nil
	if st, res := setCandidate(t, e, "n2", true); st != "success" {
		t.Fatalf("promote: %s %v", st, res)
	}
	m := f.byName("n2")
	if m == nil || m.Learner || m.PeerURLs[0] != "https://127.0.0.3:2380" {
		t.Fatalf("after promotion n2's member is %+v, want a voter at https://127.0.0.3:2380", m)
	}
	if len(node.starts) != 1 {
		t.Fatalf("%d member starts, want 1", len(node.starts))
	}
	a := node.starts[0]
	if want := "m0=https://127.0.0.2:40000,n2=https://127.0.0.3:2380"; a.InitialCluster != want {
		t.Fatalf("initial cluster %q, want %q", a.InitialCluster, want)
	}
	certs, err := pki.ParseCertificatesPEM([]byte(a.CertPEM))
	if err != nil || len(certs) != 1 || !slices.Contains(certs[0].DNSNames, etcdproc.PeerHostname) || len(certs[0].IPAddresses) != 2 || a.KeyPEM == "" {
		t.Fatalf("member certificate %v (%v), key %d bytes", certs, err, len(a.KeyPEM))
	}
	if n2, _ := e.cfg.Node("n2"); !n2.MasterCandidate {
		t.Fatal("n2 is no candidate after its promotion")
	}
	// Promoting again changes nothing.
	if st, _ := setCandidate(t, e, "n2", true); st != "success" || f.adds != 1 || len(node.starts) != 1 {
		t.Fatalf("repeated promotion: %s, %d adds, %d starts", st, f.adds, len(node.starts))
	}

	if st, res := setCandidate(t, e, "n2", false); st != "success" {
		t.Fatalf("demote: %s %v", st, res)
	}
	if len(f.members) != 1 || f.members[0].Name != "m0" || !slices.Equal(node.stops, []string{"n2"}) {
		t.Fatalf("after demotion members %+v, stops %v", f.members, node.stops)
	}
	if n2, _ := e.cfg.Node("n2"); n2.MasterCandidate {
		t.Fatal("n2 is still a candidate")
	}
}

// A promotion that stopped after adding the learner (or after starting
// it) is finished by promoting again, without a second member.
func TestEtcdPromotionResumes(t *testing.T) {
	f := &fakeEtcd{members: []etcdproc.MemberInfo{bootstrapMember()}}
	e, node := openEtcdEnv(t, f, true)
	f.members = append(f.members, etcdproc.MemberInfo{ID: 7, PeerURLs: []string{"https://127.0.0.3:2380"}, Learner: true})
	if st, res := setCandidate(t, e, "n2", true); st != "success" {
		t.Fatalf("promote: %s %v", st, res)
	}
	if f.adds != 0 || len(f.members) != 2 {
		t.Fatalf("%d adds, members %+v: want the existing learner reused", f.adds, f.members)
	}
	if m := f.byName("n2"); m == nil || m.ID != 7 || m.Learner {
		t.Fatalf("n2's member %+v, want learner 7 promoted", m)
	}
	if len(node.starts) != 1 || !strings.Contains(node.starts[0].InitialCluster, "n2=https://127.0.0.3:2380") {
		t.Fatalf("starts %+v", node.starts)
	}
}

func TestEtcdDemotionRefusedWithoutQuorum(t *testing.T) {
	f := &fakeEtcd{members: []etcdproc.MemberInfo{bootstrapMember()}}
	e, node := openEtcdEnv(t, f, true)
	if st, res := setCandidate(t, e, "n2", true); st != "success" {
		t.Fatalf("promote: %s %v", st, res)
	}
	// Two voters, m0 down: removing n2 would leave m0 alone and dead.
	f.mu.Lock()
	f.unhealth = map[string]bool{"m0": true}
	f.mu.Unlock()
	st, res := setCandidate(t, e, "n2", false)
	if b, _ := json.Marshal(res); st != "error" || !strings.Contains(string(b), "no quorum") {
		t.Fatalf("demotion with m0 down: %s %v, want refused for quorum", st, res)
	}
	if f.byName("n2") == nil || len(node.stops) != 0 {
		t.Fatal("a refused demotion removed or stopped the member")
	}
	if n2, _ := e.cfg.Node("n2"); !n2.MasterCandidate {
		t.Fatal("a refused demotion changed the node")
	}
}

func TestEtcdUnmanagedMembersUntouched(t *testing.T) {
	f := &fakeEtcd{members: []etcdproc.MemberInfo{bootstrapMember()}}
	e, node := openEtcdEnv(t, f, false)
	if st, _ := setCandidate(t, e, "n2", false); st != "success" {
		t.Fatal("demote failed")
	}
	if st, _ := setCandidate(t, e, "n2", true); st != "success" {
		t.Fatal("promote failed")
	}
	if f.adds != 0 || len(f.members) != 1 || len(node.starts)+len(node.stops) != 0 {
		t.Fatalf("operator-run members changed: %d adds, %+v", f.adds, f.members)
	}
}

func TestCheckRemoval(t *testing.T) {
	v := func(id uint64, name string) etcdproc.MemberInfo {
		return etcdproc.MemberInfo{ID: id, Name: name}
	}
	l := func(id uint64, name string) etcdproc.MemberInfo {
		return etcdproc.MemberInfo{ID: id, Name: name, Learner: true}
	}
	for _, tc := range []struct {
		name    string
		ms      []etcdproc.MemberInfo
		target  int
		healthy map[string]bool
		err     string
	}{
		{"last voter", []etcdproc.MemberInfo{v(1, "a")}, 0, map[string]bool{"a": true}, "last voting"},
		{"last voter beside a learner", []etcdproc.MemberInfo{v(1, "a"), l(2, "b")}, 0, map[string]bool{"a": true, "b": true}, "last voting"},
		{"learner", []etcdproc.MemberInfo{v(1, "a"), l(2, "b")}, 1, nil, ""},
		{"two to one", []etcdproc.MemberInfo{v(1, "a"), v(2, "b")}, 1, map[string]bool{"a": true}, ""},
		{"two to one dead", []etcdproc.MemberInfo{v(1, "a"), v(2, "b")}, 1, map[string]bool{"b": true}, "no quorum"},
		{"health unknown", []etcdproc.MemberInfo{v(1, "a"), v(2, "b")}, 1, nil, "no quorum"},
		{"three to two, one dead", []etcdproc.MemberInfo{v(1, "a"), v(2, "b"), v(3, "c")}, 2, map[string]bool{"a": true}, "no quorum"},
		{"three to two", []etcdproc.MemberInfo{v(1, "a"), v(2, "b"), v(3, "c")}, 2, map[string]bool{"a": true, "b": true}, ""},
		{"remove the dead one", []etcdproc.MemberInfo{v(1, "a"), v(2, "b"), v(3, "c")}, 2, map[string]bool{"a": true, "b": true, "c": false}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkRemoval(tc.ms, &tc.ms[tc.target], tc.healthy)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("checkRemoval = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestFindMember(t *testing.T) {
	ms := []etcdproc.MemberInfo{{ID: 1, Name: "a", PeerURLs: []string{"https://1:2380"}}, {ID: 2, PeerURLs: []string{"https://2:2380"}}}
	for _, tc := range []struct {
		name, peer string
		want       uint64
	}{
		{"a", "https://9:2380", 1}, {"b", "https://2:2380", 2}, {"b", "https://3:2380", 0}, {"", "", 0},
	} {
		got := findMember(ms, tc.name, tc.peer)
		if (got == nil) != (tc.want == 0) || got != nil && got.ID != tc.want {
			t.Errorf("findMember(%q, %q) = %+v, want id %d", tc.name, tc.peer, got, tc.want)
		}
	}
}

func TestEtcdMismatches(t *testing.T) {
	nodes := []*config.Node{
		{Meta: config.Meta{UUID: "u1", Name: "n1"}, MasterCandidate: true},
		{Meta: config.Meta{UUID: "u2", Name: "n2"}, MasterCandidate: true},
		{Meta: config.Meta{UUID: "u3", Name: "n3"}},
		{Meta: config.Meta{UUID: "u4", Name: "n4"}, MasterCandidate: true},
		{Meta: config.Meta{UUID: "u5", Name: "n5"}, MasterCandidate: true},
	}
	ms := []etcdproc.MemberInfo{
		{ID: 1, Name: "m0"},                // bootstrap's: not judged
		{ID: 2, Name: "n2"},                // fine
		{ID: 3, Name: "n3"},                // demoted node still a member
		{ID: 4, Name: "n4", Learner: true}, // promotion not finished
		{ID: 5, PeerURLs: []string{"p5"}},  // never started
	}
	errs, warns := etcdMismatches(ms, nodes, "u1")
	wantErrs := []string{"member 5 at [p5] was added but never started", "member n3 runs on n3, which is not a master candidate", "member n4 is still a learner"}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors %q, want %d", errs, len(wantErrs))
	}
	for _, w := range wantErrs {
		if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, w) }) {
			t.Errorf("no error containing %q in %q", w, errs)
		}
	}
	// n4 has a learner only, n5 nothing; n1 is the master.
	if len(warns) != 2 || !strings.Contains(warns[0], "candidate n4 runs no etcd member") || !strings.Contains(warns[1], "candidate n5") {
		t.Fatalf("warnings %q", warns)
	}
}
