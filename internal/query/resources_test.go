package query

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/locking"
)

// TestLockRowsFromTheLockManager checks the lock resource shows what the
// lock manager reports: holder, mode and a waiter as [mode, [owner]].
func TestLockRowsFromTheLockManager(t *testing.T) {
	m := locking.New()
	ctx := context.Background()
	holder, waiter := m.NewOwner("job/1"), m.NewOwner("job/2")
	want := locking.Request{Level: locking.LevelInstance, Names: []string{"web1"}, Mode: locking.Exclusive}
	if err := m.Acquire(ctx, holder, 0, want); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- m.Acquire(wctx, waiter, 0, locking.Request{Level: locking.LevelInstance, Names: []string{"web1"}, Mode: locking.Shared})
	}()
	var rows [][]Cell
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var objs []*locking.LockInfo
		for _, li := range m.Info() {
			if li.Name == "instance/web1" {
				objs = append(objs, &li)
			}
		}
		rows = Locks().Rows(objs, []string{"name", "mode", "owner", "pending"})
		if len(rows) == 1 && len(rows[0][3][1].([]any)) == 1 {
			break
		}
	}
	cancel()
	<-done
	holder.Release()
	b, _ := json.Marshal(rows)
	if string(b) != `[[[0,"instance/web1"],[0,"exclusive"],[0,["job/1"]],[0,[["shared",["job/2"]]]]]]` {
		t.Errorf("lock rows = %s", b)
	}
}

// TestClusterRowWatcherPause checks watcher_pause is unavailable unless a
// pause is in force, as Ganeti's.
func TestClusterRowWatcherPause(t *testing.T) {
	r := &ClusterRow{Cluster: &config.Cluster{ClusterName: "c", WatcherPauseUntil: 100}, Now: 200}
	rows := Cluster().Rows([]*ClusterRow{r}, []string{"watcher_pause", "name", "cluster_name", "volume_group_name"})
	if b, _ := json.Marshal(rows); string(b) != `[[[3,null],[0,"c"],[0,"c"],[0,null]]]` {
		t.Errorf("past pause: %s", b)
	}
	r.Now = 50
	if v, _ := Cluster().Value(r, "watcher_pause"); v != float64(100) {
		t.Errorf("pause in force: %v", v)
	}
}

// TestInstanceIndexedAndAliasFields checks per-index fields are
// unavailable past the list's end and aliases answer as their targets.
func TestInstanceIndexedAndAliasFields(t *testing.T) {
	c := &config.Cluster{BEParams: config.DefaultBEParams(), NICParams: config.DefaultNICParams(),
		HVParams: map[string]config.Params{"kvm": {"serial_speed": "38400", "acpi": "true", "kernel_path": ""}}}
	r := &InstanceRow{Cluster: c, Inst: &config.Instance{Hypervisor: "kvm",
		Disks: []config.Disk{{SizeMiB: 10, UUID: "d0"}},
		NICs:  []config.NIC{{MAC: "aa:00:00:00:00:01", Mode: "routed", Link: "rt"}}}}
	names := []string{"disk.size/0", "disk.size/1", "sda_size", "sdb_size", "disk.spindles/0", "nic.mac/0", "mac",
		"nic.bridge/0", "nic.vlan/0", "nic.mac/1", "be/memory", "vcpus", "hv/serial_speed", "hv/acpi", "hv/xen_cmd", "hv/vif_type"}
	b, _ := json.Marshal(Instances().Rows([]*InstanceRow{r}, names))
	want := `[[[0,10],[3,null],[0,10],[3,null],[3,null],[0,"aa:00:00:00:00:01"],[0,"aa:00:00:00:00:01"],` +
		`[0,null],[0,""],[3,null],[0,128],[0,1],[0,38400],[0,true],[1,null],[3,null]]]`
	if string(b) != want {
		t.Errorf("rows =\n%s\nwant\n%s", b, want)
	}
}
