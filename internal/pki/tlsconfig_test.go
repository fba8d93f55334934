package pki

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"slices"
	"testing"
	"time"
)

// handshake connects a client and a server over loopback TCP and exchanges
// one byte each way, so that a server rejecting the client's certificate
// (reported after the client's TLS 1.3 handshake completes) is seen as well.
// Kernel socket buffers keep the two sides from blocking on each other's
// alerts, as they would on an unbuffered net.Pipe.
func handshake(t *testing.T, serverCfg, clientCfg *tls.Config) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	deadline := time.Now().Add(10 * time.Second)
	serverErr := make(chan error, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			serverErr <- err
			return
		}
		defer raw.Close()
		raw.SetDeadline(deadline)
		srv := tls.Server(raw, serverCfg)
		if err := srv.Handshake(); err != nil {
			serverErr <- err
			return
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(srv, b); err != nil {
			serverErr <- err
			return
		}
		_, err = srv.Write(b)
		serverErr <- err
	}()
	clientErr := func() error {
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			return err
		}
		defer raw.Close()
		raw.SetDeadline(deadline)
		cli := tls.Client(raw, clientCfg)
		if err := cli.Handshake(); err != nil {
			return err
		}
		if _, err := cli.Write([]byte{42}); err != nil {
			return err
		}
		b := make([]byte, 1)
		if _, err := io.ReadFull(cli, b); err != nil {
			return err
		}
		if b[0] != 42 {
			return errors.New("echo mismatch")
		}
		return nil
	}()
	return errors.Join(clientErr, <-serverErr)
}

func TestTLSConfigs(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "beta")
	nodeCert, nodeKey := issue(t, ca, "node1", RoleNode)
	masterCert, masterKey := issue(t, ca, "master", RoleMaster)
	mcCert, mcKey := issue(t, ca, "mc", RoleMasterCandidate)
	peerNodeCert, peerNodeKey := issue(t, ca, "node2", RoleNode)
	foreignCert, foreignKey := issue(t, other, "node1", RoleNode)
	foreignMaster, foreignMasterKey := issue(t, other, "master", RoleMaster)
	caPEM := ca.CertPEM()
	bundle := slices.Concat(ca.CertPEM(), other.CertPEM())
	masters := []Role{RoleMaster, RoleMasterCandidate}

	tests := []struct {
		name            string
		srvCert, srvKey []byte
		srvCA           []byte
		clientRoles     []Role
		cliCert, cliKey []byte
		cliCA           []byte
		serverName      string
		serverRoles     []Role
		wantOK          bool
	}{
		{"master to node", nodeCert, nodeKey, caPEM, masters, masterCert, masterKey, caPEM, "node1", []Role{RoleNode}, true},
		{"candidate to node", nodeCert, nodeKey, caPEM, masters, mcCert, mcKey, caPEM, "node1", nil, true},
		{"server by IP SAN", nodeCert, nodeKey, caPEM, masters, masterCert, masterKey, caPEM, "127.0.0.1", nil, true},
		{"no client certificate", nodeCert, nodeKey, caPEM, masters, nil, nil, caPEM, "node1", nil, false},
		{"node role as client", nodeCert, nodeKey, caPEM, masters, peerNodeCert, peerNodeKey, caPEM, "node1", nil, false},
		{"client from another CA", nodeCert, nodeKey, caPEM, masters, foreignMaster, foreignMasterKey, caPEM, "node1", nil, false},
		{"server named otherwise", peerNodeCert, peerNodeKey, caPEM, masters, masterCert, masterKey, caPEM, "node1", nil, false},
		{"server from another CA", foreignCert, foreignKey, bundle, masters, masterCert, masterKey, caPEM, "node1", nil, false},
		{"server role not allowed", nodeCert, nodeKey, caPEM, masters, masterCert, masterKey, caPEM, "node1", masters, false},
		{"no client auth asked", masterCert, masterKey, caPEM, nil, nil, nil, caPEM, "master", masters, true},
		// Rotation: both sides trust the bundle; certificates from either CA verify.
		{"bundle: new server, old client", foreignCert, foreignKey, bundle, masters, masterCert, masterKey, bundle, "node1", nil, true},
		{"bundle: old server, new client", nodeCert, nodeKey, bundle, masters, foreignMaster, foreignMasterKey, bundle, "node1", nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srvCfg, err := ServerTLSConfig(tc.srvCert, tc.srvKey, tc.srvCA, tc.clientRoles...)
			if err != nil {
				t.Fatal(err)
			}
			cliCfg, err := ClientTLSConfig(tc.cliCert, tc.cliKey, tc.cliCA, tc.serverName, tc.serverRoles...)
			if err != nil {
				t.Fatal(err)
			}
			if cliCfg.InsecureSkipVerify {
				t.Fatal("client config skips verification")
			}
			err = handshake(t, srvCfg, cliCfg)
			if tc.wantOK && err != nil {
				t.Fatalf("handshake failed: %v", err)
			}
			if !tc.wantOK && err == nil {
				t.Fatal("handshake succeeded, want refusal")
			}
		})
	}
}

