package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// fakeCOE is an in-memory corrald for the COE methods, on the scripted
// fakeMaster: templates, clusters and quotas live in maps; a submitted
// cluster op makes a running job whose steps (conditions) appear one per
// cluster query, after which the cluster reaches <ACTION>_COMPLETE (or
// _FAILED when the cluster's name says "failing") and the job ends.
type fakeCOE struct {
	f  *fakeMaster
	mu sync.Mutex

	templates map[string]*config.COETemplate
	clusters  map[string]*coewire.ClusterRecord
	quotas    []*config.COEQuota
	ops       []map[string]any
	// pending are the steps a cluster still goes through, one per query,
	// with the job to end after them.
	pending map[string]*fakeCOEWork

	caPEM  string
	caKey  *ecdsa.PrivateKey
	caCert *x509.Certificate
}

type fakeCOEWork struct {
	job    int64
	action string
	steps  []string
	fail   bool
	remove bool // the cluster goes when done
}

func coeFake(t *testing.T) (*fakeMaster, *fakeCOE) {
	t.Helper()
	f := newFake(t)
	fc := &fakeCOE{f: f, templates: map[string]*config.COETemplate{}, clusters: map[string]*coewire.ClusterRecord{},
		pending: map[string]*fakeCOEWork{}}
	fc.makeCA(t)
	handlers := map[string]func(args []any) (any, error){
		coewire.MethodTemplates:  fc.templateQuery,
		coewire.MethodClusters:   fc.clusterQuery,
		coewire.MethodNodeGroups: fc.nodeGroupQuery,
		coewire.MethodQuotas:     func([]any) (any, error) { return fc.quotas, nil },
		coewire.MethodCA:         fc.caQuery,
		coewire.MethodSign:       fc.sign,
		coewire.MethodSubmit:     fc.submit,
		coewire.MethodServices: func([]any) (any, error) {
			return []coewire.Service{{Host: "node1", Binary: "corrald", Up: true, Since: fakeEpoch}}, nil
		},
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for m, h := range handlers {
		h := h
		f.handle[m] = func(_ context.Context, args []any) (any, error) {
			fc.mu.Lock()
			defer fc.mu.Unlock()
			return h(args)
		}
	}
	return f, fc
}

func (fc *fakeCOE) makeCA(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "k1 CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	fc.caKey, fc.caCert, _ = key, tmpl, der
	fc.caCert, _ = x509.ParseCertificate(der)
	fc.caPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func (fc *fakeCOE) locked(f func()) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	f()
}

func (fc *fakeCOE) opsNow() []map[string]any {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]map[string]any(nil), fc.ops...)
}

func (fc *fakeCOE) lastOp() map[string]any {
	ops := fc.opsNow()
	if len(ops) == 0 {
		return nil
	}
	return ops[len(ops)-1]
}

func (fc *fakeCOE) findTemplate(n string) *config.COETemplate {
	for _, t := range fc.templates {
		if t.UUID == n || t.Name == n {
			return t
		}
	}
	return nil
}

func (fc *fakeCOE) findCluster(n string) *coewire.ClusterRecord {
	for _, r := range fc.clusters {
		if r.Cluster.UUID == n || r.Cluster.Name == n {
			return r
		}
	}
	return nil
}

func (fc *fakeCOE) templateQuery(args []any) (any, error) {
	names := strs(argAt(args, 0))
	if len(names) == 0 {
		out := []*config.COETemplate{}
		for _, t := range fc.templates {
			out = append(out, t)
		}
		return out, nil
	}
	var out []*config.COETemplate
	for _, n := range names {
		t := fc.findTemplate(n)
		if t == nil {
			return nil, ecode.Errorf(ecode.NoEnt, "ClusterTemplate %s could not be found.", n)
		}
		out = append(out, t)
	}
	return out, nil
}

