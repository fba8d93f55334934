package cli

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
)

func fastCOE(e *Env) { e.coePoll = time.Millisecond }

func TestCOETemplateCommands(t *testing.T) {
	f, fc := coeFake(t)
	r := f.run(t, "coe", "template", "create", "small", "--coe", "kubernetes", "--image", "kwok", "--os", "fake",
		"--labels", "kube_tag=v1.31.0,extra_args=--a,--b", "--labels", "workers=kwok", "--public", "--docker-volume-size", "10",
		"--tags", "a, b", "--project", "team1", "-o", "json")
	if r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	op := fc.lastOp()
	if op["name"] != "small" || op["project_id"] != "team1" || op["uuid"] == "" ||
		!sameJSON(t, op["fields"], `{"coe": "kubernetes", "image_id": "kwok", "cluster_distro": "fake", "public": true,
			"docker_volume_size": 10, "tags": ["a", "b"],
			"labels": {"kube_tag": "v1.31.0", "extra_args": "--a,--b", "workers": "kwok"}}`) {
		t.Fatalf("create op: %v", op)
	}
	var shown map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil || shown["name"] != "small" || shown["public"] != true ||
		shown["hidden"] != false || shown["driver"] != "fake" || shown["uuid"] != op["uuid"] {
		t.Fatalf("create output: %v %s", err, r.stdout)
	}
	if r = f.run(t, "coe", "template", "create", "x", "--coe", "kubernetes"); r.code != 2 || !strings.Contains(r.stderr, "--coe and --image are required") {
		t.Fatalf("create without image: %d %s", r.code, r.stderr)
	}
	if r = f.run(t, "coe", "template", "create", "x", "--coe", "kubernetes", "--image", "i", "--labels", "novalue"); r.code != 2 {
		t.Fatalf("bad labels: %d %s", r.code, r.stderr)
	}

	r = f.run(t, "coe", "template", "list")
	want := "uuid                                 name  coe        server_type cluster_distro driver public hidden\n" +
		op["uuid"].(string) + " small kubernetes -           fake           fake   Y      N\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("list:\n%s\nwant\n%s", r.stdout, want)
	}
	if r = f.run(t, "coe", "template", "list", "--no-headers", "--separator", "|", "-o", "name,labels"); r.stdout != `small|{"extra_args":"--a,--b","kube_tag":"v1.31.0","workers":"kwok"}`+"\n" {
		t.Fatalf("list -o: %q", r.stdout)
	}
	if r = f.run(t, "coe", "template", "show", "small"); r.code != 0 || !strings.Contains(r.stdout, "cluster_distro") ||
		!strings.Contains(r.stdout, `"kube_tag":"v1.31.0"`) {
		t.Fatalf("show: %d %s", r.code, r.stdout)
	}
	if r = f.run(t, "coe", "template", "show", "nope"); r.code != 3 || !strings.Contains(r.stderr, "ClusterTemplate nope could not be found.") {
		t.Fatalf("show unknown: %d %s", r.code, r.stderr)
	}

	// update: typed NAME=VALUE, the openstack client's "replace" word, remove.
	r = f.run(t, "coe", "template", "update", "small", "replace", "hidden=true", "apiserver_port=6444", "labels=a=b,c=d", "name=tiny")
	if r.code != 0 || !sameJSON(t, fc.lastOp()["changes"], `{"hidden": true, "apiserver_port": 6444, "labels": {"a": "b", "c": "d"}, "name": "tiny"}`) ||
		fc.lastOp()["cluster_template"] != op["uuid"] || !strings.Contains(r.stdout, "tiny") {
		t.Fatalf("update: %d %s %v", r.code, r.stderr, fc.lastOp())
	}
	if r = f.run(t, "coe", "template", "update", "tiny", "remove", "http_proxy"); r.code != 0 || !sameJSON(t, fc.lastOp()["changes"], `{"http_proxy": null}`) {
		t.Fatalf("update remove: %d %s %v", r.code, r.stderr, fc.lastOp())
	}
	n := len(fc.opsNow())
	for _, bad := range [][]string{{"public=maybe"}, {"apiserver_port=-1"}, {"driver=x"}, {"replace"}, {"nokey"}} {
		if r = f.run(t, append([]string{"coe", "template", "update", "tiny"}, bad...)...); r.code != 2 {
			t.Errorf("update %v: %d %s", bad, r.code, r.stderr)
		}
	}
	if len(fc.opsNow()) != n {
		t.Fatalf("a refused update reached the master: %v", fc.opsNow()[n:])
	}

	// delete: refused while a cluster uses the template, in the units' words.
	fc.locked(func() {
		fc.clusters["c"] = &coewire.ClusterRecord{Cluster: &config.COECluster{Meta: config.Meta{UUID: "c", Name: "k"}, Template: op["uuid"].(string)}}
	})
	r = f.run(t, "coe", "template", "delete", "tiny")
	if r.code != 2 || !strings.Contains(r.stderr, "ClusterTemplate "+op["uuid"].(string)+" is referenced by one or multiple clusters.") {
		t.Fatalf("delete in use: %d %s", r.code, r.stderr)
	}
	fc.locked(func() { delete(fc.clusters, "c") })
	if r = f.run(t, "coe", "template", "delete", "tiny"); r.code != 0 || r.stdout != "Request to delete cluster template tiny has been accepted.\n" {
		t.Fatalf("delete: %d %q %s", r.code, r.stdout, r.stderr)
	}
}

