package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/coe/driver/k8sbm"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/machinewire"
	"github.com/corral/corral/internal/secret"
)

// bmMachine is a machine as corrald stores it (unmasked: the LUXI socket
// is root's).
func bmMachine(t *testing.T, c *cluster, name string) *config.Machine {
	t.Helper()
	var recs []machinewire.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.luxi.Call(ctx, machinewire.MethodQuery, []any{[]string{name}}, &recs); err != nil || len(recs) != 1 {
		t.Fatalf("machine %s: %v %v", name, err, recs)
	}
	return recs[0].Machine
}

// machineOS plays a deployed machine's operating system: it reads the
// config drive the deploy left in instance_info and runs what the join
// configuration asks for, a real kubelet (with containerd) started with
// the config drive's bootstrap kubeconfig under the machine's name.
type machineOS struct {
	cp  *controlplane.ControlPlane
	sup *controlplane.Supervisor
}

func bootMachine(t *testing.T, c *cluster, name string, within time.Duration) *machineOS {
	t.Helper()
	var m *config.Machine
	waitFor(t, within, name+" active with a config drive", func() bool {
		m = bmMachine(t, c, name)
		return m.ProvisionState == "active" && m.InstanceInfo["configdrive"] != nil
	})
	cd, ok := m.InstanceInfo["configdrive"].(map[string]any)
	if !ok {
		t.Fatalf("%s's config drive is %T", name, m.InstanceInfo["configdrive"])
	}
	files, err := k8sbm.ReadConfigDrive(cd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(files[k8sbm.KubeletDefaultsPath], "--hostname-override="+name) {
		t.Fatalf("kubelet flags of %s: %q", name, files[k8sbm.KubeletDefaultsPath])
	}
	md, _ := cd["meta_data"].(map[string]any)
	server, _ := md["corral_api_server"].(string)
	tools, err := k8sbin.Locate(k8sbin.Dir(""), k8sbin.Kubelet)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	id := controlplane.WorkerID(m.InstanceUUID, name)
	cp, err := controlplane.NewWorker(controlplane.WorkerSpec{ClusterUUID: m.InstanceUUID, ClusterName: name, NodeName: name,
		Dir: filepath.Join(t.TempDir(), "machine"), SocketDir: filepath.Join(controlplane.WorkerSocketRoot, id),
		Server: server, BindAddress: netip.MustParseAddr("127.0.0.1"), KubeletPort: port,
		PodSubnet: netip.MustParsePrefix("10.244.240.0/24"), CACert: []byte(files[k8sbm.CACertPath]),
		BootstrapKubeconfig: secret.Secret(files[k8sbm.BootstrapKubeconfigPath]), Tools: tools,
		Host: controlplane.DefaultWorkerHost()})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteWorkerFiles(); err != nil {
		t.Fatal(err)
	}
	mos := &machineOS{cp: cp, sup: controlplane.NewSupervisor(controlplane.Options{})}
	if err := mos.sup.Start(cp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mos.shutDown(t) })
	return mos
}

// shutDown stops the machine's kubelet and containerd and removes what
// they left on the host: the machine was undeployed (or the test ends).
func (o *machineOS) shutDown(t *testing.T) {
	if o.sup == nil {
		return
	}
	// As corral-node removes a kubelet worker: stop, clean what the pods
	// left outside the directory (mounts first), remove the directory.
	if err := o.sup.Stop(o.cp, false); err != nil {
		t.Errorf("stopping the machine's kubelet: %v", err)
	}
	if err := o.cp.CleanWorkerHost(15 * time.Second); err != nil {
		t.Errorf("cleaning the machine's kubelet up: %v", err)
	}
	if err := os.RemoveAll(o.cp.Worker().Dir); err != nil {
		t.Errorf("removing the machine's kubelet directory: %v", err)
	}
	o.sup = nil
}

