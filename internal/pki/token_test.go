package pki

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

const testPin = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestJoinTokenRoundTrip(t *testing.T) {
	tok, err := NewJoinToken("master.example.com:1811", testPin, "node1.example.com", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	enc := tok.Encode()
	if !strings.HasPrefix(enc, "corral1.") {
		t.Fatalf("encoded token %q lacks the prefix", enc)
	}
	if strings.ContainsAny(enc, "+/= \n") {
		t.Fatalf("encoded token %q is not URL-safe", enc)
	}
	got, err := ParseJoinToken(" " + enc + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if got.Master != tok.Master || got.CASHA256 != tok.CASHA256 || got.Node != tok.Node ||
		got.ID != tok.ID || got.Secret.Reveal() != tok.Secret.Reveal() || !got.Expires.Equal(tok.Expires) {
		t.Fatalf("round trip: got %+v, want %+v", got, tok)
	}
	if len(tok.ID) != 16 || len(tok.Secret.Reveal()) != 64 {
		t.Fatalf("id %q or secret of length %d", tok.ID, len(tok.Secret.Reveal()))
	}
	other, _ := NewJoinToken("m:1", testPin, "n", time.Hour)
	if other.ID == tok.ID || other.Secret == tok.Secret {
		t.Fatal("two tokens share an id or secret")
	}
	if s := fmt.Sprintf("%v %+v %s", tok, tok, tok); strings.Contains(s, tok.Secret.Reveal()) {
		t.Fatal("printing a token reveals its secret")
	}
}

func TestParseJoinTokenIgnoresExpiry(t *testing.T) {
	tok := validToken()
	tok.Expires = time.Unix(1, 0)
	got, err := ParseJoinToken(tok.Encode())
	if err != nil {
		t.Fatalf("an expired token must parse (the master checks expiry): %v", err)
	}
	if got.Expires.Unix() != 1 {
		t.Fatalf("Expires = %v", got.Expires)
	}
}

func validToken() JoinToken {
	return JoinToken{
		Master:   "10.0.0.1:1811",
		CASHA256: testPin,
		Node:     "node1",
		ID:       "00112233aabbccdd",
		Secret:   secret.Secret(strings.Repeat("ab", 32)),
		Expires:  time.Unix(2000000000, 0),
	}
}

func wrap(json string) string {
	return "corral1." + base64.RawURLEncoding.EncodeToString([]byte(json))
}

func TestParseJoinTokenErrors(t *testing.T) {
	mut := func(f func(*JoinToken)) string {
		tok := validToken()
		f(&tok)
		return tok.Encode()
	}
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "must start with"},
		{"bad prefix", "corral2." + strings.TrimPrefix(validToken().Encode(), "corral1."), "must start with"},
		{"bad base64", "corral1.!!!", "base64url"},
		{"padded base64", validToken().Encode() + "==", "base64url"},
		{"not json", wrap("hello"), "malformed"},
		{"unknown field", wrap(`{"m":"a:1","x":1}`), "malformed"},
		{"trailing data", wrap(`{"m":"a:1"} {}`), "trailing"},
		{"all missing", wrap(`{}`), "lacks master address, CA pin, node, id, secret, expiry"},
		{"no secret", mut(func(t *JoinToken) { t.Secret = "" }), "lacks secret"},
		{"master without port", mut(func(t *JoinToken) { t.Master = "10.0.0.1" }), "host:port"},
		{"master port zero", mut(func(t *JoinToken) { t.Master = "h:0" }), "port"},
		{"master port name", mut(func(t *JoinToken) { t.Master = "h:https" }), "port"},
		{"short pin", mut(func(t *JoinToken) { t.CASHA256 = "abcd" }), "CA pin"},
		{"upper pin", mut(func(t *JoinToken) { t.CASHA256 = strings.ToUpper(testPin) }), "CA pin"},
		{"bad node", mut(func(t *JoinToken) { t.Node = "node 1" }), "node name"},
		{"bad id", mut(func(t *JoinToken) { t.ID = "xyz" }), "token id"},
		{"short secret", mut(func(t *JoinToken) { t.Secret = "abcd" }), "token secret"},
		{"too long", "corral1." + strings.Repeat("A", 5000), "too long"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseJoinToken(tc.in)
			if err == nil {
				t.Fatal("parsed")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tc.want)
			}
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("class = %s, want %s", ecode.ClassOf(err), ecode.Inval)
			}
			if strings.Contains(err.Error(), strings.Repeat("ab", 32)) {
				t.Fatal("error reveals the secret")
			}
		})
	}
}

func TestHashTokenSecret(t *testing.T) {
	// SHA-256("abc"), FIPS 180-2 test vector.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := HashTokenSecret("abc"); got != want {
		t.Fatalf("HashTokenSecret = %s", got)
	}
	if !TokenSecretMatches(want, "abc") || TokenSecretMatches(want, "abd") {
		t.Fatal("TokenSecretMatches is wrong")
	}
}

func TestValidNodeName(t *testing.T) {
	for name, want := range map[string]bool{
		"node1": true, "node1.example.com": true, "a-b_c": true, "10.0.0.1": true,
		"": false, "a..b": false, ".a": false, "a b": false, "a/b": false,
		strings.Repeat("a", 64): false, strings.Repeat("a.", 127) + "a": false,
	} {
		if got := ValidNodeName(name); got != want {
			t.Errorf("ValidNodeName(%q) = %v", name, got)
		}
	}
}

func FuzzParseJoinToken(f *testing.F) {
	f.Add(validToken().Encode())
	f.Add("corral1.")
	f.Add("corral1.e30")
	f.Add(wrap(`{"m":"h:1","ca":"` + testPin + `","n":"n","id":"0011223344556677","s":"` + strings.Repeat("0", 64) + `","exp":-5}`))
	f.Add("nonsense")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseJoinToken(s)
		if err != nil {
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("error of class %s: %v", ecode.ClassOf(err), err)
			}
			return
		}
		again, err := ParseJoinToken(tok.Encode())
		if err != nil {
			t.Fatalf("re-encoded token does not parse: %v", err)
		}
		if again.Master != tok.Master || again.CASHA256 != tok.CASHA256 || again.Node != tok.Node ||
			again.ID != tok.ID || again.Secret != tok.Secret || !again.Expires.Equal(tok.Expires) {
			t.Fatalf("round trip changed the token: %+v vs %+v", again, tok)
		}
	})
}
