package etcdstore

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/store"
)

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// TestMemberLifecycle adds a learner to a one-member cluster, starts it,
// promotes it once it has caught up, and removes it again: the membership
// changes a promotion and a demotion of a master candidate make.
func TestMemberLifecycle(t *testing.T) {
	bin := etcdtest.Require(t)
	ctx := ctxT(t)
	dir := t.TempDir()
	c, err := etcdproc.Start(ctx, etcdproc.Config{Binary: bin, Dir: dir, ExitWithParent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop() })
	s := openT(t, Options{Endpoints: c.Endpoints(), Prefix: "/m/"})

	ms, err := s.Members(ctx)
	if err != nil || len(ms) != 1 || ms[0].Name != "m0" || ms[0].Learner {
		t.Fatalf("members %+v, %v; want m0 alone", ms, err)
	}
	peer := "http://127.0.0.1:" + freePort(t)
	client := "http://127.0.0.1:" + freePort(t)
	id, err := s.AddLearner(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}
	ms, err = s.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members after add %+v, %v", ms, err)
	}
	var added etcdproc.MemberInfo
	for _, m := range ms {
		if m.ID == id {
			added = m
		}
	}
	if !added.Learner || added.Name != "" || len(added.PeerURLs) != 1 || added.PeerURLs[0] != peer {
		t.Fatalf("added member %+v: want an unstarted learner at %s", added, peer)
	}
	// Promoting a learner that has not started must be refused, never
	// count a dead voter.
	if err := s.PromoteMember(ctx, id); !errors.Is(err, store.ErrLearnerNotReady) {
		t.Fatalf("promoting an unstarted learner: %v, want ErrLearnerNotReady", err)
	}
	m, err := etcdproc.Join(etcdproc.Config{Binary: bin, ExitWithParent: true}, etcdproc.JoinSpec{
		Name: "n1", Dir: filepath.Join(dir, "n1"), ClientURL: client, PeerURL: peer,
		InitialCluster: etcdproc.InitialCluster(ms, id, "n1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := s.PromoteMember(ctx, id)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrLearnerNotReady) || time.Now().After(deadline) {
			t.Fatalf("promote: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := m.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	ms, err = s.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members after promote %+v, %v", ms, err)
	}
	for _, x := range ms {
		if x.Learner || x.Name == "" {
			t.Fatalf("member %+v after promote: want two started voters", x)
		}
	}
	// The new voter serves the store.
	s2 := openT(t, Options{Endpoints: []string{client}, Prefix: "/m/"})
	if _, err := s2.Get(ctx, "k"); err != nil {
		t.Fatalf("read through the new member: %v", err)
	}

	// etcd refuses a removal until the members left have been connected
	// for a while.
	deadline = time.Now().Add(20 * time.Second)
	for {
		err := s.RemoveMember(ctx, id)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrReconfigUnsafe) || time.Now().After(deadline) {
			t.Fatalf("remove: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := s.RemoveMember(ctx, id); !errors.Is(err, store.ErrMemberNotFound) {
		t.Fatalf("removing twice: %v, want ErrMemberNotFound", err)
	}
	ms, err = s.Members(ctx)
	if err != nil || len(ms) != 1 || ms[0].Name != "m0" {
		t.Fatalf("members after remove %+v, %v", ms, err)
	}
}