// bootstrapCSR is the certificate request a bootstrap token's kubelet
// made: whether the controller manager approved it (and why) and signed it.
func bootstrapCSR(t *testing.T, kc string) (user, approvedBy string, signed bool) {
	t.Helper()
	out, err := kube(t, kc, "get", "csr", "-o", "json")
	if err != nil {
		t.Fatalf("get csr: %v\n%s", err, out)
	}
	var list struct {
		Items []struct {
			Spec struct {
				Username   string `json:"username"`
				SignerName string `json:"signerName"`
			} `json:"spec"`
			Status struct {
				Certificate string `json:"certificate"`
				Conditions  []struct {
					Type   string `json:"type"`
					Reason string `json:"reason"`
				} `json:"conditions"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if !strings.HasPrefix(it.Spec.Username, "system:bootstrap:") || it.Spec.SignerName != "kubernetes.io/kube-apiserver-client-kubelet" {
			continue
		}
		for _, c := range it.Status.Conditions {
			if c.Type == "Approved" {
				approvedBy = c.Reason
			}
		}
		return it.Spec.Username, approvedBy, it.Status.Certificate != ""
	}
	return "", "", false
}

// TestCOEBareMetalWorkerJoinsWithBootstrapToken: a k8s_bm cluster's worker
// group claims a fake-hardware machine of the template's flavor as
// resource class and deploys it with a config drive; the machine's
// "operating system" (this test) starts a real kubelet with the config
// drive's bootstrap kubeconfig, whose certificate request the real
// controller manager approves and signs; the node registers under the
// machine's name, Ready, and the cluster is CREATE_COMPLETE. A node group
// finding no machine fails saying how many it needs. Resizing to 0
// deletes the node and the token and gives the machine back; growing
// again redeploys it with a new token; the cluster's delete gives it back
// again.
func TestCOEBareMetalWorkerJoinsWithBootstrapToken(t *testing.T) {
	requireKubeletWorkers(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour})
	x := coeCLI{t: t, c: c}
	c.mustSucceed(
		map[string]any{"OP_ID": "OP_MACHINE_CREATE", "name": "bm-w1", "driver": "fake-hardware", "provision_state": "available", "resource_class": "k8s-worker"},
		map[string]any{"OP_ID": "OP_MACHINE_CREATE", "name": "bm-other", "driver": "fake-hardware", "provision_state": "available", "resource_class": "storage"})

	// The template and the cluster are made by the unchanged openstack
	// client, as an operator would.
	osc := newCOEClient(t, c)
	osc.must("cluster", "template", "create", "bm-t", "--coe", "kubernetes", "--server-type", "bm",
		"--image", "http://images.invalid/k8s-node.raw", "--flavor", "k8s-worker", "--external-network", "none")
	var tpl map[string]any
	x.json(&tpl, "template", "show", "bm-t")
	if tpl["driver"] != "k8s_bm" {
		t.Fatalf("template driver %v", tpl["driver"])
	}
	start := time.Now()
	osc.must("cluster", "create", "c1", "--cluster-template", "bm-t", "--node-count", "1")
	machine := bootMachine(t, c, "bm-w1", 4*time.Minute)
	t.Logf("bm-w1 active with its config drive after %v", time.Since(start).Round(100*time.Millisecond))
	cl := waitCLIStatus(t, x, "c1", "CREATE_COMPLETE", 4*time.Minute)
	t.Logf("CREATE_COMPLETE after %v", time.Since(start).Round(100*time.Millisecond))
	m := bmMachine(t, c, "bm-w1")
	if m.InstanceUUID == "" || m.InstanceInfo["image_source"] != "http://images.invalid/k8s-node.raw" {
		t.Fatalf("bm-w1 deployed without the claim or the image: %q %v", m.InstanceUUID, m.InstanceInfo["image_source"])
	}
	if other := bmMachine(t, c, "bm-other"); other.InstanceUUID != "" || other.ProvisionState != "available" {
		t.Fatalf("the machine of another resource class was taken: %q %s", other.InstanceUUID, other.ProvisionState)
	}
	dir := t.TempDir()
	x.must("cluster", "config", "c1", "--dir", dir)
	kc := filepath.Join(dir, "config")
	if nodes := waitReadyNodes(t, kc, 1, time.Minute); !slices.Equal(nodes, []string{"bm-w1"}) {
		t.Fatalf("ready nodes %v, want the machine's name", nodes)
	}
	user, approvedBy, signed := bootstrapCSR(t, kc)
	if user == "" || approvedBy != "AutoApproved" || !signed {
		t.Fatalf("the kubelet's certificate request: user %q approved %q signed %v", user, approvedBy, signed)
	}
	tokenID := strings.TrimPrefix(user, "system:bootstrap:")
	if typ, err := kube(t, kc, "-n", "kube-system", "get", "secret", "bootstrap-token-"+tokenID, "-o", "jsonpath={.type}"); err != nil || typ != "bootstrap.kubernetes.io/token" {
		t.Fatalf("token secret: %v %s", err, typ)
	}
	if lbl, _ := kube(t, kc, "get", "node", "bm-w1", "-o", "jsonpath={.metadata.labels.magnum\\.openstack\\.org/nodegroup}"); lbl != "default-worker" {
		t.Errorf("node group label %q", lbl)
	}
	if got := x.groupNodes("c1", "default-worker"); !slices.Equal(got, []string{"bm-w1"}) {
		t.Errorf("default-worker's nodes %v", got)
	}
	_ = cl
	tokenSecret := bootstrapTokenSecret(t, m)
	if out, err := c.corral("baremetal", "node", "show", "bm-w1", "-o", "json"); err != nil ||
		strings.Contains(out, tokenSecret) || !strings.Contains(out, `"configdrive": "******"`) {
		t.Errorf("baremetal node show does not mask the config drive: %v\n%s", err, out)
	}
	for _, p := range []string{c.proc("corrald").Log, c.proc("corral-node node1").Log} {
		if b, err := os.ReadFile(p); err != nil || strings.Contains(string(b), tokenSecret) {
			t.Errorf("%s holds the bootstrap token (%v)", p, err)
		}
	}

	// No machine left of the class: the group fails saying so.
	out, _ := x.run("nodegroup", "create", "c1", "extra", "--node-count", "1", "--flavor", "k8s-worker", "--wait=120")
	var g map[string]any
	x.json(&g, "nodegroup", "show", "c1", "extra")
	if reason, _ := g["status_reason"].(string); g["status"] != "CREATE_FAILED" ||
		!strings.Contains(reason, `node group extra needs 1 more bare-metal machines of resource class "k8s-worker" in state available with no instance; 0 are`) {
		t.Fatalf("extra with no machine: %v %v\n%s", g["status"], g["status_reason"], out)
	}
	x.must("nodegroup", "delete", "c1", "extra", "--wait=120")

	// Scale-in to no worker: the node and the token go, the machine is undeployed
	// and released.
	x.must("nodegroup", "update", "c1", "default-worker", "min_node_count=0", "node_count=0", "--wait=240")
	machine.shutDown(t)
	m = bmMachine(t, c, "bm-w1")
	if m.ProvisionState != "available" || m.InstanceUUID != "" || m.InstanceInfo["configdrive"] != nil {
		t.Fatalf("bm-w1 after the resize to 0: %s instance %q config drive %v", m.ProvisionState, m.InstanceUUID, m.InstanceInfo["configdrive"] != nil)
	}
	if out, err := kube(t, kc, "-n", "kube-system", "get", "secret", "bootstrap-token-"+tokenID); err == nil || !strings.Contains(out, "NotFound") {
		t.Fatalf("the token secret outlived its machine: %v %s", err, out)
	}
	if out, err := kube(t, kc, "get", "node", "bm-w1"); err == nil || !strings.Contains(out, "NotFound") {
		t.Fatalf("the node outlived its machine: %v %s", err, out)
	}

	// Growing again redeploys the machine with a new token.
	x.must("nodegroup", "update", "c1", "default-worker", "node_count=1")
	bootMachine(t, c, "bm-w1", 2*time.Minute)
	waitFor(t, 4*time.Minute, "default-worker UPDATE_COMPLETE", func() bool {
		var g map[string]any
		x.json(&g, "nodegroup", "show", "c1", "default-worker")
		if st, _ := g["status"].(string); strings.HasSuffix(st, "_FAILED") {
			t.Fatalf("default-worker: %v %v", st, g["status_reason"])
		}
		return g["status"] == "UPDATE_COMPLETE"
	})
	if nodes := waitReadyNodes(t, kc, 1, time.Minute); !slices.Equal(nodes, []string{"bm-w1"}) {
		t.Fatalf("ready nodes after growing %v", nodes)
	}
	if again := bootstrapTokenSecret(t, bmMachine(t, c, "bm-w1")); again == tokenSecret {
		t.Fatal("the redeploy reused the old token")
	}

	uuid, _ := cl["uuid"].(string)
	x.must("cluster", "delete", "c1", "--wait=240")
	m = bmMachine(t, c, "bm-w1")
	if m.ProvisionState != "available" || m.InstanceUUID != "" || m.InstanceInfo["configdrive"] != nil {
		t.Fatalf("bm-w1 after the cluster's delete: %s instance %q", m.ProvisionState, m.InstanceUUID)
	}
	checkNothingLeft(t, c, uuid)
}

// bootstrapTokenSecret is the secret half of the token in a deployed
// machine's config drive.
func bootstrapTokenSecret(t *testing.T, m *config.Machine) string {
	t.Helper()
	cd, _ := m.InstanceInfo["configdrive"].(map[string]any)
	files, err := k8sbm.ReadConfigDrive(cd)
	if err != nil {
		t.Fatal(err)
	}
	var kc struct {
		Users []struct {
			User struct {
				Token string `json:"token"`
			} `json:"user"`
		} `json:"users"`
	}
	if err := json.Unmarshal([]byte(files[k8sbm.BootstrapKubeconfigPath]), &kc); err != nil || len(kc.Users) != 1 {
		t.Fatalf("bootstrap kubeconfig: %v", err)
	}
	_, sec, ok := strings.Cut(kc.Users[0].User.Token, ".")
	if !ok || len(sec) != 16 {
		t.Fatalf("token of %s is not <id>.<secret>", m.Name)
	}
	return sec
}

// waitCLIStatus waits for a cluster's status through `corral coe`.
func waitCLIStatus(t *testing.T, x coeCLI, name, want string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var cl map[string]any
		x.json(&cl, "cluster", "show", name)
		st, _ := cl["status"].(string)
		if st == want {
			return cl
		}
		if strings.HasSuffix(st, "_FAILED") || time.Now().After(deadline) {
			t.Fatalf("cluster %s: status %s (%v), want %s", name, st, cl["status_reason"], want)
		}
		time.Sleep(time.Second)
	}
}

// TestCOEBareMetalWorkerThatNeverJoinsFailsTheCreate: a machine whose
// image never starts a kubelet is deployed, and the create fails once the
// cluster's create_timeout passed, naming the machine; deleting the failed
// cluster deletes the unused token with the control plane, undeploys the
// machine and releases it.
func TestCOEBareMetalWorkerThatNeverJoinsFailsTheCreate(t *testing.T) {
	requireK8sTools(t)
	c := newClusterWith(t, devcluster.Options{Nodes: 0, Hypervisors: []string{"fake"}, WatcherEvery: time.Hour})
	x := coeCLI{t: t, c: c}
	c.mustSucceed(map[string]any{"OP_ID": "OP_MACHINE_CREATE", "name": "bm-silent", "driver": "fake-hardware", "provision_state": "available"})
	x.must("template", "create", "bm-t", "--coe", "kubernetes", "--server-type", "bm", "--cluster-distro", "flatcar",
		"--image", "http://images.invalid/no-kubelet.raw")
	start := time.Now()
	x.must("cluster", "create", "c1", "--template", "bm-t", "--node-count", "1", "--timeout", "1")
	var cl map[string]any
	waitFor(t, 3*time.Minute, "c1 CREATE_FAILED", func() bool {
		x.json(&cl, "cluster", "show", "c1")
		return cl["status"] == "CREATE_FAILED"
	})
	reason, _ := cl["status_reason"].(string)
	if !strings.Contains(reason, "the kubelets of machines bm-silent (not registered) (node group default-worker) did not join as Ready nodes within the create_timeout of 1m0s") {
		t.Fatalf("status_reason %q", reason)
	}
	if took := time.Since(start); took < 45*time.Second {
		t.Fatalf("failed after %v, before the create_timeout", took)
	}
	if m := bmMachine(t, c, "bm-silent"); m.ProvisionState != "active" || m.InstanceUUID == "" {
		t.Fatalf("bm-silent: %s %q", m.ProvisionState, m.InstanceUUID)
	}
	x.must("cluster", "delete", "c1", "--wait=240")
	if m := bmMachine(t, c, "bm-silent"); m.ProvisionState != "available" || m.InstanceUUID != "" || m.InstanceInfo["configdrive"] != nil {
		t.Fatalf("bm-silent after the delete: %s %q", m.ProvisionState, m.InstanceUUID)
	}
	uuid, _ := cl["uuid"].(string)
	checkNothingLeft(t, c, uuid)
}