// addTemplate stores a template in the fake.
func addTemplate(fc *fakeCOE, name string, tls bool) {
	fc.locked(func() {
		fc.templates[name+"-uuid"] = &config.COETemplate{Meta: config.Meta{UUID: name + "-uuid", Name: name}, COE: "kubernetes",
			ServerType: "vm", ClusterDistro: "fake", TLSDisabled: !tls, Driver: "fake", Labels: map[string]string{}}
	})
}

func TestCOEClusterCreateWaitFollowsTheSteps(t *testing.T) {
	f, fc := coeFake(t)
	addTemplate(fc, "small", true)
	r := f.runEnv(t, fastCOE, "coe", "cluster", "create", "k1", "--template", "small", "--node-count", "3", "--labels", "a=b",
		"--merge-labels", "--timeout", "5", "--uuid", "11111111-2222-3333-4444-555555555555", "--wait")
	want := "Request to create cluster 11111111-2222-3333-4444-555555555555 accepted (job 1)\n" +
		"k1: CREATE_IN_PROGRESS\n" +
		"k1:   CertificatesReady True (Done) did CertificatesReady\n" +
		"k1:   EtcdReady True (Done) did EtcdReady\n" +
		"k1:   ControlPlaneReady True (Done) did ControlPlaneReady\n" +
		"k1:   node group default-master: CREATE_COMPLETE (1 nodes)\n" +
		"k1:   node group default-worker: CREATE_COMPLETE (3 nodes)\n" +
		"k1: CREATE_COMPLETE\n"
	if r.code != 0 || r.stdout != want {
		t.Fatalf("create --wait: %d\n%s\nwant\n%s\n%s", r.code, r.stdout, want, r.stderr)
	}
	if !sameJSON(t, fc.opsNow()[0], `{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": "k1", "uuid": "11111111-2222-3333-4444-555555555555",
		"cluster_template": "small", "node_count": 3, "master_count": 1, "create_timeout": 5, "merge_labels": true,
		"labels": {"a": "b"}, "project_id": ""}`) {
		t.Fatalf("create op: %v", fc.opsNow()[0])
	}

	// show: the fields, the conditions, the node groups and their nodes.
	r = f.run(t, "coe", "cluster", "show", "k1")
	for _, s := range []string{"status              CREATE_COMPLETE", "node_count          3", "api_address         https://127.0.0.1:6443",
		"Conditions:\nType              Status Reason Message               Since\nCertificatesReady True   Done   did CertificatesReady 2023-11-14 22:13:20\nEtcdReady",
		"Node groups:\nName           Role   Default Nodes Status          Kubernetes nodes\ndefault-master master Y           1 CREATE_COMPLETE k1-default-master-1\n" +
			"default-worker worker Y           3 CREATE_COMPLETE k1-default-worker-1,k1-default-worker-2,k1-default-worker-3\n"} {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("show lacks %q:\n%s", s, r.stdout)
		}
	}
	var doc map[string]any
	r = f.run(t, "coe", "cluster", "show", "k1", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &doc); err != nil || doc["status"] != "CREATE_COMPLETE" || doc["node_count"] != 3.0 ||
		len(doc["conditions"].([]any)) != 3 || len(doc["nodegroups"].([]any)) != 2 ||
		doc["nodegroups"].([]any)[1].(map[string]any)["nodes"].([]any)[2] != "k1-default-worker-3" {
		t.Fatalf("show -o json: %v\n%s", err, r.stdout)
	}
	r = f.run(t, "coe", "cluster", "list")
	want = "uuid                                 name keypair node_count master_count status          health_status\n" +
		"11111111-2222-3333-4444-555555555555 k1   -                3            1 CREATE_COMPLETE -\n"
	if r.stdout != want {
		t.Fatalf("list:\n%s\nwant\n%s", r.stdout, want)
	}

	// Without --wait the command returns once the job is accepted.
	r = f.runEnv(t, fastCOE, "coe", "cluster", "resize", "k1", "2", "--nodes-to-remove", "k1-default-worker-1,k1-default-worker-3", "--nodegroup", "default-worker")
	if r.code != 0 || r.stdout != "Request to resize cluster k1 has been accepted (job 2).\n" ||
		!sameJSON(t, fc.lastOp(), `{"OP_ID": "OP_COE_CLUSTER_RESIZE", "cluster": "k1", "node_count": 2, "nodegroup": "default-worker",
			"nodes_to_remove": ["k1-default-worker-1", "k1-default-worker-3"]}`) {
		t.Fatalf("resize: %d %q %s %v", r.code, r.stdout, r.stderr, fc.lastOp())
	}
	// Following a delete ends when the cluster is gone.
	fc.locked(func() { delete(fc.pending, "11111111-2222-3333-4444-555555555555") })
	r = f.runEnv(t, fastCOE, "coe", "cluster", "delete", "k1", "--wait")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "k1: DELETE_IN_PROGRESS\nk1:   Step/OP_COE_CLUSTER_REMOVE True (Done) did Step/OP_COE_CLUSTER_REMOVE\nk1: deleted\n") {
		t.Fatalf("delete --wait: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r = f.run(t, "coe", "cluster", "show", "k1"); r.code != 3 || !strings.Contains(r.stderr, "Cluster k1 could not be found.") {
		t.Fatalf("show after delete: %d %s", r.code, r.stderr)
	}
}

