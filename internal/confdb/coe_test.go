package confdb

import (
	"context"
	"errors"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// TestCOEObjects checks what COE clusters need of the collections: node
// group names unique within a cluster only, quotas named by project and
// resource, statuses, and a reload that agrees with the cache.
func TestCOEObjects(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	commit := func(f func(tx *Tx)) error {
		tx := db.Begin()
		f(tx)
		return db.Commit(ctx, tx)
	}
	tmpl := &config.COETemplate{Meta: config.Meta{Name: "kwok-small"}, COE: "kubernetes", ServerType: "vm"}
	if err := commit(func(tx *Tx) { tx.PutCOETemplate(tmpl) }); err != nil {
		t.Fatal(err)
	}
	c1 := &config.COECluster{Meta: config.Meta{Name: "k1"}, Template: tmpl.UUID, Status: config.COECreateInProgress}
	c2 := &config.COECluster{Meta: config.Meta{Name: "k2"}, Template: tmpl.UUID, Status: config.COECreateInProgress}
	if err := commit(func(tx *Tx) { tx.PutCOECluster(c1); tx.PutCOECluster(c2) }); err != nil {
		t.Fatal(err)
	}
	if err := db.CheckCOENameFree("cluster", "k1", ""); ecode.ClassOf(err) != ecode.Exists {
		t.Errorf("k1 reported free: %v", err)
	}
	if err := db.CheckCOENameFree("cluster", "k1", c1.UUID); err != nil {
		t.Errorf("k1 is not free for itself: %v", err)
	}
	groups := func(c *config.COECluster) []*config.COENodeGroup {
		return []*config.COENodeGroup{
			{Meta: config.Meta{Name: "default-master"}, Cluster: c.UUID, Role: config.COERoleMaster, IsDefault: true, NodeCount: 1},
			{Meta: config.Meta{Name: "default-worker"}, Cluster: c.UUID, Role: config.COERoleWorker, IsDefault: true, NodeCount: 3},
		}
	}
	if err := commit(func(tx *Tx) {
		for _, c := range []*config.COECluster{c1, c2} {
			for _, g := range groups(c) {
				tx.PutCOENodeGroup(g)
			}
		}
	}); err != nil {
		t.Fatalf("the default groups of two clusters: %v", err)
	}
	dup := &config.COENodeGroup{Meta: config.Meta{Name: "default-worker"}, Cluster: c1.UUID, Role: config.COERoleWorker}
	if err := commit(func(tx *Tx) { tx.PutCOENodeGroup(dup) }); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second default-worker in one cluster: %v", err)
	}
	w2, err := db.COENodeGroup(c2.UUID, "default-worker")
	if err != nil || w2.Cluster != c2.UUID || w2.NodeCount != 3 {
		t.Fatalf("k2's worker group: %+v %v", w2, err)
	}
	if _, err := db.COENodeGroup(c1.UUID, w2.UUID); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("k2's group found through k1: %v", err)
	}
	if got := db.COENodeGroups(c1.UUID); len(got) != 2 || got[0].Name != "default-master" {
		t.Errorf("k1's groups: %+v", got)
	}
	q := &config.COEQuota{ProjectID: "p1", Resource: "Cluster", HardLimit: 2}
	if err := commit(func(tx *Tx) {
		tx.PutCOEQuota(q)
		tx.PutCOEClusterStatus(c1.UUID, &config.Status{State: "creating", Conditions: []config.Condition{{Type: "ControlPlane", Status: config.ConditionUnknown}}})
	}); err != nil {
		t.Fatal(err)
	}
	re, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := re.COEQuota("p1", "Cluster"); !ok || got.HardLimit != 2 {
		t.Errorf("quota after reload: %+v %v", got, ok)
	}
	if st := re.COEClusterStatus(c1.UUID); st == nil || st.State != "creating" {
		t.Errorf("cluster status after reload: %+v", st)
	}
	if got, err := re.COENodeGroup(c1.UUID, "default-master"); err != nil || got.Role != config.COERoleMaster {
		t.Errorf("k1's master group after reload: %+v %v", got, err)
	}
	if len(re.COEClusters()) != 2 || len(re.COETemplates()) != 1 {
		t.Errorf("reload: %d clusters, %d templates", len(re.COEClusters()), len(re.COETemplates()))
	}
	k1, _ := re.COECluster("k1")
	if err := commit(func(tx *Tx) {
		for _, g := range db.COENodeGroups(c1.UUID) {
			tx.DeleteCOENodeGroup(g)
		}
		tx.DeleteCOECluster(k1)
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := db.COECluster("k1"); ok || len(db.COENodeGroups(c1.UUID)) != 0 || db.COEClusterStatus(c1.UUID) != nil {
		t.Error("k1, its groups or its status survived its removal")
	}
}
