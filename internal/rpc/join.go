package rpc

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// JoinValidator checks and consumes a one-time join token for node and
// returns the addresses to certify besides the name. The master implements
// it against its store; its errors are ecode errors and reach the node.
type JoinValidator func(ctx context.Context, tokenID string, tokenSecret secret.Secret, node string) (ips []net.IP, err error)

// joinRequest is the body of POST /join/v1. The secret is a plain string on
// the wire; it becomes a secret.Secret as soon as it is read.
type joinRequest struct {
	TokenID     string `json:"token_id"`
	TokenSecret string `json:"token_secret"`
	Node        string `json:"node"`
	CSR         string `json:"csr"`
}

type joinResponse struct {
	Cert string `json:"cert"`
	CA   string `json:"ca"`
}

const maxJoinBody = 64 << 10

// Names of the files Join writes in the node's state directory.
const (
	NodeCertFile = "node.pem"
	NodeKeyFile  = "node.key"
	CAFile       = "ca.pem"
)

// JoinHandler serves POST /join/v1 on the master's join listener (TLS with
// the master certificate, no client certificate). It signs the node's CSR
// with role "node" and the name from the request, once validate has
// accepted the token.
func JoinHandler(ca *pki.CA, validate JoinValidator, logger *slog.Logger) http.Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != JoinPath {
			writeFailure(w, http.StatusNotFound, ecode.Errorf(ecode.NoEnt, "no such path %q", truncate(r.URL.Path, 80)))
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeFailure(w, http.StatusMethodNotAllowed, ecode.Errorf(ecode.Inval, "join needs POST"))
			return
		}
		req, csr, err := readJoinRequest(w, r)
		if err != nil {
			logger.Warn("join request refused", "remote", r.RemoteAddr, "err", err)
			writeFailure(w, errorStatus(err), err)
			return
		}
		log := logger.With("node", req.Node, "token", req.TokenID, "remote", r.RemoteAddr)
		ips, err := validate(r.Context(), req.TokenID, secret.Secret(req.TokenSecret), req.Node)
		if err != nil {
			log.Warn("join refused", "class", ecode.ClassOf(err), "err", err)
			writeFailure(w, errorStatus(err), err)
			return
		}
		certPEM, err := ca.SignCSR(csr, pki.RoleNode, req.Node, ips, pki.DefaultCertValidity)
		if err != nil {
			log.Error("join: signing failed", "err", err)
			writeFailure(w, http.StatusInternalServerError, ecode.New(ecode.RemoteError, ecode.Fault, "cannot sign node certificate"))
			return
		}
		b, _ := json.Marshal(joinResponse{Cert: string(certPEM), CA: string(ca.CertPEM())})
		log.Info("node joined")
		writeRaw(w, http.StatusOK, b)
	})
}

// readJoinRequest decodes and checks the request, including the CSR's
// signature, before the token is consumed: a malformed request must not burn
// a one-time token.
func readJoinRequest(w http.ResponseWriter, r *http.Request) (joinRequest, []byte, error) {
	var req joinRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJoinBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, nil, ecode.Errorf(ecode.Inval, "malformed join request")
	}
	if req.TokenID == "" || req.TokenSecret == "" || req.CSR == "" {
		return req, nil, ecode.Errorf(ecode.Inval, "join request lacks token_id, token_secret or csr")
	}
	if !pki.ValidNodeName(req.Node) {
		return req, nil, ecode.Errorf(ecode.Inval, "join request node name %q is not a valid host name", truncate(req.Node, 64))
	}
	block, _ := pem.Decode([]byte(req.CSR))
	if block == nil || block.Type != "CERTIFICATE REQUEST" {
		return req, nil, ecode.Errorf(ecode.Inval, "join request csr is not a PEM certificate request")
	}
	csr, err := x509.ParseCertificateRequest(block.Bytes)
	if err == nil {
		err = csr.CheckSignature()
	}
	if err != nil {
		return req, nil, ecode.Errorf(ecode.Inval, "join request csr is invalid: %v", err)
	}
	return req, []byte(req.CSR), nil
}