func TestCOEClusterWaitReportsTheFailure(t *testing.T) {
	f, fc := coeFake(t)
	addTemplate(fc, "small", true)
	r := f.runEnv(t, fastCOE, "coe", "cluster", "create", "failing", "--template", "small", "--wait")
	if r.code == 0 || !strings.Contains(r.stdout, "failing:   ControlPlaneReady False (StepFailed) etcd would not start\n") ||
		!strings.Contains(r.stdout, "failing: CREATE_FAILED: start etcd: etcd would not start\n") ||
		!strings.Contains(r.stderr, "etcd would not start") {
		t.Fatalf("create of a failing cluster: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// Refusals come back as the opcode's error, before any job runs.
	if r = f.run(t, "coe", "cluster", "create", "k2", "--template", "nope"); r.code != 3 || !strings.Contains(r.stderr, "ClusterTemplate nope could not be found.") {
		t.Fatalf("unknown template: %d %s", r.code, r.stderr)
	}
	if r = f.run(t, "coe", "cluster", "create", "k2"); r.code != 2 || !strings.Contains(r.stderr, "--template is required") {
		t.Fatalf("no template: %d %s", r.code, r.stderr)
	}
}

func TestCOEOpsOfTheOtherCommands(t *testing.T) {
	f, fc := coeFake(t)
	addTemplate(fc, "small", true)
	if r := f.runEnv(t, fastCOE, "coe", "cluster", "create", "k1", "--template", "small", "--project", "team1", "--wait"); r.code != 0 {
		t.Fatalf("create: %s", r.stderr)
	}
	for _, c := range []struct {
		args []string
		op   string
	}{
		{[]string{"cluster", "update", "k1", "replace", "node_count=4"}, `{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": "k1", "changes": {"node_count": 4}}`},
		{[]string{"cluster", "update", "k1", "node_count=4", "--rollback"}, `{"OP_ID": "OP_COE_CLUSTER_MODIFY", "cluster": "k1", "changes": {"node_count": 4}, "rollback": true}`},
		{[]string{"cluster", "resize", "k1", "1", "--rollback"}, `{"OP_ID": "OP_COE_CLUSTER_RESIZE", "cluster": "k1", "node_count": 1, "nodes_to_remove": [], "rollback": true}`},
		{[]string{"cluster", "upgrade", "k1", "small", "--max-batch-size", "2"}, `{"OP_ID": "OP_COE_CLUSTER_UPGRADE", "cluster": "k1", "cluster_template": "small", "max_batch_size": 2}`},
		{[]string{"nodegroup", "create", "k1", "big", "--node-count", "2", "--min-nodes", "1", "--max-nodes", "5", "--flavor", "large", "--labels", "x=y", "--uuid", "g-uuid"},
			`{"OP_ID": "OP_COE_NODEGROUP_CREATE", "cluster": "k1", "name": "big", "uuid": "g-uuid", "role": "worker", "node_count": 2,
			  "min_node_count": 1, "max_node_count": 5, "flavor_id": "large", "labels": {"x": "y"}, "merge_labels": false}`},
		{[]string{"nodegroup", "update", "k1", "big", "max_node_count=6", "min_node_count=2"},
			`{"OP_ID": "OP_COE_NODEGROUP_MODIFY", "cluster": "k1", "nodegroup": "big", "changes": {"max_node_count": 6, "min_node_count": 2}}`},
		{[]string{"nodegroup", "update", "k1", "big", "max_node_count=null"},
			`{"OP_ID": "OP_COE_NODEGROUP_MODIFY", "cluster": "k1", "nodegroup": "big", "changes": {"max_node_count": null}}`},
		{[]string{"nodegroup", "delete", "k1", "big"}, `{"OP_ID": "OP_COE_NODEGROUP_REMOVE", "cluster": "k1", "nodegroup": "big"}`},
		{[]string{"ca", "rotate", "k1"}, `{"OP_ID": "OP_COE_CA_ROTATE", "cluster": "k1"}`},
		{[]string{"quota", "set", "--project-id", "team1", "--hard-limit", "1"}, `{"OP_ID": "OP_COE_QUOTA_SET", "project_id": "team1", "resource": "Cluster", "hard_limit": 1, "create": true}`},
		{[]string{"quota", "set", "--project-id", "team1", "--hard-limit", "2"}, `{"OP_ID": "OP_COE_QUOTA_SET", "project_id": "team1", "resource": "Cluster", "hard_limit": 2, "create": false}`},
		{[]string{"quota", "delete", "--project-id", "team1"}, `{"OP_ID": "OP_COE_QUOTA_REMOVE", "project_id": "team1", "resource": "Cluster"}`},
	} {
		fc.locked(func() { fc.pending = map[string]*fakeCOEWork{} })
		r := f.run(t, append([]string{"coe"}, c.args...)...)
		if r.code != 0 || !sameJSON(t, fc.lastOp(), c.op) {
			t.Errorf("%v: %d %s\nop %v\nwant %s", c.args, r.code, r.stderr, fc.lastOp(), c.op)
		}
	}
	n := len(fc.opsNow())
	for _, bad := range [][]string{
		{"cluster", "update", "k1", "master_count=3"},
		{"cluster", "resize", "k1", "-1"},
		{"cluster", "upgrade", "k1", "small", "--max-batch-size", "0"},
		{"nodegroup", "update", "k1", "big", "role=master"},
		{"quota", "set", "--hard-limit", "3"},
		{"quota", "set", "--project-id", "p"},
		{"cluster", "show", "k1", "-o", "yaml"},
	} {
		if r := f.run(t, append([]string{"coe"}, bad...)...); r.code != 2 {
			t.Errorf("%v: %d %s", bad, r.code, r.stderr)
		}
	}
	if len(fc.opsNow()) != n {
		t.Fatalf("a refused command reached the master: %v", fc.opsNow()[n:])
	}

	// Quotas: shown as set, the default when none is, a create past it
	// refused with Magnum's message.
	f.run(t, "coe", "quota", "set", "--project-id", "team1", "--hard-limit", "1")
	if r := f.run(t, "coe", "quota", "list"); r.stdout != "project_id resource hard_limit\nteam1      Cluster           1\n" {
		t.Fatalf("quota list: %q", r.stdout)
	}
	if r := f.run(t, "coe", "quota", "show", "--project-id", "other", "-o", "json"); !sameJSON(t, mustJSON(t, r.stdout),
		`{"project_id": "other", "resource": "Cluster", "hard_limit": 20}`) {
		t.Fatalf("default quota: %s", r.stdout)
	}
	r := f.run(t, "coe", "cluster", "create", "k2", "--template", "small", "--project", "team1")
	if r.code == 0 || !strings.Contains(r.stderr, "Resource limit exceeded: You have reached the maximum clusters per project, 1.") {
		t.Fatalf("create past the quota: %d %s", r.code, r.stderr)
	}
	if r = f.run(t, "coe", "service", "list"); r.stdout != "host  binary  up since\nnode1 corrald Y  2023-11-14T22:13:20+00:00\n" {
		t.Fatalf("service list: %q", r.stdout)
	}
	if r = f.run(t, "coe", "nodegroup", "list", "k1", "--role", "worker", "-o", "name,node_count,nodes"); r.stdout !=
		"name           node_count nodes\ndefault-worker          1 k1-default-worker-1\n" {
		t.Fatalf("nodegroup list: %q", r.stdout)
	}
}

func TestCOEClusterConfigWritesAKubeconfig(t *testing.T) {
	f, fc := coeFake(t)
	addTemplate(fc, "small", true)
	addTemplate(fc, "plain", false)
	f.runEnv(t, fastCOE, "coe", "cluster", "create", "k1", "--template", "small", "--wait")
	dir := filepath.Join(t.TempDir(), "kube")
	r := f.run(t, "coe", "cluster", "config", "k1", "--dir", dir)
	file := filepath.Join(dir, "config")
	if r.code != 0 || r.stdout != "export KUBECONFIG="+file+"\n" {
		t.Fatalf("config: %d %q %s", r.code, r.stdout, r.stderr)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig mode: %v %v", fi, err)
	}
	b, _ := os.ReadFile(file)
	kc := string(b)
	field := func(name string) []byte {
		for _, l := range strings.Split(kc, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+": "); ok {
				d, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				return d
			}
		}
		t.Fatalf("kubeconfig has no %s:\n%s", name, kc)
		return nil
	}
	if string(field("certificate-authority-data")) != fc.caPEM || !strings.Contains(kc, "server: https://127.0.0.1:6443\n") ||
		!strings.Contains(kc, "current-context: default\n") {
		t.Fatalf("kubeconfig:\n%s", kc)
	}
	cb, _ := pem.Decode(field("client-certificate-data"))
	crt, err := x509.ParseCertificate(cb.Bytes)
	if err != nil || crt.Subject.CommonName != "admin" || !reflect.DeepEqual(crt.Subject.Organization, []string{"system:masters"}) ||
		crt.CheckSignatureFrom(fc.caCert) != nil {
		t.Fatalf("client certificate: %v %v", err, crt.Subject)
	}
	kb, _ := pem.Decode(field("client-key-data"))
	key, err := x509.ParsePKCS1PrivateKey(kb.Bytes)
	if err != nil || key.N.BitLen() != 2048 || !crt.PublicKey.(*rsa.PublicKey).Equal(&key.PublicKey) {
		t.Fatalf("client key: %v", err)
	}
	// The key never went to the master: only the request did.
	f.mu.Lock()
	calls := append([]fakeCall(nil), f.calls...)
	f.mu.Unlock()
	for _, c := range calls {
		raw, _ := json.Marshal(c.Args)
		if strings.Contains(string(raw), "PRIVATE KEY") {
			t.Fatalf("%s carried a private key", c.Method)
		}
	}
	// An existing file is kept unless --force.
	if r = f.run(t, "coe", "cluster", "config", "k1", "--dir", dir); r.code != 4 || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("config over a file: %d %s", r.code, r.stderr)
	}
	if r = f.run(t, "coe", "cluster", "config", "k1", "--dir", dir, "--force"); r.code != 0 {
		t.Fatalf("config --force: %d %s", r.code, r.stderr)
	}
	if b2, _ := os.ReadFile(file); string(b2) == kc {
		t.Fatal("--force wrote the same key again")
	}
	// A CA answering something else is refused, not written.
	fc.locked(func() { fc.caPEM = "fake CA of k1" })
	if r = f.run(t, "coe", "cluster", "config", "k1", "--dir", t.TempDir()); r.code == 0 || !strings.Contains(r.stderr, "not a PEM certificate") {
		t.Fatalf("config with a bad CA: %d %s", r.code, r.stderr)
	}
	// TLS disabled: no credentials at all.
	f.runEnv(t, fastCOE, "coe", "cluster", "create", "k2", "--template", "plain", "--wait")
	dir2 := t.TempDir()
	if r = f.run(t, "coe", "cluster", "config", "k2", "--dir", dir2); r.code != 0 {
		t.Fatalf("config of a TLS-less cluster: %s", r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(dir2, "config")); strings.Contains(string(b), "-data") || !strings.Contains(string(b), "current-context: k2") {
		t.Fatalf("TLS-less kubeconfig:\n%s", b)
	}
}

func TestCOECASignAndShow(t *testing.T) {
	f, fc := coeFake(t)
	addTemplate(fc, "small", true)
	f.runEnv(t, fastCOE, "coe", "cluster", "create", "k1", "--template", "small", "--wait")
	if r := f.run(t, "coe", "ca", "show", "k1"); r.code != 0 || r.stdout != fc.caPEM {
		t.Fatalf("ca show: %d %q", r.code, r.stdout)
	}
	_, csr, err := newAdminCSR()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "me.csr")
	os.WriteFile(file, []byte(csr), 0o600)
	r := f.run(t, "coe", "ca", "sign", "k1", file)
	b, _ := pem.Decode([]byte(r.stdout))
	if r.code != 0 || b == nil {
		t.Fatalf("ca sign: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if crt, err := x509.ParseCertificate(b.Bytes); err != nil || crt.CheckSignatureFrom(fc.caCert) != nil {
		t.Fatalf("signed: %v", err)
	}
	r = f.runEnv(t, func(e *Env) { e.Stdin = strings.NewReader(csr) }, "coe", "ca", "sign", "k1", "-")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("ca sign from stdin: %d %s", r.code, r.stderr)
	}
	if r = f.run(t, "coe", "ca", "sign", "k1", filepath.Join(t.TempDir(), "none")); r.code != 2 {
		t.Fatalf("missing CSR file: %d %s", r.code, r.stderr)
	}
	os.WriteFile(file, []byte("hello"), 0o600)
	if r = f.run(t, "coe", "ca", "sign", "k1", file); r.code != 2 || !strings.Contains(r.stderr, "not a PEM certificate request") {
		t.Fatalf("not a CSR: %d %s", r.code, r.stderr)
	}
}