func TestServerSendsIssuingCA(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "beta")
	certPEM, keyPEM := issue(t, ca, "master", RoleMaster)
	cfg, err := ServerTLSConfig(certPEM, keyPEM, slices.Concat(other.CertPEM(), ca.CertPEM()))
	if err != nil {
		t.Fatal(err)
	}
	chain := cfg.Certificates[0].Certificate
	if len(chain) != 2 || string(chain[1]) != string(ca.Certificate().Raw) {
		t.Fatalf("chain has %d certificates; want the leaf and its CA", len(chain))
	}
}

func TestPinnedClientTLSConfig(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "beta")
	pin, _ := CAFingerprint(ca.CertPEM())
	otherPin, _ := CAFingerprint(other.CertPEM())
	masterCert, masterKey := issue(t, ca, "master", RoleMaster)
	nodeCert, nodeKey := issue(t, ca, "node1", RoleNode)
	// A server of another CA that also sends the pinned CA in its chain
	// must not pass: its leaf does not verify against the pinned CA.
	impostorCert, impostorKey := issue(t, other, "master", RoleMaster)
	impostorChain := slices.Concat(impostorCert, ca.CertPEM())

	tests := []struct {
		name            string
		srvCert, srvKey []byte
		srvCA           []byte
		pin             string
		wantOK          bool
	}{
		{"good pin", masterCert, masterKey, ca.CertPEM(), pin, true},
		{"wrong pin", masterCert, masterKey, ca.CertPEM(), otherPin, false},
		{"garbage pin", masterCert, masterKey, ca.CertPEM(), "00", false},
		{"node role", nodeCert, nodeKey, ca.CertPEM(), pin, false},
		{"impostor with pinned CA in chain", impostorChain, impostorKey, other.CertPEM(), pin, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srvCfg, err := ServerTLSConfig(tc.srvCert, tc.srvKey, tc.srvCA)
			if err != nil {
				t.Fatal(err)
			}
			var got []byte
			cliCfg := PinnedClientTLSConfig(tc.pin, func(caPEM []byte) { got = caPEM })
			err = handshake(t, srvCfg, cliCfg)
			if tc.wantOK {
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				if string(got) != string(ca.CertPEM()) {
					t.Fatal("callback did not receive the pinned CA")
				}
				return
			}
			if err == nil {
				t.Fatal("handshake succeeded, want refusal")
			}
			if got != nil {
				t.Fatal("callback ran for a refused server")
			}
		})
	}
}

func TestClientTLSConfigRejects(t *testing.T) {
	ca := newTestCA(t, "alpha")
	certPEM, keyPEM := issue(t, ca, "n1", RoleNode)
	if _, err := ClientTLSConfig(nil, nil, ca.CertPEM(), ""); err == nil {
		t.Error("empty server name accepted")
	}
	if _, err := ClientTLSConfig(certPEM, nil, ca.CertPEM(), "n1"); err == nil {
		t.Error("certificate without key accepted")
	}
	if _, err := ClientTLSConfig(nil, nil, certPEM, "n1"); err == nil {
		t.Error("leaf accepted as CA")
	}
	if _, err := ServerTLSConfig(certPEM, keyPEM, []byte("x")); err == nil {
		t.Error("server config without CA accepted")
	}
}
