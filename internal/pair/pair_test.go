package pair

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/secret"
)

// testCA is a throwaway self-signed certificate.
func testCA(t testing.TB) []byte {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func newTestToken(t *testing.T) Token {
	t.Helper()
	tok, err := NewToken("https://127.0.0.1:5080", testCA(t), 10*time.Minute, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestTokenRoundTrip(t *testing.T) {
	tok := newTestToken(t)
	s := tok.Encode()
	if strings.Contains(tok.String(), tok.Secret.Reveal()) {
		t.Fatal("String shows the secret")
	}
	got, err := ParseToken("  " + s + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != tok {
		t.Fatalf("got %+v, want %+v", got, tok)
	}
	if tok.Expired(time.Now()) || !tok.Expired(time.Now().Add(11*time.Minute)) {
		t.Fatal("expiry")
	}
	for _, bad := range []string{"", "corral-pair-1.", s[:len(s)-4], "corral-pair-2." + strings.TrimPrefix(s, tokenPrefix), s + "!"} {
		if _, err := ParseToken(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := NewToken("http://x:1", testCA(t), time.Minute, time.Now()); err == nil {
		t.Error("a plain http URL was accepted")
	}
	if _, err := NewToken("https://x:1", []byte("not a certificate"), time.Minute, time.Now()); err == nil {
		t.Error("a token without a CA was accepted")
	}
	if pool, err := tok.CAPool(); err != nil || pool == nil || !strings.HasPrefix(Fingerprint(tok.CAPEM), "sha256:") {
		t.Errorf("CA pool %v, fingerprint %s", err, Fingerprint(tok.CAPEM))
	}
}

func TestExchange(t *testing.T) {
	tok := newTestToken(t)
	cds := secret.Secret("0123456789abcdef0123456789abcdef01234567")
	joiner, req, err := NewRequest(tok, Peer{Cluster: "b", RAPIURL: "https://b:5080", RAPICA: "PEM"})
	if err != nil {
		t.Fatal(err)
	}
	reply, err := Answer(tok.Secret, req, cds, Peer{Cluster: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(reply.Box), cds.Reveal()) {
		t.Fatal("the secret travels in clear")
	}
	got, err := joiner.Open(reply)
	if err != nil || got != cds {
		t.Fatalf("opened %q, %v", got.Reveal(), err)
	}

	// Without the token's secret the request is refused.
	other := newTestToken(t)
	forged, _, _ := NewRequest(Token{URL: tok.URL, CAPEM: tok.CAPEM, ID: tok.ID, Secret: other.Secret, Expires: tok.Expires}, Peer{})
	if _, err := Answer(tok.Secret, forged.req, cds, Peer{}); err != ErrRefused {
		t.Fatalf("forged request: %v", err)
	}
	// A changed joiner description invalidates the proof.
	req2 := req
	req2.Joiner.RAPIURL = "https://evil:5080"
	if _, err := Answer(tok.Secret, req2, cds, Peer{}); err != ErrRefused {
		t.Fatalf("altered request: %v", err)
	}
	// A reply tampered with or for another joiner does not open.
	bad := reply
	bad.Box = append([]byte{}, reply.Box...)
	bad.Box[0] ^= 1
	if _, err := joiner.Open(bad); err == nil {
		t.Fatal("a tampered reply opened")
	}
	j2, req3, _ := NewRequest(tok, Peer{})
	_ = req3
	if _, err := j2.Open(reply); err == nil {
		t.Fatal("a reply for another key opened")
	}
}

func FuzzParseToken(f *testing.F) {
	tok, _ := NewToken("https://127.0.0.1:5080", testCA(f), time.Minute, time.Unix(1e9, 0))
	f.Add(tok.Encode())
	f.Add("corral-pair-1.e30")
	f.Add("corral-pair-1.eyJ1IjoiaHR0cHM6Ly94In0")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseToken(s)
		if err != nil {
			return
		}
		again, err := ParseToken(got.Encode())
		if err != nil || again != got {
			t.Fatalf("re-encoded token differs: %v", err)
		}
	})
}

func TestValidNames(t *testing.T) {
	for name, want := range map[string]bool{
		"cluster1.example.com": true, "c-2_x": true, "": false, "../x": false, "a/b": false,
		".hidden": false, strings.Repeat("a", 254): false,
	} {
		if got := ValidPeerName(name); got != want {
			t.Errorf("ValidPeerName(%q) = %v, want %v", name, got, want)
		}
	}
	tok := newTestToken(t)
	if !ValidID(tok.ID) || ValidID("../../etc") || ValidID("") {
		t.Error("ValidID")
	}
}

// The hand-written checks accept exactly what these expressions do.
var (
	idForm   = regexp.MustCompile(`^[0-9a-f]{16}$`)
	hexForm  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	nameForm = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)
)

func checkForms(t *testing.T, s string) {
	if got, want := ValidID(s), idForm.MatchString(s); got != want {
		t.Errorf("ValidID(%q) = %v, the expression says %v", s, got, want)
	}
	if got, want := lowerHex(s, 64), hexForm.MatchString(s); got != want {
		t.Errorf("lowerHex(%q, 64) = %v, the expression says %v", s, got, want)
	}
	if got, want := ValidPeerName(s), nameForm.MatchString(s); got != want {
		t.Errorf("ValidPeerName(%q) = %v, the expression says %v", s, got, want)
	}
}

var formSeeds = []string{
	"", "0123456789abcdef", "0123456789ABCDEF", "0123456789abcde", "0123456789abcdef0",
	strings.Repeat("ab", 32), strings.Repeat("ab", 32) + "\n", strings.Repeat("g", 64),
	"a", "-a", "a-", "a.b_c-d", "_x", "9", "a b", "a/b", "é", "a\x00",
	strings.Repeat("a", 253), strings.Repeat("a", 254), "Z" + strings.Repeat(".", 252),
}

func TestFormsMatchTheirExpressions(t *testing.T) {
	for _, s := range formSeeds {
		checkForms(t, s)
	}
}

func FuzzForms(f *testing.F) {
	for _, s := range formSeeds {
		f.Add(s)
	}
	f.Fuzz(checkForms)
}
