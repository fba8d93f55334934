package api

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// luxiPeer is a real LUXI server answering the coewire methods from a
// few stored objects and recording the ops submitted, as corrald would
// see them.
type luxiPeer struct {
	mu        sync.Mutex
	templates []*config.COETemplate
	clusters  []coewire.ClusterRecord
	feds      []*config.COEFederation
	ops       []map[string]any
	refuse    error // answer COESubmit with this
}

func (p *luxiPeer) call(_ context.Context, method string, args []json.RawMessage) (any, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	if len(args) > 0 {
		_ = json.Unmarshal(args[0], &names)
	}
	switch method {
	case coewire.MethodTemplates:
		var out []*config.COETemplate
		for _, t := range p.templates {
			if len(names) == 0 || names[0] == t.UUID || names[0] == t.Name {
				out = append(out, t)
			}
		}
		if len(names) > 0 && len(out) == 0 {
			return nil, ecode.Errorf(ecode.NoEnt, "ClusterTemplate %s could not be found.", names[0])
		}
		return listOfAny(out), nil
	case coewire.MethodClusters:
		var out []coewire.ClusterRecord
		for _, c := range p.clusters {
			if len(names) == 0 || names[0] == c.Cluster.UUID || names[0] == c.Cluster.Name {
				out = append(out, c)
			}
		}
		if len(names) > 0 && len(out) == 0 {
			return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", names[0])
		}
		return listOfAny(out), nil
	case coewire.MethodFederations:
		var out []*config.COEFederation
		for _, f := range p.feds {
			if len(names) == 0 || names[0] == f.UUID || names[0] == f.Name {
				out = append(out, f)
			}
		}
		if len(names) > 0 && len(out) == 0 {
			return nil, ecode.Errorf(ecode.NoEnt, "Federation %s could not be found.", names[0])
		}
		return listOfAny(out), nil
	case coewire.MethodNodeGroups:
		var a coewire.NodeGroupArgs
		_ = json.Unmarshal(args[0], &a)
		for _, c := range p.clusters {
			if c.Cluster.UUID == a.Cluster {
				return c.NodeGroups, nil
			}
		}
		return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", a.Cluster)
	case coewire.MethodQuotas:
		return []*config.COEQuota{{Meta: config.Meta{UUID: config.NewUUID()}, ProjectID: "p1", Resource: "Cluster", HardLimit: 3}}, nil
	case coewire.MethodServices:
		return []coewire.Service{{Host: "node1", Binary: "corrald", Up: true, Since: 1.7e9}}, nil
	case coewire.MethodSubmit:
		var op map[string]any
		_ = json.Unmarshal(args[0], &op)
		p.ops = append(p.ops, op)
		if p.refuse != nil {
			return nil, p.refuse
		}
		if op["OP_ID"] == "OP_COE_TEMPLATE_CREATE" {
			t := &config.COETemplate{Meta: config.Meta{UUID: op["uuid"].(string), Name: op["name"].(string)}}
			raw, _ := json.Marshal(op["fields"])
			_ = json.Unmarshal(raw, t)
			t.ProjectID, _ = op["project_id"].(string)
			p.templates = append(p.templates, t)
		}
		return coewire.SubmitReply{JobID: int64(len(p.ops))}, nil
	}
	return nil, ecode.Errorf(ecode.Inval, "unknown method %s", method)
}

func (p *luxiPeer) last() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ops[len(p.ops)-1]
}

func (p *luxiPeer) setRefusal(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = err
}

