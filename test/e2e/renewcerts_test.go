package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/pki"
)

// TestRenewCertificates renews every node daemon's certificate and
// corrald's own with renew-crypto on a cluster of two nodes: the nodes
// serve new certificates without a restart, and jobs keep reaching every
// node, also after a node daemon restarts on its recorded files.
func TestRenewCertificates(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}}) // node1 and node2
	nodes := []string{"node1", "node2"}
	addr := map[string]string{}
	pid := map[string]int{}
	for _, n := range nodes {
		p := c.proc("corral-node " + n)
		addr[n], pid[n] = listenAddr(p), p.PID
	}
	// served is the serial of the certificate a node presents on a new
	// connection, verified against the node's CA bundle.
	served := func(n string) string {
		t.Helper()
		caPEM, err := os.ReadFile(filepath.Join(c.dir, n, "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		conn, err := tls.Dial("tcp", addr[n], &tls.Config{RootCAs: pool, ServerName: n, MinVersion: tls.VersionTLS13})
		if err != nil {
			t.Fatalf("TLS to %s: %v", n, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	fileSerial := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		certs, err := pki.ParseCertificatesPEM(b)
		if err != nil {
			t.Fatal(err)
		}
		return certs[0].SerialNumber.String()
	}
	masterPEM := filepath.Join(c.dir, "master", "master.pem")
	jobsReachAll := func(step string) {
		t.Helper()
		t.Logf("a job on every node: %s", step)
		c.mustSucceed(map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0.01, "on_master": false, "on_nodes": nodes})
	}
	jobsReachAll("before")
	before := map[string]string{}
	for _, n := range nodes {
		before[n] = served(n)
	}
	masterBefore := fileSerial(masterPEM)

	out, err := c.corral("cluster", "renew-crypto", "--new-node-certificates", "--new-cluster-certificate", "--force")
	if err != nil {
		t.Fatalf("renew-crypto: %v\n%s", err, out)
	}
	for _, want := range []string{"Node node1 serves its new certificate", "Node node2 serves its new certificate", "corrald presents its new certificate"} {
		if !strings.Contains(out, want) {
			t.Errorf("renew-crypto output lacks %q:\n%s", want, out)
		}
	}
	for _, n := range nodes {
		now := served(n)
		if now == before[n] {
			t.Errorf("%s still serves serial %s", n, now)
		}
		if disk := fileSerial(filepath.Join(c.dir, n, "node.pem")); disk != now {
			t.Errorf("%s serves %s but node.pem holds %s", n, now, disk)
		}
		if p := c.proc("corral-node " + n); p.PID != pid[n] || gone(p.PID) {
			t.Errorf("%s's daemon was restarted or died (pid %d, was %d)", n, p.PID, pid[n])
		}
	}
	if fileSerial(masterPEM) == masterBefore {
		t.Error("master.pem was not renewed")
	}
	jobsReachAll("after renewal")

	// A restarted node daemon reads the renewed files.
	renewed := served("node2")
	c.stopDaemon("corral-node node2")
	c.startDaemon("corral-node node2")
	if got := served("node2"); got != renewed {
		t.Errorf("after a restart node2 serves %s, want %s", got, renewed)
	}
	jobsReachAll("after a node restart")
}
