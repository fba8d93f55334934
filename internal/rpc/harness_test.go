package rpc

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

// testCA is a cluster CA with helpers to issue credentials.
type testCA struct {
	ca    *pki.CA
	caPEM []byte
}

func newTestCA(t testing.TB, cluster string) *testCA {
	t.Helper()
	ca, err := pki.NewCA(cluster, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{ca: ca, caPEM: ca.CertPEM()}
}

func (c *testCA) issue(t testing.TB, name string, role pki.Role) (certPEM, keyPEM []byte) {
	t.Helper()
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err = c.ca.Issue(pki.IssueRequest{CommonName: name, Role: role, PublicKey: key.Public(), IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// testServer is a node RPC server on a loopback port.
type testServer struct {
	*Server
	addr string
	stop func()
}

// startServer serves s until the test ends (or stop is called).
func startServer(t testing.TB, s *Server) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	var once atomic.Bool
	stop := func() {
		if once.Swap(true) {
			return
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}
	t.Cleanup(stop)
	return &testServer{Server: s, addr: ln.Addr().String(), stop: stop}
}

// newNodeServer makes a server for node name with credentials from ca and
// state in dir.
func newNodeServer(t testing.TB, ca *testCA, name, dir string) *Server {
	t.Helper()
	cert, key := ca.issue(t, name, pki.RoleNode)
	s, err := NewServer(ServerOptions{CertPEM: cert, KeyPEM: key, CAPEM: ca.caPEM, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newMasterClient makes a client with a master certificate whose epoch is
// read from epoch, holding the CA's grant for epoch's current value (a
// later epoch needs grantEpoch).
func newMasterClient(t testing.TB, ca *testCA, epoch *atomic.Int64) *Client {
	t.Helper()
	cert, key := ca.issue(t, "master", pki.RoleMaster)
	c := newClient(t, cert, key, ca.caPEM, epoch)
	grantEpoch(t, ca, c, epoch, epoch.Load())
	return c
}

// grantEpoch sets epoch to n and gives c the CA's grant for it, as corrald
// does when it takes over.
func grantEpoch(t testing.TB, ca *testCA, c *Client, epoch *atomic.Int64, n int64) {
	t.Helper()
	g, err := ca.ca.SignEpochGrant(pki.EpochGrant{Epoch: n, Master: "master", Issued: time.Now().Unix()})
	if err != nil {
		t.Fatal(err)
	}
	epoch.Store(n)
	c.SetEpochGrant(n, g)
}

func newClient(t testing.TB, cert, key, caPEM []byte, epoch *atomic.Int64) *Client {
	t.Helper()
	c, err := NewClient(cert, key, caPEM, epoch.Load, ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func epochOf(n int64) *atomic.Int64 {
	var e atomic.Int64
	e.Store(n)
	return &e
}

// mustBeUnreachable asserts that err is an unreachable-node error.
func mustBeUnreachable(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("call succeeded, want refusal")
	}
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("err = %v, want ErrUnreachable", err)
	}
}