func listOfAny[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func startLuxiPeer(t *testing.T, p *luxiPeer) *apifront.LuxiPool {
	t.Helper()
	dir, err := os.MkdirTemp("", "coeluxi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	s := luxi.NewServer(luxi.HandlerFunc(p.call), luxi.ServerOptions{Path: path})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	pool := apifront.NewLuxiPool([]string{path}, apifront.PoolOptions{})
	t.Cleanup(func() { pool.Close(); cancel(); <-done })
	return pool
}

// The LUXI backend sends the opcodes' parameters (uuids resolved, the
// caller's project and user), hides other projects' objects, and a
// refusal corrald encodes keeps its status through LUXI.
func TestLuxiBackendOverLUXI(t *testing.T) {
	p := &luxiPeer{}
	pool := startLuxiPeer(t, p)
	a := newAPITest(t)
	a.h = NewHandler(Config{Backend: NewLuxiBackend(pool), Auth: testAuth{}})
	user := []string{"X-Test-Admin", "", "X-Test-User", "bob"}

	r := a.want(a.do("POST", "/v1/clustertemplates", templateBody, user...), http.StatusCreated)
	tuuid := r.body["uuid"].(string)
	op := p.last()
	if op["OP_ID"] != "OP_COE_TEMPLATE_CREATE" || op["name"] != "k8s" || op["uuid"] != tuuid || op["project_id"] != "p1" ||
		op["user_id"] != "bob" || op["fields"].(map[string]any)["image_id"] != "fedora" {
		t.Fatalf("template create op: %v", op)
	}

	cuuid := config.NewUUID()
	other := config.NewUUID()
	p.mu.Lock()
	p.clusters = []coewire.ClusterRecord{
		{Cluster: &config.COECluster{Meta: config.Meta{UUID: cuuid, Name: "c1"}, ProjectID: "p1", Template: tuuid, Status: "CREATE_COMPLETE"},
			NodeGroups: []*config.COENodeGroup{{Meta: config.Meta{UUID: config.NewUUID(), Name: "default-worker"}, Cluster: cuuid,
				Role: "worker", IsDefault: true, NodeCount: 2}}},
		{Cluster: &config.COECluster{Meta: config.Meta{UUID: other, Name: "c9"}, ProjectID: "p2"}},
	}
	p.mu.Unlock()
	r = a.want(a.do("GET", "/v1/clusters", "", user...), 200)
	if l := r.body["clusters"].([]any); len(l) != 1 || l[0].(map[string]any)["node_count"] != float64(2) {
		t.Fatalf("bob's clusters: %s", r.raw)
	}
	a.wantError(a.do("GET", "/v1/clusters/c9", "", user...), 404, "Cluster c9 could not be found.")
	a.want(a.do("GET", "/v1/clusters/c9", ""), 200) // the administrator sees it

	a.want(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "c2", "node_count": 3, "labels": {"a": "b"}}`, user...), 202)
	op = p.last()
	if op["OP_ID"] != "OP_COE_CLUSTER_CREATE" || op["cluster_template"] != tuuid || op["node_count"] != float64(3) ||
		op["labels"].(map[string]any)["a"] != "b" || op["project_id"] != "p1" || op["user_id"] != "bob" || !isUUID(op["uuid"].(string)) {
		t.Fatalf("cluster create op: %v", op)
	}
	a.want(a.do("POST", "/v1/clusters/c1/actions/resize", `{"node_count": 1, "nodes_to_remove": ["n1"]}`, user...), 202)
	op = p.last()
	if op["OP_ID"] != "OP_COE_CLUSTER_RESIZE" || op["cluster"] != cuuid || op["node_count"] != float64(1) ||
		op["nodes_to_remove"].([]any)[0] != "n1" || op["project_id"] != "p1" {
		t.Fatalf("resize op: %v", op)
	}
	// An administrator acts on another project's cluster for its owner.
	a.want(a.do("DELETE", "/v1/clusters/c9", ""), 204)
	if op = p.last(); op["OP_ID"] != "OP_COE_CLUSTER_REMOVE" || op["cluster"] != other || op["project_id"] != "p2" {
		t.Fatalf("admin delete op: %v", op)
	}
	r = a.want(a.do("PATCH", "/v1/clusters/c1/nodegroups/default-worker", `[{"op": "replace", "path": "/max_node_count", "value": 4}]`, user...), 202)
	if op = p.last(); op["OP_ID"] != "OP_COE_NODEGROUP_MODIFY" || op["changes"].(map[string]any)["max_node_count"] != float64(4) {
		t.Fatalf("node group op: %v", op)
	}

	p.setRefusal(ErrQuotaExceeded(3))
	a.wantError(a.do("POST", "/v1/clusters", `{"cluster_template_id": "k8s", "name": "c3"}`, user...), 403, "Resource limit exceeded")
	p.setRefusal(ErrTemplateInUse(tuuid))
	a.wantError(a.do("DELETE", "/v1/clustertemplates/k8s", "", user...), 400, "is referenced by one or multiple clusters")

	r = a.want(a.do("GET", "/v1/stats?project_id=p1", "", user...), 200)
	if r.body["clusters"] != float64(1) || r.body["nodes"] != float64(2) {
		t.Fatalf("stats: %s", r.raw)
	}
	r = a.want(a.do("GET", "/v1/quotas/p1/Cluster", "", user...), 200)
	if r.body["hard_limit"] != float64(3) {
		t.Fatalf("quota: %s", r.raw)
	}
	r = a.want(a.do("GET", "/v1/mservices", ""), 200)
	if s := r.raw; !strings.Contains(s, `"binary":"magnum-conductor","state":"up"`) || !strings.Contains(s, `"host":"node1"`) ||
		!strings.Contains(s, `"binary":"magnum-api"`) {
		t.Fatalf("mservices: %s", r.raw)
	}
}

// The LUXI backend's federation ops: the caller's project on a create,
// the owner's when an administrator acts on another project's federation,
// the whole member list a join becomes, and other projects' federations
// hidden.
func TestLuxiBackendFederations(t *testing.T) {
	p := &luxiPeer{}
	pool := startLuxiPeer(t, p)
	a := newAPITest(t)
	a.h = NewHandler(Config{Backend: NewLuxiBackend(pool), Auth: testAuth{}})
	user := []string{"X-Test-Admin", "", "X-Test-User", "bob"}
	host, member, fed, theirs := config.NewUUID(), config.NewUUID(), config.NewUUID(), config.NewUUID()
	p.mu.Lock()
	p.clusters = []coewire.ClusterRecord{
		{Cluster: &config.COECluster{Meta: config.Meta{UUID: host, Name: "host"}, ProjectID: "p1", Status: "CREATE_COMPLETE"}},
		{Cluster: &config.COECluster{Meta: config.Meta{UUID: member, Name: "m1"}, ProjectID: "p1", Status: "CREATE_COMPLETE"}},
	}
	p.feds = []*config.COEFederation{
		{Meta: config.Meta{UUID: fed, Name: "f1"}, ProjectID: "p1", HostCluster: host, Members: []string{}, Status: "CREATE_COMPLETE"},
		{Meta: config.Meta{UUID: theirs, Name: "f9"}, ProjectID: "p2", HostCluster: config.NewUUID(), Status: "CREATE_COMPLETE"},
	}
	p.mu.Unlock()

	r := a.want(a.do("POST", "/v1/federations", `{"name": "f2", "hostcluster_id": "host", "member_ids": ["m1"], "properties": {"dns-zone": "z."}}`, user...), 202)
	op := p.last()
	if op["OP_ID"] != "OP_COE_FEDERATION_CREATE" || op["uuid"] != r.body["uuid"] || op["name"] != "f2" || op["hostcluster_id"] != "host" ||
		op["member_ids"].([]any)[0] != "m1" || op["properties"].(map[string]any)["dns-zone"] != "z." || op["project_id"] != "p1" {
		t.Fatalf("federation create op: %v", op)
	}
	a.want(a.do("PATCH", "/v1/federations/f1", `[{"op": "add", "path": "/member_ids", "value": "m1"}]`, user...), 202)
	op = p.last()
	if op["OP_ID"] != "OP_COE_FEDERATION_MODIFY" || op["federation"] != fed || op["project_id"] != "p1" ||
		len(op["changes"].(map[string]any)["member_ids"].([]any)) != 1 || op["changes"].(map[string]any)["member_ids"].([]any)[0] != member {
		t.Fatalf("join op: %v", op)
	}
	r = a.want(a.do("GET", "/v1/federations", "", user...), 200)
	if l := r.body["federations"].([]any); len(l) != 1 || l[0].(map[string]any)["name"] != "f1" {
		t.Fatalf("bob's federations: %s", r.raw)
	}
	a.wantError(a.do("DELETE", "/v1/federations/f9", "", user...), 404, "Federation f9 could not be found.")
	a.want(a.do("DELETE", "/v1/federations/f9", ""), 204)
	if op = p.last(); op["OP_ID"] != "OP_COE_FEDERATION_REMOVE" || op["federation"] != theirs || op["project_id"] != "p2" {
		t.Fatalf("admin delete op: %v", op)
	}
	p.setRefusal(ecode.Errorf(ecode.State, "Cluster %s is in UPDATE_IN_PROGRESS: only a cluster in CREATE_COMPLETE or UPDATE_COMPLETE joins a federation.", member))
	a.wantError(a.do("PATCH", "/v1/federations/f1", `[{"op": "add", "path": "/member_ids", "value": "m1"}]`, user...), 409, "joins a federation")
}
