package pki

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

const (
	rieTestCDS   = secret.Secret("0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c")
	rieOtherCDS  = secret.Secret("ffffffffffffffffffffffffffffffffffffffff")
	rieTestMagic = "7217b4b84331fe3abe46add59284f28a0275c7f4"
)

// jsonRoundTrip gives v the shape it has after travelling through a job
// result or a RAPI body: []any, float64 numbers.
func jsonRoundTrip(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("unmarshal: %v", err)
	}
	return out
}

// wantInval fails unless err is an ecode.Inval error mentioning want and not
// the secret.
func wantInval(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", want)
	}
	if c := ecode.ClassOf(err); c != ecode.Inval {
		t.Errorf("class = %s, want %s (err %v)", c, ecode.Inval, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	for _, s := range []secret.Secret{rieTestCDS, rieOtherCDS} {
		if strings.Contains(err.Error(), s.Reveal()) {
			t.Errorf("error %q contains the domain secret", err)
		}
	}
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

func TestSha1HmacPrependsSalt(t *testing.T) {
	// RFC 2202 test case 2, with the message split into salt and rest: the
	// digest matches only if the salt goes before the message.
	got := Sha1Hmac(secret.Secret("Jefe"), "want for nothing?", "what do ya ")
	if want := "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"; got != want {
		t.Fatalf("Sha1Hmac = %s, want %s", got, want)
	}
	if Sha1Hmac(secret.Secret("Jefe"), "what do ya want for nothing?", "") != got {
		t.Fatal("empty salt must give the plain HMAC")
	}
}

func TestVerifySha1Hmac(t *testing.T) {
	d := Sha1Hmac(rieTestCDS, "msg", "salt1")
	cases := []struct {
		name              string
		cds               secret.Secret
		msg, salt, digest string
		want              bool
	}{
		{"good", rieTestCDS, "msg", "salt1", d, true},
		{"uppercase hex", rieTestCDS, "msg", "salt1", strings.ToUpper(d), true},
		{"wrong secret", rieOtherCDS, "msg", "salt1", d, false},
		{"wrong message", rieTestCDS, "msg2", "salt1", d, false},
		{"wrong salt", rieTestCDS, "msg", "salt2", d, false},
		{"salt moved into message", rieTestCDS, "salt1msg", "", d, true},
		{"truncated", rieTestCDS, "msg", "salt1", d[:38], false},
		{"extended", rieTestCDS, "msg", "salt1", d + "00", false},
		{"not hex", rieTestCDS, "msg", "salt1", "zz" + d[2:], false},
		{"empty", rieTestCDS, "msg", "salt1", "", false},
		{"flipped digit", rieTestCDS, "msg", "salt1", flipHex(d, 7), false},
	}
	for _, c := range cases {
		if got := VerifySha1Hmac(c.cds, c.msg, c.salt, c.digest); got != c.want {
			t.Errorf("%s: VerifySha1Hmac = %v, want %v", c.name, got, c.want)
		}
	}
}

// flipHex changes the hex digit at i to another one.
func flipHex(s string, i int) string {
	b := []byte(s)
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
	return string(b)
}

func TestNewSaltAndMagicBase(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		s := NewSalt()
		if !isHex(s, 16) {
			t.Fatalf("salt %q is not 16 lowercase hex characters", s)
		}
		if seen[s] {
			t.Fatalf("salt %q repeated", s)
		}
		seen[s] = true
		if m := NewMagicBase(); !isHex(m, 12) {
			t.Fatalf("magic base %q is not 12 lowercase hex characters", m)
		}
	}
}

func TestHandshakeRoundTrip(t *testing.T) {
	hs := ComputeHandshake(rieTestCDS)
	if len(hs) != 3 || hs[0] != RIEVersion {
		t.Fatalf("handshake = %v", hs)
	}
	salt, _ := hs[2].(string)
	if want := Sha1Hmac(rieTestCDS, "0:Hi, I'm Ganeti", salt); hs[1] != want {
		t.Fatalf("handshake HMAC = %v, want %s", hs[1], want)
	}
	if err := CheckHandshake(rieTestCDS, hs); err != nil {
		t.Fatalf("check unencoded: %v", err)
	}
	if err := CheckHandshake(rieTestCDS, jsonRoundTrip(t, hs)); err != nil {
		t.Fatalf("check after JSON: %v", err)
	}
	if a, b := ComputeHandshake(rieTestCDS), ComputeHandshake(rieTestCDS); a[2] == b[2] {
		t.Fatal("two handshakes share a salt")
	}
}

func TestCheckHandshakeRejects(t *testing.T) {
	good := jsonRoundTrip(t, ComputeHandshake(rieTestCDS)).([]any)
	with := func(i int, v any) []any {
		l := append([]any(nil), good...)
		l[i] = v
		return l
	}
	salt := "00112233aabbccdd"
	v1 := []any{float64(1), Sha1Hmac(rieTestCDS, "1:Hi, I'm Ganeti", salt), salt}
	cases := []struct {
		name string
		cds  secret.Secret
		v    any
		want string
	}{
		{"wrong secret", rieOtherCDS, good, "Handshake does not match: the clusters do not share the same domain secret"},
		{"other version", rieTestCDS, v1, "(local=0, remote=1)"},
		{"version claimed without HMAC", rieTestCDS, with(0, float64(1)), "Handshake does not match"},
		{"tampered salt", rieTestCDS, with(2, "0000000000000000"), "Handshake does not match"},
		{"tampered HMAC", rieTestCDS, with(1, flipHex(good[1].(string), 0)), "Handshake does not match"},
		{"not a list", rieTestCDS, "hello", "expected a list of 3 items"},
		{"null", rieTestCDS, nil, "expected a list of 3 items, got null"},
		{"too short", rieTestCDS, good[:2], "expected a list of 3 items, got 2"},
		{"too long", rieTestCDS, append(with(0, float64(0)), "x"), "got 4"},
		{"version string", rieTestCDS, with(0, "0"), "version must be an integer"},
		{"version fraction", rieTestCDS, with(0, 0.5), "version must be an integer"},
		{"version huge", rieTestCDS, with(0, math.Pow(2, 70)), "version must be an integer"},
		{"HMAC number", rieTestCDS, with(1, float64(3)), "HMAC must be a non-empty string"},
		{"HMAC empty", rieTestCDS, with(1, ""), "HMAC must be a non-empty string"},
		{"salt number", rieTestCDS, with(2, float64(3)), "salt must be a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantInval(t, CheckHandshake(c.cds, c.v), c.want)
		})
	}
}

