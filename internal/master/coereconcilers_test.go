package master

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
)

func coeTestCluster() *driver.Cluster {
	master := &config.COENodeGroup{Role: config.COERoleMaster, IsDefault: true, NodeCount: 1}
	workers := &config.COENodeGroup{Role: config.COERoleWorker, IsDefault: true, NodeCount: 3, Nodes: []string{"c-w-1", "c-w-2", "c-w-3"}}
	return &driver.Cluster{COECluster: &config.COECluster{}, Groups: []*config.COENodeGroup{master, workers}}
}

func TestCOEHealthFromMonitor(t *testing.T) {
	dc := coeTestCluster()
	now := time.Now()
	all := []driver.KubeNode{{Name: "c-w-1", Ready: true}, {Name: "c-w-2", Ready: true}, {Name: "c-w-3", Ready: true}}
	st, why := coeHealth(dc, driver.Health{APIReady: true, Nodes: all}, nil)
	if st != config.COEHealthy || !maps.Equal(why, map[string]string{"api": "ok", "c-w-1.Ready": "true", "c-w-2.Ready": "true", "c-w-3.Ready": "true"}) {
		t.Fatalf("all ready: %s %v", st, why)
	}
	some := slices.Clone(all)
	some[1].Ready = false
	if st, why := coeHealth(dc, driver.Health{APIReady: true, Nodes: some}, nil); st != config.COEUnhealthy || why["c-w-2.Ready"] != "false" {
		t.Fatalf("a node NotReady: %s %v", st, why)
	}
	if st, why := coeHealth(dc, driver.Health{APIReady: true, Nodes: all[:2]}, nil); st != config.COEUnhealthy || why["c-w-3.Ready"] != "false" {
		t.Fatalf("a node missing: %s %v", st, why)
	}
	if st, why := coeHealth(dc, driver.Health{}, nil); st != config.COEUnhealthy || why["api"] == "ok" {
		t.Fatalf("API down: %s %v", st, why)
	}
	if st, why := coeHealth(dc, driver.Health{}, errors.New("dial refused")); st != config.COEUnhealthy || why["api"] != "dial refused" {
		t.Fatalf("monitor failed: %s %v", st, why)
	}

	// Auto-healing: NotReady past the threshold, or missing.
	some[1].Since = now.Add(-30 * time.Second)
	if bad := unhealthyNodes(dc, driver.Health{APIReady: true, Nodes: some}, now, time.Minute); len(bad) != 0 {
		t.Fatalf("NotReady for 30s of a 60s threshold replaced: %v", bad)
	}
	if bad := unhealthyNodes(dc, driver.Health{APIReady: true, Nodes: some}, now, 20*time.Second); !slices.Equal(bad, []string{"c-w-2"}) {
		t.Fatalf("NotReady past the threshold: %v", bad)
	}
	if bad := unhealthyNodes(dc, driver.Health{APIReady: true, Nodes: all[1:]}, now, time.Hour); !slices.Equal(bad, []string{"c-w-1"}) {
		t.Fatalf("missing node: %v", bad)
	}
	for in, want := range map[string]time.Duration{"": DefaultAutoHealThreshold, "90": 90 * time.Second, "2m": 2 * time.Minute, "x": DefaultAutoHealThreshold} {
		if got := autoHealThreshold(in); got != want {
			t.Errorf("threshold %q: %v, want %v", in, got, want)
		}
	}
}

func TestCOEAutoscaleTarget(t *testing.T) {
	now := time.Now()
	g := &config.COENodeGroup{Role: config.COERoleWorker, IsDefault: true, NodeCount: 2, Nodes: []string{"w-1", "w-2"}}
	busy := driver.Health{APIReady: true, Nodes: []driver.KubeNode{{Name: "w-1", Pods: 3}, {Name: "w-2", Pods: 1}}}
	if n := scaleTarget(g, busy, 1, 3, nil, now, time.Minute); n != 2 {
		t.Fatalf("steady: %d", n)
	}
	pending := busy
	pending.PendingPods = 5
	if n := scaleTarget(g, pending, 1, 3, nil, now, time.Minute); n != 3 {
		t.Fatalf("pods pending: %d, want one more", n)
	}
	g3 := *g
	g3.NodeCount = 3
	if n := scaleTarget(&g3, pending, 1, 3, nil, now, time.Minute); n != 3 {
		t.Fatalf("pods pending at the maximum: %d", n)
	}
	if n := scaleTarget(g, busy, 1, 3, map[string]time.Time{"w-2": now.Add(-30 * time.Second)}, now, time.Minute); n != 2 {
		t.Fatalf("empty for less than the delay: %d", n)
	}
	if n := scaleTarget(g, busy, 1, 3, map[string]time.Time{"w-2": now.Add(-2 * time.Minute)}, now, time.Minute); n != 1 {
		t.Fatalf("empty past the delay: %d, want one less", n)
	}
	if n := scaleTarget(g, busy, 2, 3, map[string]time.Time{"w-2": now.Add(-2 * time.Minute)}, now, time.Minute); n != 2 {
		t.Fatalf("empty at the minimum: %d", n)
	}
	if n := scaleTarget(g, busy, 3, 5, nil, now, time.Minute); n != 3 {
		t.Fatalf("below the minimum: %d", n)
	}

	// Emptiness is remembered from the first round it is seen, and a
	// node with pods starts over.
	a := &coeAutoscaler{now: func() time.Time { return now }, empty: map[string]time.Time{}}
	idle := driver.Health{APIReady: true, Nodes: []driver.KubeNode{{Name: "w-1", Pods: 3}, {Name: "w-2"}}}
	first := a.emptySince("c", g, idle)
	if len(first) != 1 || !first["w-2"].Equal(now) {
		t.Fatalf("first round: %v", first)
	}
	later := now.Add(time.Minute)
	a.now = func() time.Time { return later }
	if again := a.emptySince("c", g, idle); !again["w-2"].Equal(now) {
		t.Fatalf("second round: %v", again)
	}
	if none := a.emptySince("c", g, busy); len(none) != 0 {
		t.Fatalf("busy: %v", none)
	}
	if again := a.emptySince("c", g, idle); !again["w-2"].Equal(later) {
		t.Fatalf("empty again after pods: %v", again)
	}
}