func TestParseLabels(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{
		{[]string{"a=1,b=2"}, `{"a": "1", "b": "2"}`},
		{[]string{"a=1", "b=x=y"}, `{"a": "1", "b": "x=y"}`},
		{[]string{"args=--x,--y,k=v"}, `{"args": "--x,--y", "k": "v"}`},
		{[]string{"a="}, `{"a": ""}`},
	} {
		got, err := parseLabels(c.in)
		if err != nil || !sameJSON(t, got, c.want) {
			t.Errorf("parseLabels(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"x", "=v", ",a=b"} {
		if _, err := parseLabels([]string{bad}); err == nil {
			t.Errorf("parseLabels(%q) accepted", bad)
		}
	}
}

func FuzzParseLabels(f *testing.F) {
	for _, s := range []string{"a=1,b=2", "args=--x,--y,k=v", "x", "=,=", "a=b=c,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseLabels([]string{s})
		if err != nil {
			return
		}
		// Every key is named in the input, and joining the pairs back
		// gives a string with the same pieces.
		n := 0
		for k, v := range got {
			if strings.TrimSpace(k) == "" || !strings.Contains(s, k) || !strings.Contains(s, "="+v.(string)) {
				t.Fatalf("parseLabels(%q): %q=%q not in the input", s, k, v)
			}
			n += strings.Count(v.(string), ",") + 1
		}
		if n > strings.Count(s, ",")+1 {
			t.Fatalf("parseLabels(%q) made more pieces than there are: %v", s, got)
		}
	})
}

func FuzzParseChanges(f *testing.F) {
	for _, s := range []string{"node_count=3", "replace public=true", "remove http_proxy", "labels=a=b,c=d", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseChanges(strings.Fields(s), templateChangeable)
		if err != nil {
			return
		}
		for k, v := range got {
			if !strings.Contains(s, k) {
				t.Fatalf("parseChanges(%q): %s not asked for", s, k)
			}
			switch coeField(k).kind {
			case kindBool:
				if _, ok := v.(bool); !ok && v != nil {
					t.Fatalf("parseChanges(%q): %s=%v is not a bool", s, k, v)
				}
			case kindNumber:
				if n, ok := v.(int); (!ok || n < 0) && v != nil {
					t.Fatalf("parseChanges(%q): %s=%v is not a count", s, k, v)
				}
			}
		}
	})
}
