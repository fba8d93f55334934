package controlplane

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/secret"
)

// TestTLSBootstrapFlagsAndFiles: TLSBootstrap adds kubeadm's flags to the
// API server and the controller manager and writes the CA key for the
// signer; without it neither the flags nor the key are there.
func TestTLSBootstrapFlagsAndFiles(t *testing.T) {
	base := baseDir(t)
	tools := fakeToolsDir(t, base)
	plain, err := New(testSpec(t, base, "plain", tools))
	if err != nil {
		t.Fatal(err)
	}
	spec := testSpec(t, base, "boot", tools)
	spec.TLSBootstrap = true
	if _, err := New(spec); err != nil {
		t.Fatal(err)
	}
	cp, _ := New(spec)
	if err := cp.WriteFiles(); err == nil || !strings.Contains(err.Error(), "no CA key") {
		t.Fatalf("WriteFiles without the CA key: %v", err)
	}
	spec.ClusterSigningKey = spec.Certs.CA.KeyPEM()
	if spec.ClusterSigningKey == "" {
		t.Fatal("the test bundle's CA has no key")
	}
	cp, err = New(spec)
	if err != nil {
		t.Fatal(err)
	}
	cm := argsOf(cp, ControllerManager)
	for _, want := range []string{"--controllers=*,bootstrapsigner,tokencleaner",
		"--cluster-signing-cert-file=" + cp.PKIPath("ca.crt"), "--cluster-signing-key-file=" + cp.PKIPath("ca.key")} {
		if !slices.Contains(cm, want) {
			t.Errorf("controller manager lacks %s: %v", want, cm)
		}
		if slices.Contains(argsOf(plain, ControllerManager), want) {
			t.Errorf("a plain control plane's controller manager has %s", want)
		}
	}
	if !slices.Contains(argsOf(cp, APIServer), "--enable-bootstrap-token-auth=true") ||
		slices.Contains(argsOf(plain, APIServer), "--enable-bootstrap-token-auth=true") {
		t.Errorf("--enable-bootstrap-token-auth: %v / %v", argsOf(cp, APIServer), argsOf(plain, APIServer))
	}
	if err := cp.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cp.PKIPath("ca.key"))
	if err != nil || string(b) != spec.ClusterSigningKey.Reveal() {
		t.Fatalf("ca.key: %v", err)
	}
	if fi, _ := os.Stat(cp.PKIPath("ca.key")); fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key mode %v", fi.Mode())
	}
	if err := plain.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(plain.PKIPath("ca.key")); !os.IsNotExist(err) {
		t.Errorf("a plain control plane has the CA key: %v", err)
	}
}

// TestWorkerWithBootstrapKubeconfig: a worker joining with a bootstrap
// kubeconfig gets --bootstrap-kubeconfig, no client certificate or
// kubeconfig of its own (the kubelet writes them), and no serving pair
// when none is given.
func TestWorkerWithBootstrapKubeconfig(t *testing.T) {
	base := baseDir(t)
	spec := testWorkerSpec(t, base, fakeToolsDir(t, base))
	spec.Client, spec.Serving = certs.KeyPair{}, certs.KeyPair{}
	spec.BootstrapKubeconfig = secret.Secret("apiVersion: v1\nkind: Config\n")
	cp, err := NewWorker(spec)
	if err != nil {
		t.Fatal(err)
	}
	args := argsOf(cp, Kubelet)
	if !slices.Contains(args, "--bootstrap-kubeconfig="+cp.BootstrapKubeconfigPath()) ||
		!slices.Contains(args, "--kubeconfig="+cp.KubeconfigPath(Kubelet)) {
		t.Errorf("kubelet args %v", args)
	}
	files, err := cp.workerFiles()
	if err != nil {
		t.Fatal(err)
	}
	if files[cp.BootstrapKubeconfigPath()] != spec.BootstrapKubeconfig {
		t.Errorf("bootstrap kubeconfig not written")
	}
	for _, p := range []string{cp.KubeconfigPath(Kubelet), cp.PKIPath("kubelet-client.key"), cp.PKIPath("kubelet.key")} {
		if _, ok := files[p]; ok {
			t.Errorf("%s is written for a bootstrapping kubelet", filepath.Base(p))
		}
	}
	if strings.Contains(cp.kubeletConfig(), "tlsCertFile") {
		t.Errorf("kubelet config names a serving certificate it was not given")
	}
}