// clusterQuery answers the clusters as they are, then moves each with
// pending work one step on.
func (fc *fakeCOE) clusterQuery(args []any) (any, error) {
	names := strs(argAt(args, 0))
	var out []coewire.ClusterRecord
	var seen []*coewire.ClusterRecord
	if len(names) == 0 {
		for _, r := range fc.clusters {
			seen = append(seen, r)
		}
	}
	for _, n := range names {
		r := fc.findCluster(n)
		if r == nil {
			return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", n)
		}
		seen = append(seen, r)
	}
	for _, r := range seen {
		raw, _ := json.Marshal(r)
		var cp coewire.ClusterRecord
		_ = json.Unmarshal(raw, &cp)
		out = append(out, cp)
		fc.advance(r)
	}
	return out, nil
}

// advance moves a cluster's pending work one step: a condition, then the
// final status and the job's end.
func (fc *fakeCOE) advance(r *coewire.ClusterRecord) {
	w := fc.pending[r.Cluster.UUID]
	if w == nil {
		return
	}
	if len(w.steps) > 0 {
		step := w.steps[0]
		w.steps = w.steps[1:]
		if r.Status == nil {
			r.Status = &config.Status{}
		}
		cond := config.Condition{Type: step, Status: config.ConditionTrue, Reason: "Done", Message: "did " + step}
		if w.fail && len(w.steps) == 0 {
			cond = config.Condition{Type: step, Status: config.ConditionFalse, Reason: "StepFailed", Message: "etcd would not start"}
		}
		r.Status.SetCondition(cond, time.Unix(fakeEpoch+int64(len(r.Status.Conditions)), 0))
		return
	}
	delete(fc.pending, r.Cluster.UUID)
	status, result := "success", any(r.Cluster.UUID)
	switch {
	case w.fail:
		r.Cluster.Status, r.Cluster.StatusReason = w.action+"_FAILED", "start etcd: etcd would not start"
		status, result = "error", encErr(ecode.OpExecError, ecode.Fault, "start etcd: etcd would not start")
	case w.remove:
		delete(fc.clusters, r.Cluster.UUID)
	default:
		r.Cluster.Status = w.action + "_COMPLETE"
		for _, g := range r.NodeGroups {
			g.Status = w.action + "_COMPLETE"
			for len(g.Nodes) < g.NodeCount {
				g.Nodes = append(g.Nodes, fmt.Sprintf("%s-%s-%d", r.Cluster.Name, g.Name, len(g.Nodes)+1))
			}
			if len(g.Nodes) > g.NodeCount {
				g.Nodes = g.Nodes[:g.NodeCount]
			}
		}
	}
	fc.f.mu.Lock()
	j := fc.f.jobs[w.job]
	j.status, j.opstatus, j.opresult = status, []any{status}, []any{result}
	fc.f.mu.Unlock()
}

func (fc *fakeCOE) nodeGroupQuery(args []any) (any, error) {
	raw, _ := json.Marshal(argAt(args, 0))
	var a coewire.NodeGroupArgs
	_ = json.Unmarshal(raw, &a)
	r := fc.findCluster(a.Cluster)
	if r == nil {
		return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", a.Cluster)
	}
	if len(a.Names) == 0 {
		return r.NodeGroups, nil
	}
	var out []*config.COENodeGroup
	for _, n := range a.Names {
		for _, g := range r.NodeGroups {
			if g.Name == n || g.UUID == n {
				out = append(out, g)
			}
		}
	}
	if len(out) != len(a.Names) {
		return nil, ecode.Errorf(ecode.NoEnt, "Nodegroup %v could not be found.", a.Names)
	}
	return out, nil
}

func (fc *fakeCOE) caQuery(args []any) (any, error) {
	n, _ := argAt(args, 0).(string)
	r := fc.findCluster(n)
	if r == nil {
		return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", n)
	}
	return coewire.Certificate{ClusterUUID: r.Cluster.UUID, PEM: fc.caPEM}, nil
}

