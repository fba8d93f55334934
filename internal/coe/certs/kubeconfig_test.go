package certs

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestKubeconfigHasTheSeedShape(t *testing.T) {
	ca := mustCA(t)
	admin, err := ca.Issue(Request{CommonName: AdminUser, Organizations: []string{MastersGroup}, Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := Kubeconfig("my-k8s", "https://203.0.113.10:6443", ca.CertPEM(), admin.CertPEM, admin.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	want := `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: "` + b64(ca.CertPEM()) + `"
    server: "https://203.0.113.10:6443"
  name: "my-k8s"
users:
- name: "admin"
  user:
    client-certificate-data: "` + b64(admin.CertPEM) + `"
    client-key-data: "` + b64([]byte(admin.KeyPEM.Reveal())) + `"
contexts:
- context:
    cluster: "my-k8s"
    user: "admin"
  name: "my-k8s"
current-context: "my-k8s"
`
	if got := kc.Reveal(); got != want {
		t.Errorf("kubeconfig:\n%s\nwant:\n%s", got, want)
	}
}

// TestKubeconfigKubectlReadsIt has kubectl parse the file, including a
// cluster name YAML would misread unquoted.
func TestKubeconfigKubectlReadsIt(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	ca := mustCA(t)
	admin, err := ca.Issue(Request{CommonName: AdminUser, Organizations: []string{MastersGroup}, Usage: ClientAuth})
	if err != nil {
		t.Fatal(err)
	}
	const name = `k8s: "one" #1`
	kc, err := Kubeconfig(name, "https://[2001:db8::1]:6443", ca.CertPEM(), admin.CertPEM, admin.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(kc.Reveal()), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", path, "config", "view", "--raw", "-o", "json").Output()
	if err != nil {
		t.Fatalf("kubectl config view: %v", err)
	}
	var cfg struct {
		Clusters []struct {
			Name    string
			Cluster struct {
				Server string
				CAData string `json:"certificate-authority-data"`
			}
		}
		Users []struct {
			Name string
			User struct {
				KeyData string `json:"client-key-data"`
			}
		}
		CurrentContext string `json:"current-context"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Clusters) != 1 || cfg.Clusters[0].Name != name || cfg.Clusters[0].Cluster.Server != "https://[2001:db8::1]:6443" ||
		cfg.Clusters[0].Cluster.CAData != base64.StdEncoding.EncodeToString(ca.CertPEM()) {
		t.Errorf("kubectl read clusters %+v", cfg.Clusters)
	}
	if len(cfg.Users) != 1 || cfg.Users[0].Name != "admin" || cfg.Users[0].User.KeyData != base64.StdEncoding.EncodeToString([]byte(admin.KeyPEM.Reveal())) {
		t.Errorf("kubectl read users %+v", cfg.Users)
	}
	if cfg.CurrentContext != name {
		t.Errorf("current context %q", cfg.CurrentContext)
	}
}

func TestKubeconfigRefusesMismatchedInput(t *testing.T) {
	ca := mustCA(t)
	a, _ := ca.Issue(Request{CommonName: "a", Usage: ClientAuth})
	b, _ := ca.Issue(Request{CommonName: "b", Usage: ClientAuth})
	for _, c := range []struct {
		name, cluster, server string
		kp                    KeyPair
		want                  string
	}{
		{"key of another certificate", "c", "https://127.0.0.1:6443", KeyPair{a.CertPEM, b.KeyPEM}, "client certificate and key"},
		{"plain http", "c", "http://127.0.0.1:6443", a, "not an https URL"},
		{"no cluster name", "", "https://127.0.0.1:6443", a, "cluster name is empty"},
	} {
		_, err := Kubeconfig(c.cluster, c.server, ca.CertPEM(), c.kp.CertPEM, c.kp.KeyPEM)
		if err == nil || ecode.ClassOf(err) != ecode.Inval || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %s saying %q", c.name, err, ecode.Inval, c.want)
		}
	}
}
