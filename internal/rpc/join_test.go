package rpc

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// tokenBook is the master's side of join tokens in these tests: hashes only,
// one use each.
type tokenBook struct {
	mu      sync.Mutex
	tokens  map[string]bookEntry
	checked int
}

type bookEntry struct {
	hash    string
	node    string
	expires time.Time
	used    bool
}

func (b *tokenBook) add(tok pki.JoinToken) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.tokens[tok.ID] = bookEntry{hash: pki.HashTokenSecret(tok.Secret), node: tok.Node, expires: tok.Expires}
}

func (b *tokenBook) validate(ctx context.Context, id string, sec secret.Secret, node string) ([]net.IP, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.checked++
	e, ok := b.tokens[id]
	switch {
	case !ok || !pki.TokenSecretMatches(e.hash, sec):
		return nil, ecode.New(ecode.PermissionDenied, ecode.Inval, "unknown join token")
	case e.used:
		return nil, ecode.Errorf(ecode.State, "join token %s was already used", id)
	case time.Now().After(e.expires):
		return nil, ecode.Errorf(ecode.State, "join token %s has expired", id)
	case e.node != node:
		return nil, ecode.Errorf(ecode.Inval, "join token %s is not for node %s", id, node)
	}
	e.used = true
	b.tokens[id] = e
	return []net.IP{net.ParseIP("192.0.2.10")}, nil
}

func (b *tokenBook) checks() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.checked
}