// sign signs a CSR as a client certificate with the test CA.
func (fc *fakeCOE) sign(args []any) (any, error) {
	raw, _ := json.Marshal(argAt(args, 0))
	var a coewire.SignArgs
	_ = json.Unmarshal(raw, &a)
	r := fc.findCluster(a.Cluster)
	if r == nil {
		return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", a.Cluster)
	}
	b, _ := pem.Decode([]byte(a.CSR))
	if b == nil {
		return nil, ecode.Errorf(ecode.Inval, "not a PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil || csr.CheckSignature() != nil {
		return nil, ecode.Errorf(ecode.Inval, "bad certificate request")
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: csr.Subject,
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, fc.caCert, csr.PublicKey, fc.caKey)
	if err != nil {
		return nil, err
	}
	return coewire.Certificate{ClusterUUID: r.Cluster.UUID, PEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}, nil
}

// job records a running job of op in the fakeMaster, or a finished one.
func (fc *fakeCOE) job(op map[string]any, running bool) int64 {
	fc.f.mu.Lock()
	defer fc.f.mu.Unlock()
	id := fc.f.nextID
	fc.f.nextID++
	st := "success"
	if running {
		st = "running"
	}
	fc.f.jobs[id] = &fakeJob{id: id, ops: []any{op}, status: st, opstatus: []any{st}, opresult: []any{nil}}
	return id
}

func (fc *fakeCOE) submit(args []any) (any, error) {
	op, _ := argAt(args, 0).(map[string]any)
	fc.ops = append(fc.ops, op)
	str := func(k string) string { s, _ := op[k].(string); return s }
	prereq := func(c ecode.Class, format string, a ...any) error {
		return ecode.New(ecode.OpPrereqError, c, fmt.Sprintf(format, a...))
	}
	start := func(r *coewire.ClusterRecord, action string, steps ...string) (any, error) {
		id := fc.job(op, true)
		r.Cluster.Status = action + "_IN_PROGRESS"
		fc.pending[r.Cluster.UUID] = &fakeCOEWork{job: id, action: action, steps: steps,
			fail: r.Cluster.Name == "failing", remove: op["OP_ID"] == "OP_COE_CLUSTER_REMOVE"}
		return coewire.SubmitReply{JobID: id}, nil
	}
	switch op["OP_ID"] {
	case "OP_COE_TEMPLATE_CREATE":
		t := &config.COETemplate{}
		raw, _ := json.Marshal(op["fields"])
		if err := json.Unmarshal(raw, t); err != nil {
			return nil, prereq(ecode.Inval, "Invalid input for the template's fields: %v", err)
		}
		t.UUID, t.Name, t.ProjectID, t.Driver = str("uuid"), str("name"), str("project_id"), "fake"
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		fc.templates[t.UUID] = t
	case "OP_COE_TEMPLATE_MODIFY":
		t := fc.findTemplate(str("cluster_template"))
		if t == nil {
			return nil, prereq(ecode.NoEnt, "ClusterTemplate %s could not be found.", str("cluster_template"))
		}
		raw, _ := json.Marshal(op["changes"])
		if err := json.Unmarshal(raw, t); err != nil {
			return nil, prereq(ecode.Inval, "Invalid input for the template's fields: %v", err)
		}
	case "OP_COE_TEMPLATE_REMOVE":
		t := fc.findTemplate(str("cluster_template"))
		if t == nil {
			return nil, prereq(ecode.NoEnt, "ClusterTemplate %s could not be found.", str("cluster_template"))
		}
		for _, r := range fc.clusters {
			if r.Cluster.Template == t.UUID {
				return nil, prereq(ecode.Inval, "ClusterTemplate %s is referenced by one or multiple clusters.", t.UUID)
			}
		}
		delete(fc.templates, t.UUID)
	case "OP_COE_CLUSTER_CREATE":
		return fc.createCluster(op, start)
	case "OP_COE_CLUSTER_RESIZE", "OP_COE_CLUSTER_MODIFY", "OP_COE_CLUSTER_UPGRADE", "OP_COE_CA_ROTATE",
		"OP_COE_NODEGROUP_CREATE", "OP_COE_NODEGROUP_MODIFY", "OP_COE_NODEGROUP_REMOVE", "OP_COE_CLUSTER_REMOVE":
		r := fc.findCluster(str("cluster"))
		if r == nil {
			return nil, prereq(ecode.NoEnt, "Cluster %s could not be found.", str("cluster"))
		}
		if n, ok := op["node_count"].(float64); ok && op["OP_ID"] == "OP_COE_CLUSTER_RESIZE" {
			for _, g := range r.NodeGroups {
				if g.Role == config.COERoleWorker && g.IsDefault {
					g.NodeCount = int(n)
				}
			}
		}
		action := "UPDATE"
		if op["OP_ID"] == "OP_COE_CLUSTER_REMOVE" {
			action = "DELETE"
		}
		return start(r, action, "Step/"+op["OP_ID"].(string))
	case "OP_COE_QUOTA_SET":
		for _, q := range fc.quotas {
			if q.ProjectID == str("project_id") && q.Resource == str("resource") {
				if op["create"] == true {
					return nil, prereq(ecode.Exists, "Quota for project %s already exists for resource %s.", q.ProjectID, q.Resource)
				}
				q.HardLimit = int(op["hard_limit"].(float64))
				return coewire.SubmitReply{JobID: fc.job(op, false)}, nil
			}
		}
		if op["create"] != true {
			return nil, prereq(ecode.NoEnt, "Quota could not be found for project %s and resource %s.", str("project_id"), str("resource"))
		}
		fc.quotas = append(fc.quotas, &config.COEQuota{Meta: config.Meta{UUID: config.NewUUID(), CTime: fakeEpoch},
			ProjectID: str("project_id"), Resource: str("resource"), HardLimit: int(op["hard_limit"].(float64))})
	}
	return coewire.SubmitReply{JobID: fc.job(op, false)}, nil
}

func (fc *fakeCOE) createCluster(op map[string]any, start func(*coewire.ClusterRecord, string, ...string) (any, error)) (any, error) {
	str := func(k string) string { s, _ := op[k].(string); return s }
	t := fc.findTemplate(str("cluster_template"))
	if t == nil {
		return nil, ecode.New(ecode.OpPrereqError, ecode.NoEnt, fmt.Sprintf("ClusterTemplate %s could not be found.", str("cluster_template")))
	}
	n := 0
	for _, r := range fc.clusters {
		if r.Cluster.ProjectID == str("project_id") {
			n++
		}
	}
	for _, q := range fc.quotas {
		if q.ProjectID == str("project_id") && n >= q.HardLimit {
			return nil, ecode.New(ecode.OpPrereqError, ecode.Quota, fmt.Sprintf("Resource limit exceeded: You have reached the maximum clusters per project, %d. You may delete a cluster to make room for a new one.", q.HardLimit))
		}
	}
	c := &config.COECluster{Meta: config.Meta{UUID: str("uuid"), Name: str("name"), CTime: fakeEpoch}, ProjectID: str("project_id"),
		Template: t.UUID, CreateTimeout: int(op["create_timeout"].(float64)), APIAddress: "https://127.0.0.1:6443", Driver: "fake"}
	group := func(name, role string, count float64) *config.COENodeGroup {
		return &config.COENodeGroup{Meta: config.Meta{UUID: config.NewUUID(), Name: name}, Cluster: c.UUID, Role: role,
			IsDefault: true, NodeCount: int(count), Status: config.COECreateInProgress}
	}
	r := &coewire.ClusterRecord{Cluster: c, NodeGroups: []*config.COENodeGroup{
		group("default-master", config.COERoleMaster, op["master_count"].(float64)),
		group("default-worker", config.COERoleWorker, op["node_count"].(float64)),
	}}
	fc.clusters[c.UUID] = r
	return start(r, "CREATE", "CertificatesReady", "EtcdReady", "ControlPlaneReady")
}
