package controlplane

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/coe/certs"
)

// fakeKubelet serves a pod's log as a kubelet does, with a serving
// certificate for 127.0.0.1 from ca.
func fakeKubelet(t *testing.T, ca *certs.CA, node string) *httptest.Server {
	t.Helper()
	kp, err := ca.IssueKubeletServing(node, []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(kp.CertPEM, []byte(kp.KeyPEM.Reveal()))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/containerLogs/") {
			fmt.Fprintf(w, "log line of %s\n", node)
			return
		}
		http.NotFound(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// checkKubeletServingVerified shows the API server verifying a kubelet's
// serving certificate against the cluster CA: a pod's log comes from a
// kubelet whose certificate the cluster CA signed, and a kubelet with a
// certificate of another CA (for the same name and address) is refused.
func checkKubeletServingVerified(t *testing.T, kubectlBin string, c *realCluster) {
	t.Helper()
	foreign, err := certs.NewCA("elsewhere", certs.ECDSAP384)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		node string
		ca   *certs.CA
		ok   bool
	}{{"kubelet-own-ca", c.bundle.CA, true}, {"kubelet-foreign-ca", foreign, false}} {
		srv := fakeKubelet(t, k.ca, k.node)
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		manifest := filepath.Join(filepath.Dir(c.kc), k.node+".yaml")
		if err := os.WriteFile(manifest, []byte(fmt.Sprintf(`apiVersion: v1
kind: Node
metadata: {name: %[1]s}
---
apiVersion: v1
kind: Pod
metadata: {name: %[1]s-pod, namespace: default}
spec:
  nodeName: %[1]s
  containers: [{name: c, image: none}]
`, k.node)), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl(t, kubectlBin, c.kc, "apply", "-f", manifest); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		status := fmt.Sprintf(`{"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}], "daemonEndpoints": {"kubeletEndpoint": {"Port": %d}}}}`, port)
		if out, err := kubectl(t, kubectlBin, c.kc, "patch", "node", k.node, "--subresource=status", "--type=merge", "-p", status); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		logs, err := kubectl(t, kubectlBin, c.kc, "get", "--raw", "/api/v1/namespaces/default/pods/"+k.node+"-pod/log")
		switch {
		case k.ok && (err != nil || logs != "log line of "+k.node+"\n"):
			t.Fatalf("the log from a kubelet of the cluster CA: %v %q", err, logs)
		case !k.ok && (err == nil || !strings.Contains(err.Error(), "x509")):
			t.Fatalf("the log from a kubelet of another CA was taken: %v %q", err, logs)
		}
		if out, err := kubectl(t, kubectlBin, c.kc, "delete", "--wait=false", "-f", manifest); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}