// startJoinListener runs the master's join endpoint with a master
// certificate and returns its address.
func startJoinListener(t *testing.T, ca *testCA, book *tokenBook) string {
	t.Helper()
	cert, key := ca.issue(t, "master", pki.RoleMaster)
	cfg, err := pki.ServerTLSConfig(cert, key, ca.caPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: JoinHandler(ca.ca, book.validate, nil), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(tls.NewListener(ln, cfg))
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String()
}

func TestJoin(t *testing.T) {
	ca := newTestCA(t, "alpha")
	book := &tokenBook{tokens: map[string]bookEntry{}}
	addr := startJoinListener(t, ca, book)
	pin, _ := pki.CAFingerprint(ca.caPEM)
	tok, err := pki.NewJoinToken(addr, pin, "node5", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	book.add(tok)
	// The token goes through its text form, as an operator would pass it.
	parsed, err := pki.ParseJoinToken(tok.Encode())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "state")
	certPath, keyPath, caPath, err := Join(context.Background(), parsed, dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{certPath: 0o644, keyPath: 0o600, caPath: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %o, want %o", filepath.Base(path), fi.Mode().Perm(), mode)
		}
	}
	certPEM, _ := os.ReadFile(certPath)
	keyPEM, _ := os.ReadFile(keyPath)
	caPEM, _ := os.ReadFile(caPath)
	if string(caPEM) != string(ca.caPEM) {
		t.Error("ca.pem is not the cluster CA")
	}
	certs, err := pki.ParseCertificatesPEM(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	cert := certs[0]
	if role, _ := pki.RoleOf(cert); role != pki.RoleNode || cert.Subject.CommonName != "node5" {
		t.Errorf("certificate %q role %q", cert.Subject.CommonName, role)
	}
	if len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(net.ParseIP("192.0.2.10")) {
		t.Errorf("IPs %v, want the validator's", cert.IPAddresses)
	}

	// The joined node can serve RPC to the master with what it received.
	s, err := NewServer(ServerOptions{CertPEM: certPEM, KeyPEM: keyPEM, CAPEM: caPEM, StateDir: filepath.Join(dir, "rpc")})
	if err != nil {
		t.Fatal(err)
	}
	countingEcho(s)
	srv := startServer(t, s)
	var r echoReply
	if err := newMasterClient(t, ca, epochOf(1)).Call(context.Background(), "node5", srv.addr, "echo", "", echoArgs{"joined"}, &r); err != nil || r.Word != "joined" {
		t.Fatalf("call to joined node: %+v, %v", r, err)
	}

	// A token works once.
	_, _, _, err = Join(context.Background(), parsed, t.TempDir())
	if e, ok := ecode.As(err); !ok || e.Class != ecode.State || !strings.Contains(e.Msg, "already used") {
		t.Fatalf("reused token: %v", err)
	}
}

func TestJoinRefusals(t *testing.T) {
	ca := newTestCA(t, "alpha")
	other := newTestCA(t, "beta")
	book := &tokenBook{tokens: map[string]bookEntry{}}
	addr := startJoinListener(t, ca, book)
	pin, _ := pki.CAFingerprint(ca.caPEM)
	otherPin, _ := pki.CAFingerprint(other.caPEM)

	tok, _ := pki.NewJoinToken(addr, pin, "node6", time.Hour)
	book.add(tok)

	// Wrong pin: the node must not even send its token.
	bad := tok
	bad.CASHA256 = otherPin
	dir := t.TempDir()
	_, _, _, err := Join(context.Background(), bad, dir)
	mustBeUnreachable(t, err)
	if book.checks() != 0 {
		t.Fatal("the token was sent to an unpinned master")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("failed join left files: %v", entries)
	}

	// Wrong secret.
	wrong := tok
	wrong.Secret = secret.Secret(strings.Repeat("0", 64))
	_, _, _, err = Join(context.Background(), wrong, t.TempDir())
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.PermissionDenied {
		t.Fatalf("wrong secret: %v", err)
	}
	// Another node's token.
	stolen := tok
	stolen.Node = "node7"
	_, _, _, err = Join(context.Background(), stolen, t.TempDir())
	if ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("token for another node: %v", err)
	}
	// The real one still works: failed attempts did not consume it.
	if _, _, _, err := Join(context.Background(), tok, t.TempDir()); err != nil {
		t.Fatalf("good token after failed attempts: %v", err)
	}
}

func TestJoinHandlerRejectsBadRequestsBeforeTheToken(t *testing.T) {
	ca := newTestCA(t, "alpha")
	book := &tokenBook{tokens: map[string]bookEntry{}}
	h := JoinHandler(ca.ca, book.validate, nil)
	_, key, _ := pki.NewKeyPair()
	csr, _ := pki.NewCSR(key, "n1")
	good := joinRequest{TokenID: "00112233aabbccdd", TokenSecret: "s", Node: "n1", CSR: string(csr)}
	body := func(f func(*joinRequest)) string {
		r := good
		f(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	tests := []struct {
		name, method, path, body string
		status                   int
	}{
		{"GET", http.MethodGet, JoinPath, "", http.StatusMethodNotAllowed},
		{"other path", http.MethodPost, "/join/v2", body(func(*joinRequest) {}), http.StatusNotFound},
		{"not json", http.MethodPost, JoinPath, "{", http.StatusBadRequest},
		{"unknown field", http.MethodPost, JoinPath, `{"token_id":"x","admin":true}`, http.StatusBadRequest},
		{"no secret", http.MethodPost, JoinPath, body(func(r *joinRequest) { r.TokenSecret = "" }), http.StatusBadRequest},
		{"bad node", http.MethodPost, JoinPath, body(func(r *joinRequest) { r.Node = "../etc" }), http.StatusBadRequest},
		{"bad csr", http.MethodPost, JoinPath, body(func(r *joinRequest) { r.CSR = "junk" }), http.StatusBadRequest},
		{"huge", http.MethodPost, JoinPath, `{"csr":"` + strings.Repeat("A", maxJoinBody) + `"}`, http.StatusBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)))
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			if err := decodeResponse(rec.Code, rec.Body.Bytes(), nil); err == nil {
				t.Fatal("error answer decoded as success")
			}
		})
	}
	if book.checks() != 0 {
		t.Fatalf("validator ran %d times for bad requests", book.checks())
	}
	// The secret never appears in what the handler sends back.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, JoinPath, strings.NewReader(body(func(r *joinRequest) { r.TokenSecret = "hunter2hunter2" }))))
	if strings.Contains(rec.Body.String(), "hunter2") || errors.Is(decodeResponse(rec.Code, rec.Body.Bytes(), nil), ErrUnreachable) {
		t.Fatalf("answer %s", rec.Body)
	}
}