func TestKeyNameRoundTrip(t *testing.T) {
	const name = "x509-20261130_021800-ab_c9"
	signed := SignKeyName(rieTestCDS, name)
	got, err := CheckKeyName(rieTestCDS, jsonRoundTrip(t, signed))
	if err != nil || got != name {
		t.Fatalf("CheckKeyName = %q, %v; want %q", got, err, name)
	}
	salt := signed[2].(string)
	if signed[1] != Sha1Hmac(rieTestCDS, name, salt) {
		t.Fatalf("key name HMAC = %v", signed[1])
	}
}

func TestCheckKeyNameRejects(t *testing.T) {
	good := SignKeyName(rieTestCDS, "x509-1-abc")
	signedAs := func(name string) []any { return SignKeyName(rieTestCDS, name) }
	cases := []struct {
		name string
		cds  secret.Secret
		v    any
		want string
	}{
		{"wrong secret", rieOtherCDS, good, "HMAC for X509 key name is wrong"},
		{"other name, same HMAC", rieTestCDS, []any{"x509-1-abd", good[1], good[2]}, "HMAC for X509 key name is wrong"},
		{"uppercased HMAC still checked", rieTestCDS, []any{"x509-1-abd", strings.ToUpper(good[1].(string)), good[2]}, "is wrong"},
		{"path", rieTestCDS, signedAs("../../etc"), "only letters, digits"},
		{"dot dot", rieTestCDS, signedAs(".."), "Invalid X509 key name"},
		{"empty", rieTestCDS, signedAs(""), "Invalid X509 key name"},
		{"slash", rieTestCDS, signedAs("a/b"), "Invalid X509 key name"},
		{"name number", rieTestCDS, []any{float64(1), good[1], good[2]}, "name must be a string"},
		{"short", rieTestCDS, good[:1], "expected a list of 3 items, got 1"},
		{"object", rieTestCDS, map[string]any{}, "got an object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := CheckKeyName(c.cds, c.v)
			wantInval(t, err, c.want)
		})
	}
	if _, err := CheckKeyName(rieTestCDS, []any{"x509-1-abc", strings.ToUpper(good[1].(string)), good[2]}); err != nil {
		t.Fatalf("uppercase HMAC rejected: %v", err)
	}
}

