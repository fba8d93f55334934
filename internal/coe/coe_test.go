package coe

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/driver/fake"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

type env struct {
	t   *testing.T
	st  store.Store
	cfg *confdb.DB
	q   *jobqueue.Queue
	drv *fake.Driver
}

func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg, err := confdb.Bootstrap(context.Background(), st, &config.Cluster{Meta: config.Meta{Name: "c"}, ClusterName: "c"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, st: st, cfg: cfg, drv: fake.New()}
	e.start()
	return e
}

// start runs a processor and a queue over the env's store (again after
// stop: a master restart).
func (e *env) start() {
	reg := engine.NewRegistry(opcodes.Default())
	Register(reg, &Deps{Cfg: e.cfg, Drivers: driver.NewRegistry(e.drv), PollInterval: 10 * time.Millisecond})
	proc := engine.NewProcessor(e.cfg, locking.New(), nil, reg, slog.New(slog.NewTextHandler(testWriter{e.t}, nil)))
	q, err := jobqueue.New(jobqueue.Options{Store: e.st, Runner: proc, Summary: reg.Table().Summary})
	if err != nil {
		e.t.Fatal(err)
	}
	proc.Wake = q.Notify
	if err := q.Start(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	e.q = q
	e.t.Cleanup(func() { q.Stop() })
}

func (e *env) submit(op map[string]any) int64 {
	e.t.Helper()
	raw, _ := json.Marshal(op)
	id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// run submits op and returns its error ("" on success).
func (e *env) run(op map[string]any) string {
	e.t.Helper()
	return e.wait(e.submit(op))
}

func (e *env) wait(id int64) string {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		rows, err := e.q.Query(context.Background(), []int64{id}, []string{"status", "opresult"})
		if err != nil {
			e.t.Fatal(err)
		}
		switch rows[0][0] {
		case "success":
			return ""
		case "error", "canceled":
			raw, _ := json.Marshal(rows[0][1])
			return string(raw)
		}
		time.Sleep(5 * time.Millisecond)
	}
	e.t.Fatalf("job %d never ended", id)
	return ""
}

func (e *env) template(name string) {
	e.t.Helper()
	if err := e.run(map[string]any{"OP_ID": "OP_COE_TEMPLATE_CREATE", "name": name, "project_id": "p1",
		"fields": map[string]any{"coe": "kubernetes", "server_type": "vm", "cluster_distro": "fake",
			"labels": map[string]any{"kube_tag": "v1.31.0"}}}); err != "" {
		e.t.Fatal(err)
	}
}

func (e *env) createCluster(name string, workers int) string {
	e.t.Helper()
	return e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": name, "cluster_template": "t1",
		"node_count": float64(workers), "project_id": "p1", "user_id": "u1"})
}

func (e *env) cluster(name string) *config.COECluster {
	e.t.Helper()
	c, ok := e.cfg.COECluster(name)
	if !ok {
		e.t.Fatalf("no cluster %s", name)
	}
	return c
}