// Join is the node side: it makes the node's key (which never leaves the
// node), asks the master named in the token for a certificate over a
// connection verified by the token's CA pin, checks the answer, and writes
// node.pem, node.key (0600) and ca.pem into stateDir.
func Join(ctx context.Context, token pki.JoinToken, stateDir string) (certPath, keyPath, caPath string, err error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", "", "", fmt.Errorf("rpc: join: %w", err)
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return "", "", "", err
	}
	csr, err := pki.NewCSR(key, token.Node)
	if err != nil {
		return "", "", "", err
	}
	body, _ := json.Marshal(joinRequest{
		TokenID: token.ID, TokenSecret: token.Secret.Reveal(), Node: token.Node, CSR: string(csr),
	})

	// The callback runs in the transport's dialing goroutine.
	var pinned struct {
		sync.Mutex
		ca []byte
	}
	tr := &http.Transport{
		TLSClientConfig: pki.PinnedClientTLSConfig(token.CASHA256, func(caPEM []byte) {
			pinned.Lock()
			pinned.ca = caPEM
			pinned.Unlock()
		}),
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableKeepAlives:   true,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+token.Master+JoinPath, bytes.NewReader(body))
	if err != nil {
		return "", "", "", ecode.Errorf(ecode.Inval, "join: bad master address %q", token.Master)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", "", "", &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Environ,
			Msg: fmt.Sprintf("join: master %s unreachable: %v", token.Master, err), Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", "", "", &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Environ,
			Msg: fmt.Sprintf("join: reading answer of %s: %v", token.Master, err), Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
	}
	if resp.StatusCode != http.StatusOK {
		if err := decodeResponse(resp.StatusCode, data, nil); err != nil {
			return "", "", "", err
		}
		return "", "", "", protocolError("join: master answered HTTP %d", resp.StatusCode)
	}
	var jr joinResponse
	if err := json.Unmarshal(data, &jr); err != nil {
		return "", "", "", protocolError("join: master's answer is not JSON")
	}
	pinned.Lock()
	pinnedCA := pinned.ca
	pinned.Unlock()
	if err := checkJoinAnswer(jr, pinnedCA, key.Public(), token.Node); err != nil {
		return "", "", "", err
	}
	certPath = filepath.Join(stateDir, NodeCertFile)
	keyPath = filepath.Join(stateDir, NodeKeyFile)
	caPath = filepath.Join(stateDir, CAFile)
	if err := atomicfile.WriteFile(caPath, []byte(jr.CA), 0o644); err != nil {
		return "", "", "", fmt.Errorf("rpc: join: write CA: %w", err)
	}
	if err := pki.WriteKeyPair(certPath, keyPath, []byte(jr.Cert), keyPEM); err != nil {
		return "", "", "", fmt.Errorf("rpc: join: %w", err)
	}
	return certPath, keyPath, caPath, nil
}

// checkJoinAnswer makes sure the master's answer is what was asked for: a
// node certificate for our key and name, and a CA bundle that contains the
// pinned CA and verifies that certificate.
func checkJoinAnswer(jr joinResponse, pinnedCA []byte, pub crypto.PublicKey, node string) error {
	bad := func(format string, args ...any) error {
		return protocolError("join: "+format, args...)
	}
	if pinnedCA == nil {
		return bad("no pinned CA was seen")
	}
	pool, cas, err := pki.CAPool([]byte(jr.CA))
	if err != nil {
		return bad("CA bundle: %v", err)
	}
	pin, _ := pki.CAFingerprint(pinnedCA)
	found := slices.ContainsFunc(cas, func(c *x509.Certificate) bool {
		fp, _ := pki.CAFingerprint(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
		return fp == pin
	})
	if !found {
		return bad("CA bundle does not contain the pinned CA")
	}
	certs, err := pki.ParseCertificatesPEM([]byte(jr.Cert))
	if err != nil {
		return bad("certificate: %v", err)
	}
	cert := certs[0]
	if k, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !k.Equal(pub) {
		return bad("certificate is not for this node's key")
	}
	if role, _ := pki.RoleOf(cert); role != pki.RoleNode || cert.Subject.CommonName != node {
		return bad("certificate is for %q with role %q, not node %q", cert.Subject.CommonName, role, node)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return bad("certificate does not verify against the CA bundle: %v", err)
	}
	return nil
}