func TestDiskInfoRoundTrip(t *testing.T) {
	salt := NewSalt()
	cases := []struct {
		host, wantHost string
		port           int
	}{
		{"192.0.2.10", "192.0.2.10", 1},
		{"2001:db8::1", "2001:db8::1", 65535},
		{"Node1.Example.COM.", "node1.example.com", 11000},
	}
	for i, c := range cases {
		signed := SignDiskInfo(rieTestCDS, i, c.host, c.port, rieTestMagic, salt)
		if len(signed) != 5 || signed[4] != salt {
			t.Fatalf("signed = %v", signed)
		}
		wantHMAC := Sha1Hmac(rieTestCDS, strings.Join([]string{strconv.Itoa(i), c.host, strconv.Itoa(c.port), rieTestMagic}, ":"), salt)
		if signed[3] != wantHMAC {
			t.Fatalf("disk %d HMAC = %v, want %s", i, signed[3], wantHMAC)
		}
		host, port, magic, err := CheckDiskInfo(rieTestCDS, i, jsonRoundTrip(t, signed))
		if err != nil {
			t.Fatalf("disk %d: %v", i, err)
		}
		if host != c.wantHost || port != c.port || magic != rieTestMagic {
			t.Fatalf("disk %d = %s %d %s, want %s %d %s", i, host, port, magic, c.wantHost, c.port, rieTestMagic)
		}
		// The index is signed: disk 0's listener is not disk 1's.
		if _, _, _, err := CheckDiskInfo(rieTestCDS, i+1, jsonRoundTrip(t, signed)); err == nil {
			t.Fatalf("disk %d info accepted for disk %d", i, i+1)
		}
	}
}

func jsonMarshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func TestCheckDiskInfoRejects(t *testing.T) {
	const salt = "0123456789abcdef"
	good := jsonRoundTrip(t, SignDiskInfo(rieTestCDS, 0, "192.0.2.1", 1234, rieTestMagic, salt)).([]any)
	with := func(i int, v any) []any {
		l := append([]any(nil), good...)
		l[i] = v
		return l
	}
	// resigned makes a correctly signed message with a bad field, to show
	// the field checks do not lean on the HMAC.
	resigned := func(host string, port int, magic string) []any {
		return []any{host, float64(port), magic, Sha1Hmac(rieTestCDS, "0:"+host+":"+strconv.Itoa(port)+":"+magic, salt), salt}
	}
	cases := []struct {
		name string
		cds  secret.Secret
		v    any
		want string
	}{
		{"wrong secret", rieOtherCDS, good, "HMAC for disk 0 destination is wrong"},
		{"tampered host", rieTestCDS, with(0, "192.0.2.2"), "is wrong"},
		{"tampered port", rieTestCDS, with(1, float64(1235)), "is wrong"},
		{"tampered magic", rieTestCDS, with(2, rieTestMagic[:39]+"5"), "is wrong"},
		{"tampered salt", rieTestCDS, with(4, "0123456789abcdee"), "is wrong"},
		{"tampered HMAC", rieTestCDS, with(3, flipHex(good[3].(string), 39)), "is wrong"},
		{"port zero", rieTestCDS, resigned("192.0.2.1", 0, rieTestMagic), "port must be an integer from 1 to 65535, got 0"},
		{"port too big", rieTestCDS, resigned("192.0.2.1", 65536, rieTestMagic), "got 65536"},
		{"port negative", rieTestCDS, with(1, float64(-1)), "port must be"},
		{"port fraction", rieTestCDS, with(1, 1234.5), "port must be"},
		{"port string", rieTestCDS, with(1, "1234"), `got "1234"`},
		{"port null", rieTestCDS, with(1, nil), "got null"},
		{"host empty", rieTestCDS, with(0, ""), "host must be a non-empty string"},
		{"host number", rieTestCDS, with(0, float64(7)), "host must be a non-empty string, got 7"},
		{"host bad", rieTestCDS, resigned("a b;rm", 1234, rieTestMagic), "neither an IP address nor a host name"},
		{"host empty label", rieTestCDS, resigned("a..b", 1234, rieTestMagic), "neither an IP address nor a host name"},
		{"magic short", rieTestCDS, resigned("192.0.2.1", 1234, "abcd"), "magic must be"},
		{"magic shell", rieTestCDS, resigned("192.0.2.1", 1234, "abcd;x"), "magic must be"},
		{"magic list", rieTestCDS, with(2, []any{}), "got a list of 0 items"},
		{"HMAC missing", rieTestCDS, with(3, nil), "HMAC must be a non-empty string"},
		{"salt too long", rieTestCDS, with(4, strings.Repeat("a", 2000)), "salt must be a string"},
		{"four items", rieTestCDS, good[:4], "expected a list of 5 items, got 4"},
		{"not a list", rieTestCDS, float64(5), "expected a list of 5 items, got 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, _, err := CheckDiskInfo(c.cds, 0, c.v)
			wantInval(t, err, c.want)
		})
	}
}

