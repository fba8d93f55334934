package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

func serialOf(t *testing.T, certPEM []byte) string {
	t.Helper()
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0].SerialNumber.String()
}

// TestServerSwitchesCertificate renews a node's serving certificate while a
// connection is open: that connection keeps serving calls, and connections
// opened afterwards see the new certificate.
func TestServerSwitchesCertificate(t *testing.T) {
	ca := newTestCA(t, "alpha")
	oldCert, oldKey := ca.issue(t, "node1", pki.RoleNode)
	s, err := NewServer(ServerOptions{CertPEM: oldCert, KeyPEM: oldKey, CAPEM: ca.caPEM, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	countingEcho(s)
	srv := startServer(t, s)

	mCert, mKey := ca.issue(t, "master", pki.RoleMaster)
	cfg, err := pki.ClientTLSConfig(mCert, mKey, ca.caPEM, "node1")
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	tr := &http.Transport{
		TLSClientConfig: cfg,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		MaxConnsPerHost: 1,
	}
	defer tr.CloseIdleConnections()
	call := func() string {
		t.Helper()
		body, _ := json.Marshal(echoArgs{"hi"})
		req, _ := http.NewRequest(http.MethodPost, "https://"+srv.addr+PathPrefix+"echo", bytes.NewReader(body))
		req.Header.Set(HeaderEpoch, "0") // the node's epoch: no grant needed
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env envelope
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || !env.OK {
			t.Fatalf("answer %d %+v (%v)", resp.StatusCode, env, err)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	if got := call(); got != serialOf(t, oldCert) {
		t.Fatalf("served serial %s, want the first certificate's", got)
	}

	newCert, newKey := ca.issue(t, "node1", pki.RoleNode)
	if err := s.SetCredentials(newCert, newKey, ca.caPEM); err != nil {
		t.Fatal(err)
	}
	// The open connection still answers, with the certificate it started with.
	if got := call(); got != serialOf(t, oldCert) {
		t.Fatalf("open connection now reports serial %s", got)
	}
	if dials.Load() != 1 {
		t.Fatalf("%d dials: the open connection was not reused", dials.Load())
	}
	conn, err := tls.Dial("tcp", srv.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	conn.Close()
	if got != serialOf(t, newCert) {
		t.Fatalf("a new connection sees serial %s, want the renewed certificate's %s", got, serialOf(t, newCert))
	}
	c := newMasterClient(t, ca, epochOf(1))
	if err := c.Call(context.Background(), "node1", srv.addr, "echo", "", echoArgs{"x"}, nil); err != nil {
		t.Fatalf("call after the switch: %v", err)
	}

	// A pair that does not match is refused and the current one stays.
	if err := s.SetCredentials(newCert, oldKey, ca.caPEM); err == nil {
		t.Fatal("a certificate with another key was accepted")
	}
	conn, err = tls.Dial("tcp", srv.addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := conn.ConnectionState().PeerCertificates[0].SerialNumber.String(); got != serialOf(t, newCert) {
		t.Fatalf("after a refused switch the server serves %s", got)
	}
}

// TestClientSwitchesCertificate replaces the master's client certificate:
// a call in flight finishes, and the next connection presents the new one
// (proved by switching to a certificate the node refuses, then back).
func TestClientSwitchesCertificate(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	countingEcho(s)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	s.Handle("slow", func(ctx context.Context, _ json.RawMessage) (any, error) {
		entered <- struct{}{}
		<-release
		return "done", nil
	})
	srv := startServer(t, s)
	c := newMasterClient(t, ca, epochOf(1))
	first := c.Certificate()

	slow := make(chan error, 1)
	go func() {
		var r string
		slow <- c.Call(context.Background(), "node1", srv.addr, "slow", "", nil, &r)
	}()
	<-entered

	badCert, badKey := other.issue(t, "master", pki.RoleMaster)
	if err := c.SetCertificate(badCert, badKey); err != nil {
		t.Fatal(err)
	}
	if c.Certificate() == first {
		t.Fatal("Certificate still returns the first one")
	}
	close(release)
	if err := <-slow; err != nil {
		t.Fatalf("the call in flight failed after the switch: %v", err)
	}
	// The node does not trust the other CA: a new connection must fail,
	// which shows the new certificate is presented.
	mustBeUnreachable(t, c.Call(context.Background(), "node1", srv.addr, "echo", "", echoArgs{"a"}, nil))

	goodCert, goodKey := ca.issue(t, "master", pki.RoleMaster)
	if err := c.SetCertificate(goodCert, goodKey); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(context.Background(), "node1", srv.addr, "echo", "", echoArgs{"b"}, nil); err != nil {
		t.Fatalf("call with the renewed certificate: %v", err)
	}
	if err := c.SetCertificate(goodCert, badKey); err == nil {
		t.Fatal("a certificate with another key was accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Close()
	if err := c.Call(ctx, "node1", srv.addr, "echo", "", echoArgs{"c"}, nil); err != nil {
		t.Fatalf("a refused switch broke the client: %v", err)
	}
}