func (e *env) group(cluster, name string) *config.COENodeGroup {
	e.t.Helper()
	g, err := e.cfg.COENodeGroup(e.cluster(cluster).UUID, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return g
}

func TestClusterCreateCompletes(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	tp, _ := e.cfg.COETemplate("t1")
	if tp.Driver != fake.Name {
		t.Fatalf("template driver %q", tp.Driver)
	}
	if err := e.createCluster("k1", 3); err != "" {
		t.Fatal(err)
	}
	c := e.cluster("k1")
	if c.Status != config.COECreateComplete || c.HealthStatus != config.COEHealthy || c.APIAddress == "" || c.COEVersion != "v1.31.0" {
		t.Fatalf("cluster %+v", c)
	}
	w := e.group("k1", "default-worker")
	m := e.group("k1", "default-master")
	if len(w.Nodes) != 3 || w.Status != config.COECreateComplete || len(m.Nodes) != 1 || m.Status != config.COECreateComplete {
		t.Fatalf("worker %+v master %+v", w, m)
	}
	st := e.cfg.COEClusterStatus(c.UUID)
	for _, cond := range []string{"CertificatesReady", "APIEndpointReady", "EtcdReady", "ControlPlaneReady", "NodeGroupReady/default-worker", "Healthy"} {
		if !st.IsTrue(cond) {
			t.Errorf("condition %s not true: %+v", cond, st)
		}
	}
	if st.Target != "" {
		t.Errorf("cluster still reserved: %q", st.Target)
	}
	if _, ok := e.cfg.COECertificate(c.UUID); !ok {
		t.Error("no CA stored")
	}
	if tr, ok := e.cfg.COETrust(c.Trust); !ok || tr.Trustor != "u1" || tr.ProjectID != "p1" {
		t.Errorf("trust %+v", tr)
	}
}

func TestClusterCreateFailedStep(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	e.drv.Fail("EtcdReady", errors.New("etcd would not start: port in use"))
	if err := e.createCluster("k1", 1); !strings.Contains(err, "port in use") {
		t.Fatalf("error %s", err)
	}
	c := e.cluster("k1")
	if c.Status != config.COECreateFailed || !strings.Contains(c.StatusReason, "etcd would not start: port in use") {
		t.Fatalf("cluster %s %q", c.Status, c.StatusReason)
	}
	cond, _ := e.cfg.COEClusterStatus(c.UUID).Condition("EtcdReady")
	if cond.Status != config.ConditionFalse || !strings.Contains(cond.Message, "port in use") {
		t.Fatalf("condition %+v", cond)
	}
	if slices.Contains(e.drv.Calls(), "k1:ControlPlaneReady") {
		t.Fatal("steps after the failed one ran")
	}
}

func TestClusterQuota(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.run(map[string]any{"OP_ID": "OP_COE_QUOTA_SET", "project_id": "p1", "resource": "Cluster", "hard_limit": float64(1), "create": true}); err != "" {
		t.Fatal(err)
	}
	if err := e.createCluster("k1", 0); err != "" {
		t.Fatal(err)
	}
	err := e.createCluster("k2", 0)
	if !strings.Contains(err, "You have reached the maximum clusters per project, 1.") || !strings.Contains(err, `"quota_exceeded"`) {
		t.Fatalf("error %s", err)
	}
	if _, ok := e.cfg.COECluster("k2"); ok {
		t.Fatal("k2 was stored")
	}
}

func TestTemplateInUseAndDefaultGroup(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("k1", 1); err != "" {
		t.Fatal(err)
	}
	err := e.run(map[string]any{"OP_ID": "OP_COE_TEMPLATE_REMOVE", "cluster_template": "t1"})
	if !strings.Contains(err, "is referenced by one or multiple clusters") || !strings.Contains(err, `"wrong_input"`) {
		t.Fatalf("error %s", err)
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_TEMPLATE_MODIFY", "cluster_template": "t1", "changes": map[string]any{"public": true}}); err != "" {
		t.Fatalf("public change refused: %s", err)
	}
	// Tags come as Magnum's one string from the API, as a list from the CLI.
	if err := e.run(map[string]any{"OP_ID": "OP_COE_TEMPLATE_MODIFY", "cluster_template": "t1", "changes": map[string]any{"tags": "prod, eu-1,"}}); err != "" {
		t.Fatalf("tags as a string refused: %s", err)
	}
	if tpl, _ := e.cfg.COETemplate("t1"); strings.Join(tpl.Tags, "|") != "prod|eu-1" {
		t.Fatalf("tags %q", tpl.Tags)
	}
	err = e.run(map[string]any{"OP_ID": "OP_COE_NODEGROUP_REMOVE", "cluster": "k1", "nodegroup": "default-worker"})
	if !strings.Contains(err, "Deleting a default nodegroup is not supported.") {
		t.Fatalf("error %s", err)
	}
	err = e.run(map[string]any{"OP_ID": "OP_COE_NODEGROUP_CREATE", "cluster": "k1", "name": "big", "node_count": float64(5), "max_node_count": float64(3)})
	if !strings.Contains(err, "must not exceed max_node_count") {
		t.Fatalf("error %s", err)
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_NODEGROUP_CREATE", "cluster": "k1", "name": "extra", "node_count": float64(2)}); err != "" {
		t.Fatal(err)
	}
	if g := e.group("k1", "extra"); len(g.Nodes) != 2 || g.Status != config.COECreateComplete {
		t.Fatalf("group %+v", g)
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_NODEGROUP_REMOVE", "cluster": "k1", "nodegroup": "extra"}); err != "" {
		t.Fatal(err)
	}
	if _, err := e.cfg.COENodeGroup(e.cluster("k1").UUID, "extra"); err == nil {
		t.Fatal("group extra still there")
	}
}

func TestResizeNodesToRemoveAndScaleManager(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("k1", 4); err != "" {
		t.Fatal(err)
	}
	uuid := e.cluster("k1").UUID
	nodes := e.group("k1", "default-worker").Nodes // k1-default-worker-1..4
	// Node 3 is NotReady, node 1 runs no pod, the others several: shrinking
	// by 3 with node 4 named removes 4, then 3 (NotReady), then 1 (fewest pods).
	e.drv.SetNode(uuid, driver.KubeNode{Name: nodes[0], Ready: true, Pods: 0})
	e.drv.SetNode(uuid, driver.KubeNode{Name: nodes[1], Ready: true, Pods: 7})
	e.drv.SetNode(uuid, driver.KubeNode{Name: nodes[2], Ready: false, Pods: 9})
	e.drv.SetNode(uuid, driver.KubeNode{Name: nodes[3], Ready: true, Pods: 9})
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_RESIZE", "cluster": "k1", "node_count": float64(1),
		"nodes_to_remove": []any{nodes[3]}}); err != "" {
		t.Fatal(err)
	}
	g := e.group("k1", "default-worker")
	if !slices.Equal(g.Nodes, []string{nodes[1]}) || g.NodeCount != 1 || g.Status != config.COEUpdateComplete {
		t.Fatalf("group %+v", g)
	}
	if c := e.cluster("k1"); c.Status != config.COEUpdateComplete {
		t.Fatalf("status %s", c.Status)
	}
	// Growing through the cluster's PATCH adds new nodes.
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": "k1", "changes": map[string]any{"node_count": float64(3)}}); err != "" {
		t.Fatal(err)
	}
	if g := e.group("k1", "default-worker"); len(g.Nodes) != 3 {
		t.Fatalf("nodes %v", g.Nodes)
	}
}