func TestComputeMagic(t *testing.T) {
	// sha1("0" + "c0ffee12345a" + "inst1.example.com" + "3"), computed with
	// sha1sum.
	if got := ComputeMagic("c0ffee12345a", "inst1.example.com", 3); got != rieTestMagic {
		t.Fatalf("ComputeMagic = %s, want %s", got, rieTestMagic)
	}
	if ComputeMagic("c0ffee12345a", "inst1.example.com", 2) == rieTestMagic {
		t.Fatal("magic does not depend on the disk index")
	}
	if !ValidMagic(ComputeMagic(NewMagicBase(), "x", 0)) {
		t.Fatal("computed magic is not valid")
	}
}

func TestValidMagic(t *testing.T) {
	cases := map[string]bool{
		"abcde":                  true,
		"A-b_c.9":                true,
		strings.Repeat("a", 100): true,
		"abcd":                   false,
		strings.Repeat("a", 101): false,
		"abc de":                 false,
		"abcde\n":                false,
		"abc/de":                 false,
		"abcdé":                  false,
		"":                       false,
		rieTestMagic:             true,
	}
	for m, want := range cases {
		if got := ValidMagic(m); got != want {
			t.Errorf("ValidMagic(%q) = %v, want %v", m, got, want)
		}
	}
}

// FuzzCheckDiskInfo feeds arbitrary JSON to the disk-info check: it must
// never panic, must fail only with Inval errors, and whatever it accepts
// must be a usable destination that verifies again once re-signed.
func FuzzCheckDiskInfo(f *testing.F) {
	const salt = "0123456789abcdef"
	for i, host := range []string{"192.0.2.1", "Node1.example.com.", "::1"} {
		f.Add(jsonMarshal(SignDiskInfo(rieTestCDS, i, host, 1000+i, rieTestMagic, salt)), i)
	}
	f.Add([]byte(`["h", 1, "magic", "00", "s"]`), 0)
	f.Add([]byte(`["h", 1.5, "magic", 3, null]`), 0)
	f.Add([]byte(`[null, null, null, null, null]`), 0)
	f.Add([]byte(`{"a": [1, 2]}`), 0)
	f.Add([]byte(`"x"`), 0)
	f.Add([]byte(`[]`), -1)
	f.Fuzz(func(t *testing.T, data []byte, index int) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		host, port, magic, err := CheckDiskInfo(rieTestCDS, index, v)
		if err != nil {
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("error class %s: %v", ecode.ClassOf(err), err)
			}
			if strings.Contains(err.Error(), rieTestCDS.Reveal()) {
				t.Fatal("error contains the secret")
			}
			return
		}
		if host == "" || port < 1 || port > 65535 || !ValidMagic(magic) {
			t.Fatalf("accepted unusable destination %q %d %q", host, port, magic)
		}
		again := jsonRoundTrip(t, SignDiskInfo(rieTestCDS, index, host, port, magic, NewSalt()))
		h2, p2, m2, err := CheckDiskInfo(rieTestCDS, index, again)
		if err != nil || h2 != host || p2 != port || m2 != magic {
			t.Fatalf("re-signed destination = %q %d %q %v, want %q %d %q", h2, p2, m2, err, host, port, magic)
		}
	})
}

// FuzzCheckHandshake: arbitrary JSON never panics and is accepted only when
// it is a handshake made with the secret.
func FuzzCheckHandshake(f *testing.F) {
	f.Add(jsonMarshal(ComputeHandshake(rieTestCDS)))
	f.Add(jsonMarshal(ComputeHandshake(rieOtherCDS)))
	f.Add([]byte(`[1e300, "", ""]`))
	f.Add([]byte(`[0, "00", "s", 4]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			return
		}
		err := CheckHandshake(rieTestCDS, v)
		if err != nil {
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("error class %s: %v", ecode.ClassOf(err), err)
			}
			return
		}
		l := v.([]any)
		if l[0] != float64(0) || !VerifySha1Hmac(rieTestCDS, "0:"+RIEHandshakeText, l[2].(string), l[1].(string)) {
			t.Fatalf("accepted %v", v)
		}
	})
}
