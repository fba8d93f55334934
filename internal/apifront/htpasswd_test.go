package apifront

import (
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func bcryptLine(t *testing.T, user, pw, prefix string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return user + ":" + prefix + string(h[4:])
}

func TestHTPasswdAuth(t *testing.T) {
	file := strings.Join([]string{
		"# operators",
		bcryptLine(t, "alice", "wonder", "$2y$"),
		"",
		bcryptLine(t, "bob", "builder", "$2b$"),
		bcryptLine(t, "alice", "second-entry-ignored", "$2a$"),
	}, "\n")
	f, err := ParseHTPasswd([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if f.Len() != 2 {
		t.Fatalf("%d users", f.Len())
	}
	a := NewHTPasswdAuth("Baremetal API", f)
	if a.Challenge() != `Basic realm="Baremetal API"` {
		t.Errorf("challenge %q", a.Challenge())
	}
	check := func(user, pw string, want bool) {
		t.Helper()
		r := httptest.NewRequest("GET", "/v1/nodes", nil)
		if user != "" {
			r.SetBasicAuth(user, pw)
		}
		for range 2 { // the second time from the remembered check
			id, ok := a.Authenticate(r)
			if ok != want || (ok && id.Name != user) {
				t.Errorf("%s/%s: ok %v id %v, want %v", user, pw, ok, id, want)
			}
		}
	}
	check("alice", "wonder", true)
	check("bob", "builder", true)
	check("alice", "second-entry-ignored", false)
	check("alice", "wrong", false)
	check("carol", "wonder", false)
	check("", "", false)

	// A reload replaces the users and forgets remembered checks.
	f2, err := ParseHTPasswd([]byte(bcryptLine(t, "alice", "new", "$2y$")))
	if err != nil {
		t.Fatal(err)
	}
	a.Set(f2)
	check("alice", "wonder", false)
	check("alice", "new", true)
	check("bob", "builder", false)
}

func TestHTPasswdRefusesOtherSchemes(t *testing.T) {
	for _, line := range []string{
		"alice:$apr1$abc$def",                     // Apache MD5
		"alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", // SHA-1
		"alice:plaintext",                         // crypt or clear
		"alice:$2y$10$tooshort",                   // not a bcrypt hash
	} {
		_, err := ParseHTPasswd([]byte("bob:" + "$2y$04$" + strings.Repeat("a", 53) + "\n" + line))
		if err == nil {
			t.Errorf("%q accepted", line)
			continue
		}
		if strings.Contains(err.Error(), strings.SplitN(line, ":", 2)[1]) {
			t.Errorf("the error repeats the hash: %v", err)
		}
		if !strings.Contains(err.Error(), "line 2") {
			t.Errorf("the error does not name the line: %v", err)
		}
	}
}

// FuzzParseHTPasswd: any file parses or fails without panicking, and an
// accepted file holds only bcrypt hashes.
func FuzzParseHTPasswd(f *testing.F) {
	f.Add("alice:$2y$04$" + strings.Repeat("a", 53) + "\n# c\n\nbob")
	f.Add("x:$apr1$a$b")
	f.Fuzz(func(t *testing.T, data string) {
		h, err := ParseHTPasswd([]byte(data))
		if err != nil {
			return
		}
		for name, hash := range h.byName {
			if _, err := bcrypt.Cost(hash); err != nil {
				t.Fatalf("%s: accepted a non-bcrypt hash", name)
			}
		}
	})
}
