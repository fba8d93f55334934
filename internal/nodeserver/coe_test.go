package nodeserver

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

func coeServer(t *testing.T) *Server {
	t.Helper()
	c, err := openCOEPlanes(filepath.Join(t.TempDir(), "coe"), t.TempDir(), "3900000-3900009", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return &Server{log: slog.New(slog.DiscardHandler), coe: c}
}

// TestCOEReserveKeepsPorts: a cluster's ports are chosen once and kept
// (a resumed step gets the same); two clusters never share a port; a
// purge forgets the cluster.
func TestCOEReserveKeepsPorts(t *testing.T) {
	ctx := context.Background()
	s := coeServer(t)
	reserve := func(cluster, addr string) (nodeapi.COEControlPlanePorts, error) {
		p, err := s.coeReserve(ctx, nodeapi.COEControlPlaneReserveArgs{Cluster: cluster, Name: "n-" + cluster, BindAddress: addr})
		if err != nil {
			return nodeapi.COEControlPlanePorts{}, err
		}
		return p.(nodeapi.COEControlPlanePorts), nil
	}
	a, err := reserve("c1", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if a.APIServer == 0 || a.APIServer == a.EtcdClient || a.EtcdClient == a.EtcdPeer || a.APIServer == a.EtcdPeer {
		t.Fatalf("ports %+v", a)
	}
	if again, err := reserve("c1", "127.0.0.1"); err != nil || again != a {
		t.Fatalf("reserved again: %+v %v, first %+v", again, err, a)
	}
	// A daemon restart reads the same record.
	s2 := &Server{log: s.log, coe: &coePlanes{dir: s.coe.dir, log: s.log}}
	if p, err := s2.coeReserve(ctx, nodeapi.COEControlPlaneReserveArgs{Cluster: "c1", BindAddress: "127.0.0.1"}); err != nil || p != a {
		t.Fatalf("after a restart: %+v %v", p, err)
	}
	if _, err := reserve("c1", "127.0.0.2"); ecode.ClassOf(err) != ecode.State {
		t.Fatalf("another address for the same cluster: %v", err)
	}
	b, err := reserve("c2", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{b.APIServer, b.EtcdClient, b.EtcdPeer} {
		if p == a.APIServer || p == a.EtcdClient || p == a.EtcdPeer {
			t.Fatalf("c2 got c1's port %d: %+v %+v", p, a, b)
		}
	}
	held, err := s.coe.heldPorts()
	if err != nil || !held[a.APIServer] || !held[b.EtcdPeer] {
		t.Fatalf("held %v %v", held, err)
	}
	for _, p := range []int{a.APIServer, a.EtcdClient, a.EtcdPeer, b.APIServer} {
		if p < coePortRange[0] || p > coePortRange[1] {
			t.Fatalf("port %d outside %v (the ephemeral ports start above it)", p, coePortRange)
		}
	}
	// A port something listens on is never chosen: in a range of four
	// with one taken, the other three are.
	busy, l := listenRun(t, 4)
	defer l.Close()
	defer func(r [2]int) { coePortRange = r }(coePortRange)
	coePortRange = [2]int{busy, busy + 3}
	free, err := freePorts(netip.MustParseAddr("127.0.0.1"), 3, map[int]bool{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(free)
	if !slices.Equal(free, []int{busy + 1, busy + 2, busy + 3}) {
		t.Fatalf("free ports %v around busy %d", free, busy)
	}
	if _, err := freePorts(netip.MustParseAddr("127.0.0.1"), 3, map[int]bool{busy + 2: true}); ecode.ClassOf(err) != ecode.NoRes {
		t.Fatalf("a held port handed out: %v", err)
	}

	if _, err := s.coeStop(ctx, nodeapi.COEControlPlaneStopArgs{Cluster: "c1", Purge: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.coe.recordPath("c1")); !os.IsNotExist(err) {
		t.Fatalf("record after purge: %v", err)
	}
	st, err := s.coeStatus(ctx, nodeapi.COEControlPlaneStatusArgs{Cluster: "c1"})
	if err != nil || st.(nodeapi.COEControlPlaneStatusReply).Known {
		t.Fatalf("status after purge: %+v %v", st, err)
	}
	if _, err := s.coeStop(ctx, nodeapi.COEControlPlaneStopArgs{Cluster: "c1", Purge: true}); err != nil {
		t.Fatalf("second purge: %v", err)
	}
	if _, err := s.coeReserve(ctx, nodeapi.COEControlPlaneReserveArgs{Cluster: "../x", BindAddress: "127.0.0.1"}); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("a cluster name with a path: %v", err)
	}
	// Without the tools, a start names the make target.
	_, err = s.coeStart(ctx, nodeapi.COEControlPlaneStartArgs{Cluster: "c2", BindAddress: "127.0.0.1"})
	if ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), "make k8s-tools") {
		t.Fatalf("start without tools: %v", err)
	}
}

// listenRun finds n consecutive free ports in coePortRange and listens on
// the first.
func listenRun(t *testing.T, n int) (int, net.Listener) {
	t.Helper()
	for p := coePortRange[0] + 5000; p+n < coePortRange[1]; p += n {
		var ls []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+i)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		if len(ls) == n {
			for _, l := range ls[1:] {
				l.Close()
			}
			return p, ls[0]
		}
		for _, l := range ls {
			l.Close()
		}
	}
	t.Fatal("no free run of ports")
	return 0, nil
}
