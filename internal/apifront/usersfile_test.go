package apifront

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const testRealm = "Ganeti Remote API"

func TestUsers(t *testing.T) {
	sum := md5.Sum([]byte("hauser:" + testRealm + ":hapass"))
	ha1 := hex.EncodeToString(sum[:])
	file := fmt.Sprintf(`
# a comment
plain   pass1   write
clear   {CLEARTEXT}pass2   read , write
hauser  {HA1}%s read
haupper {ha1}%s
other   {SSHA}abc write
lonely
spaced  pw   read,  write extra
`, ha1, strings.ToUpper(ha1))
	u := ParseUsers([]byte(file), testRealm)
	tests := []struct {
		user, pass string
		ok         bool
		options    string
	}{
		{"plain", "pass1", true, "write"},
		{"plain", "pass2", false, ""},
		{"clear", "pass2", true, "read,write"},
		{"clear", "{CLEARTEXT}pass2", false, ""},
		{"hauser", "hapass", true, "read"},
		{"hauser", "wrong", false, ""},
		{"haupper", "hapass", false, ""}, // the hash is over its own user name
		{"other", "abc", false, ""},
		{"lonely", "", false, ""},
		{"nobody", "x", false, ""},
		{"spaced", "pw", true, "read,write extra"},
	}
	for _, tc := range tests {
		t.Run(tc.user+"/"+tc.pass, func(t *testing.T) {
			user, ok := u.Authenticate(tc.user, tc.pass)
			if ok != tc.ok {
				t.Fatalf("Authenticate = %v, want %v", ok, tc.ok)
			}
			if !ok {
				return
			}
			for _, o := range strings.Split(tc.options, ",") {
				if !user.Roles[strings.TrimSpace(o)] {
					t.Errorf("option %q missing from %v", o, user.Roles)
				}
			}
		})
	}
	if u.Len() != 6 {
		t.Errorf("Len = %d, want 6 (lines without a password skipped)", u.Len())
	}
	// A hash over another realm does not match.
	if _, ok := ParseUsers([]byte(file), "Other").Authenticate("hauser", "hapass"); ok {
		t.Error("{HA1} password accepted under another realm")
	}
	if s := fmt.Sprintf("%v %+v", u.byName["plain"], *u.byName["plain"]); strings.Contains(s, "pass1") {
		t.Errorf("password printed: %s", s)
	}
}

func TestAllowed(t *testing.T) {
	u := ParseUsers([]byte("r x read\nw x write\nn x\n"), testRealm)
	write, readWrite := []string{"write"}, []string{"write", "read"}
	for _, tc := range []struct {
		user   string
		access []string
		want   bool
	}{
		{"r", nil, true}, {"r", write, false}, {"r", readWrite, true},
		{"w", write, true}, {"w", readWrite, true},
		{"n", nil, true}, {"n", readWrite, false},
	} {
		if got := u.byName[tc.user].Allowed(tc.access); got != tc.want {
			t.Errorf("%s %v: %v, want %v", tc.user, tc.access, got, tc.want)
		}
	}
}

func FuzzParseUsers(f *testing.F) {
	for _, s := range []string{"a b write\n", "# x\n\nb {HA1}00 read,write\n", "c {cleartext}d\n", "x\n", "a\tb\t\tread , write\r\n", "{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		u := ParseUsers([]byte(data), testRealm)
		for name, user := range u.byName {
			if name == "" || strings.ContainsAny(name, " \t\n") || strings.HasPrefix(name, "#") {
				t.Errorf("bad user name %q", name)
			}
			pw := user.Password.Reveal()
			if pw == "" || strings.ContainsAny(pw, " \t\n") {
				t.Errorf("bad password field %q", pw)
			}
			if !strings.HasPrefix(pw, "{") {
				if _, ok := u.Authenticate(name, pw); !ok {
					t.Errorf("cleartext user %q cannot log in with %q", name, pw)
				}
			}
		}
	})
}

func TestUsersFileAuth(t *testing.T) {
	a := NewUsersFileAuth(testRealm, ParseUsers([]byte("admin s3cret write\n"), testRealm))
	req := func(hdr string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if hdr != "" {
			r.Header.Set("Authorization", hdr)
		}
		return r
	}
	basic := func(s string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		hdr  string
		want string // the identity's name; "" when refused
	}{
		{basic("admin:s3cret"), "admin"},
		{"bAsIc  " + base64.StdEncoding.EncodeToString([]byte("admin:s3cret")) + " ", "admin"},
		{basic("admin:wrong"), ""},
		{basic("admin"), ""},
		{"Bearer abc", ""},
		{"Basic !!!", ""},
		{"", ""},
	} {
		id, ok := a.Authenticate(req(tc.hdr))
		if got := ""; ok {
			got = id.Name
			if got != tc.want {
				t.Errorf("%q: identity %q, want %q", tc.hdr, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("%q: refused, want %q", tc.hdr, tc.want)
		}
	}
	if id, _ := a.Authenticate(req(basic("admin:s3cret"))); !id.Allowed([]string{"write"}) {
		t.Error("admin lacks its write role")
	}
	// A reload takes effect for the next request.
	a.Set(ParseUsers([]byte("admin other read\n"), testRealm))
	if _, ok := a.Authenticate(req(basic("admin:s3cret"))); ok {
		t.Error("old password accepted after the reload")
	}
	if id, ok := a.Authenticate(req(basic("admin:other"))); !ok || id.Allowed([]string{"write"}) {
		t.Errorf("after the reload: %v %v, want admin with read only", id, ok)
	}
	a.Set(nil)
	if _, ok := a.Authenticate(req(basic("admin:other"))); ok {
		t.Error("credentials accepted with no users")
	}
	if got, want := a.Challenge(), `Basic realm="`+testRealm+`"`; got != want {
		t.Errorf("Challenge = %q, want %q", got, want)
	}
}

func TestNoAuth(t *testing.T) {
	n := &NoAuth{As: Identity{Name: "admin", Roles: map[string]bool{"admin": true}}}
	id, ok := n.Authenticate(httptest.NewRequest(http.MethodGet, "/", nil))
	if !ok || id.Name != "admin" || !id.Allowed([]string{"admin"}) {
		t.Errorf("NoAuth gave %v %v", id, ok)
	}
}

func FuzzBasicCredentials(f *testing.F) {
	for _, s := range []string{"Basic YWRtaW46czNjcmV0", "basic  YTpi ", "Bearer x", "Basic", "Basic !!", "Basic Og=="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, hdr string) {
		name, pw, ok := BasicCredentials(hdr)
		if !ok {
			if name != "" || pw != "" {
				t.Errorf("%q refused but gave %q %q", hdr, name, pw)
			}
			return
		}
		if strings.Contains(name, ":") {
			t.Errorf("%q: user name %q holds the separator", hdr, name)
		}
		again := "Basic " + base64.StdEncoding.EncodeToString([]byte(name+":"+pw))
		if n2, p2, ok := BasicCredentials(again); !ok || n2 != name || p2 != pw {
			t.Errorf("%q: %q %q does not survive re-encoding: %q %q %v", hdr, name, pw, n2, p2, ok)
		}
	})
}
