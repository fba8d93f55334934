package rapi

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

func TestUsers(t *testing.T) {
	sum := md5.Sum([]byte("hauser:" + Realm + ":hapass"))
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
	u := ParseUsers([]byte(file))
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
				if !user.Options[strings.TrimSpace(o)] {
					t.Errorf("option %q missing from %v", o, user.Options)
				}
			}
		})
	}
	if u.Len() != 6 {
		t.Errorf("Len = %d, want 6 (lines without a password skipped)", u.Len())
	}
	if s := fmt.Sprintf("%v %+v", u.byName["plain"], *u.byName["plain"]); strings.Contains(s, "pass1") {
		t.Errorf("password printed: %s", s)
	}
}

func TestAllowed(t *testing.T) {
	u := ParseUsers([]byte("r x read\nw x write\nn x\n"))
	for _, tc := range []struct {
		user   string
		access []string
		want   bool
	}{
		{"r", nil, true}, {"r", accessWrite, false}, {"r", accessReadWrite, true},
		{"w", accessWrite, true}, {"w", accessReadWrite, true},
		{"n", nil, true}, {"n", accessReadWrite, false},
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
		u := ParseUsers([]byte(data))
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