func TestUpgradeInBatches(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.run(map[string]any{"OP_ID": "OP_COE_TEMPLATE_CREATE", "name": "t2", "fields": map[string]any{"coe": "kubernetes",
		"server_type": "vm", "cluster_distro": "fake", "labels": map[string]any{"kube_tag": "v1.32.0"}}}); err != "" {
		t.Fatal(err)
	}
	if err := e.createCluster("k1", 5); err != "" {
		t.Fatal(err)
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_UPGRADE", "cluster": "k1", "cluster_template": "t2", "max_batch_size": float64(2)}); err != "" {
		t.Fatal(err)
	}
	var batches []string
	for _, c := range e.drv.Calls() {
		if strings.HasPrefix(c, "batch:") {
			batches = append(batches, c)
		}
	}
	want := []string{"batch:default-master:[k1-default-master-1]",
		"batch:default-worker:[k1-default-worker-1 k1-default-worker-2]",
		"batch:default-worker:[k1-default-worker-3 k1-default-worker-4]",
		"batch:default-worker:[k1-default-worker-5]"}
	if !slices.Equal(batches, want) {
		t.Fatalf("batches %q", batches)
	}
	t2, _ := e.cfg.COETemplate("t2")
	if c := e.cluster("k1"); c.Template != t2.UUID || c.COEVersion != "v1.32.0" || c.Status != config.COEUpdateComplete {
		t.Fatalf("cluster %+v", c)
	}
}

