package cmdlib

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// certNode is one node daemon's certificate state in certDouble.
type certNode struct {
	cert   string        // PEM served now
	staged crypto.Signer // key made for a renewal
}

// certDouble adds the certificate RPCs to nodeDouble and is the master's
// ClusterCerts too. On every install it checks what the real node checks
// (the certificate verifies against the CA the master trusts and fits the
// staged key), and records a violation when a node would serve a
// certificate the master could not verify.
type certDouble struct {
	*nodeDouble
	ca         *pki.CA
	mu         sync.Mutex
	nodes      map[string]*certNode
	order      []string // "node method" of the certificate RPCs, and "master renew"
	violations []string
	failCSR    map[string]bool
	masterCert string
}

func newCertDouble(t *testing.T) *certDouble {
	ca, err := pki.NewCA("c1", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &certDouble{nodeDouble: newNodeDouble(), ca: ca, nodes: map[string]*certNode{}, failCSR: map[string]bool{}}
}

// enroll gives node a first certificate of role.
func (d *certDouble) enroll(t *testing.T, name, ip string, role pki.Role) {
	_, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := d.ca.Issue(pki.IssueRequest{CommonName: name, Role: role, PublicKey: key.Public(), IPs: []net.IP{net.ParseIP(ip)}})
	if err != nil {
		t.Fatal(err)
	}
	d.nodes[name] = &certNode{cert: string(cert)}
}

func (d *certDouble) SignNodeCert(csrPEM []byte, role pki.Role, name string, ips []net.IP) ([]byte, error) {
	return d.ca.SignCSR(csrPEM, role, name, ips, 0)
}

func (d *certDouble) RenewMasterCert(ctx context.Context) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.order = append(d.order, "master renew")
	d.masterCert = "renewed"
	return "42", nil
}

func (d *certDouble) Call(ctx context.Context, node *config.Node, method, opID string, args, reply any) error {
	d.mu.Lock()
	out, handled, err := d.certs(node.Name, method, args)
	if method == nodeapi.Version && d.masterCert != "" {
		d.order = append(d.order, node.Name+" "+method)
	}
	d.mu.Unlock()
	if !handled {
		return d.nodeDouble.Call(ctx, node, method, opID, args, reply)
	}
	if err != nil {
		return err
	}
	b, _ := json.Marshal(out)
	return json.Unmarshal(b, reply)
}

func (d *certDouble) certs(name, method string, args any) (any, bool, error) {
	n := d.nodes[name]
	switch method {
	case nodeapi.NodeCertCSR:
		d.order = append(d.order, name+" csr")
		if d.failCSR[name] {
			return nil, true, fmt.Errorf("disk full")
		}
		if n.staged == nil {
			_, k, err := pki.NewKeyPair()
			if err != nil {
				return nil, true, err
			}
			n.staged = k
		}
		csr, err := pki.NewCSR(n.staged, name)
		if err != nil {
			return nil, true, err
		}
		return nodeapi.NodeCertCSRReply{CSR: string(csr), Current: n.cert}, true, nil
	case nodeapi.NodeCertInstall:
		d.order = append(d.order, name+" install")
		a := args.(nodeapi.NodeCertInstallArgs)
		certs, err := pki.ParseCertificatesPEM([]byte(a.Cert))
		if err != nil {
			return nil, true, err
		}
		pool := x509.NewCertPool()
		pool.AddCert(d.ca.Certificate())
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool}); err != nil {
			d.violations = append(d.violations, name+" was sent a certificate the master cannot verify")
		}
		if n.staged == nil || !n.staged.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(certs[0].PublicKey) {
			d.violations = append(d.violations, name+" was sent a certificate for another key")
		}
		n.cert, n.staged = a.Cert, nil
		return nodeapi.NodeCertInstallReply{Serial: certs[0].SerialNumber.String(), Installed: true}, true, nil
	}
	return nil, false, nil
}

func (d *certDouble) leaf(t *testing.T, name string) *x509.Certificate {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	c, err := pki.ParseCertificatesPEM([]byte(d.nodes[name].cert))
	if err != nil {
		t.Fatal(err)
	}
	return c[0]
}

func TestRenewNodeAndClusterCertificates(t *testing.T) {
	d := newCertDouble(t)
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), d.nodeDouble, true)
	defer e.close()
	e.proc.RPC = d
	ok := func(op map[string]any) {
		t.Helper()
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op, st, res)
		}
	}
	ok(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"})
	ok(map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n3", "primary_ip": "127.0.0.4"})
	ok(map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n3", "offline": true, "force": true})

	// Without a CA the master refuses before doing anything.
	if st, _ := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "node_certificates": true}); st != "error" {
		t.Fatal("renewed node certificates without a CA")
	}
	e.proc.Certs = d
	d.enroll(t, "n1", "127.0.0.2", pki.RoleNode)
	d.enroll(t, "n2", "127.0.0.3", pki.RoleNode)
	d.enroll(t, "n3", "127.0.0.4", pki.RoleNode)
	before := map[string]*x509.Certificate{}
	for _, n := range []string{"n1", "n2", "n3"} {
		before[n] = d.leaf(t, n)
	}

	ok(map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "node_certificates": true, "new_cluster_certificate": true})
	d.mu.Lock()
	order := slices.Clone(d.order)
	violations := slices.Clone(d.violations)
	d.mu.Unlock()
	want := []string{"n1 csr", "n2 csr", "n1 install", "n2 install", "master renew", "n1 version", "n2 version"}
	if !slices.Equal(order, want) {
		t.Fatalf("calls %v, want %v", order, want)
	}
	if len(violations) > 0 {
		t.Fatalf("the master could have lost access: %v", violations)
	}
	for _, n := range []string{"n1", "n2"} {
		got := d.leaf(t, n)
		if got.SerialNumber.Cmp(before[n].SerialNumber) == 0 {
			t.Errorf("%s kept its certificate", n)
		}
		wantRole, _ := pki.RoleOf(before[n])
		if role, _ := pki.RoleOf(got); role != wantRole || got.Subject.CommonName != n ||
			!slices.EqualFunc(got.IPAddresses, before[n].IPAddresses, net.IP.Equal) {
			t.Errorf("%s renewed as %s/%s/%v, want %s/%s/%v", n, got.Subject.CommonName, role, got.IPAddresses,
				n, wantRole, before[n].IPAddresses)
		}
	}
	if d.leaf(t, "n3").SerialNumber.Cmp(before["n3"].SerialNumber) != 0 {
		t.Error("the offline node was renewed")
	}

	// A node that cannot make a key keeps its certificate; the others
	// are renewed and the job still succeeds.
	d.mu.Lock()
	d.order, d.failCSR["n2"] = nil, true
	d.mu.Unlock()
	n2 := d.leaf(t, "n2")
	st, res := e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "node_certificates": true})
	if st != "success" {
		t.Fatalf("renewal with one failing node: %s %v", st, res)
	}
	if d.leaf(t, "n2").SerialNumber.Cmp(n2.SerialNumber) != 0 {
		t.Error("n2 changed certificate though it made no key")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if strings.Join(d.order, ",") != "n1 csr,n2 csr,n1 install" {
		t.Errorf("calls %v", d.order)
	}
	// The master node's failure stops the job before any install.
	d.order, d.failCSR["n1"] = nil, true
	d.mu.Unlock()
	st, _ = e.run(t, map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "node_certificates": true})
	d.mu.Lock()
	if st != "error" || slices.ContainsFunc(d.order, func(s string) bool { return strings.HasSuffix(s, "install") }) {
		t.Errorf("master failing: %s, calls %v", st, d.order)
	}
}