func TestDeleteLeavesNothing(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("k1", 2); err != "" {
		t.Fatal(err)
	}
	c := e.cluster("k1")
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_REMOVE", "cluster": "k1"}); err != "" {
		t.Fatal(err)
	}
	if _, ok := e.cfg.COECluster(c.UUID); ok {
		t.Fatal("cluster left")
	}
	if gs := e.cfg.COENodeGroups(c.UUID); len(gs) != 0 {
		t.Fatalf("groups left: %d", len(gs))
	}
	if _, ok := e.cfg.COECertificate(c.UUID); ok {
		t.Fatal("CA left")
	}
	if _, ok := e.cfg.COETrust(c.Trust); ok {
		t.Fatal("trust left")
	}
	if e.drv.Known(c.UUID) {
		t.Fatal("the driver still holds the cluster")
	}
	// The template is free again.
	if err := e.run(map[string]any{"OP_ID": "OP_COE_TEMPLATE_REMOVE", "cluster_template": "t1"}); err != "" {
		t.Fatal(err)
	}
}

func TestDeleteFailedKeepsReason(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("k1", 1); err != "" {
		t.Fatal(err)
	}
	e.drv.Fail("ControlPlaneStopped", errors.New("node unreachable"))
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_REMOVE", "cluster": "k1"}); err == "" {
		t.Fatal("delete succeeded")
	}
	if c := e.cluster("k1"); c.Status != config.COEDeleteFailed || !strings.Contains(c.StatusReason, "node unreachable") {
		t.Fatalf("cluster %s %q", c.Status, c.StatusReason)
	}
}

func TestTrustRevokedStopsHealing(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("k1", 2); err != "" {
		t.Fatal(err)
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_TRUST_REVOKE", "cluster": "k1"}); err != "" {
		t.Fatal(err)
	}
	c := e.cluster("k1")
	if c.HealthStatus != config.COEHealthUnknown || c.HealthStatusReason["trust"] != TrustRevokedReason {
		t.Fatalf("health %s %v", c.HealthStatus, c.HealthStatusReason)
	}
	node := e.group("k1", "default-worker").Nodes[0]
	err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_HEAL", "cluster": "k1", "nodes": []any{node}})
	if !strings.Contains(err, "trust of cluster") {
		t.Fatalf("error %s", err)
	}
}

func TestCreateResumesAfterRestart(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	held := make(chan struct{})
	e.drv.Gate = func(ctx context.Context, cond string) error {
		if cond == "ControlPlaneReady" {
			close(held)
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	id := e.submit(map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": "k1", "cluster_template": "t1",
		"node_count": float64(2), "project_id": "p1"})
	<-held
	if c := e.cluster("k1"); c.Status != config.COECreateInProgress {
		t.Fatalf("status during the create %s", c.Status)
	}
	e.q.Stop() // the master stops in the middle of the control plane step
	e.drv.Gate = nil
	var err error
	if e.cfg, err = confdb.Open(context.Background(), e.st, nil); err != nil {
		t.Fatal(err)
	}
	e.start()
	if err := e.wait(id); err != "" {
		t.Fatal(err)
	}
	if c := e.cluster("k1"); c.Status != config.COECreateComplete {
		t.Fatalf("status %s %q", c.Status, c.StatusReason)
	}
	n := 0
	for _, c := range e.drv.Calls() {
		if c == "k1:CertificatesReady" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the CA step ran %d times: %v", n, e.drv.Calls())
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestCARotateReplacesTheStoredCA: the rotation replaces the stored CA
// object (same identity, next generation), which a new object without the
// stored one's serial could not.
func TestCARotateReplacesTheStoredCA(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	if err := e.createCluster("c1", 1); err != "" {
		t.Fatal(err)
	}
	uuid := e.cluster("c1").UUID
	before, ok := e.cfg.COECertificate(uuid)
	if !ok {
		t.Fatal("no CA after the create")
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CA_ROTATE", "cluster": "c1", "project_id": "p1"}); err != "" {
		t.Fatalf("rotate: %s", err)
	}
	after, _ := e.cfg.COECertificate(uuid)
	if after.Generation != before.Generation+1 || after.CertPEM == before.CertPEM || e.cluster("c1").Status != config.COEUpdateComplete {
		t.Fatalf("CA %d → %d (%q), cluster %s", before.Generation, after.Generation, after.CertPEM, e.cluster("c1").Status)
	}
}
