package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func TestUsersFile(t *testing.T) {
	h1, _ := bcrypt.GenerateFromPassword([]byte("pw1"), bcrypt.MinCost)
	h2, _ := bcrypt.GenerateFromPassword([]byte("pw2"), bcrypt.MinCost)
	u, err := ParseUsers([]byte("# users\n\nalice:" + string(h1) + ":proj-a\nroot:" + string(h2) + ":ops:admin\nalice:" + string(h2) + ":other\n"))
	if err != nil || u.Len() != 2 {
		t.Fatalf("parse: %v %v", u, err)
	}
	a := NewBasicAuth(u)
	for _, c := range []struct {
		user, pw string
		ok       bool
		want     Caller
	}{
		{"alice", "pw1", true, Caller{User: "alice", Project: "proj-a"}},
		{"alice", "pw2", false, Caller{}}, // the first line of a name wins
		{"root", "pw2", true, Caller{User: "root", Project: "ops", Admin: true}},
		{"root", "pw1", false, Caller{}},
		{"bob", "pw1", false, Caller{}},
	} {
		r := httptest.NewRequest("GET", "/v1/clusters", nil)
		r.SetBasicAuth(c.user, c.pw)
		got, ok := a.Authenticate(r)
		if ok != c.ok || got != c.want {
			t.Errorf("%s/%s: %+v %v, want %+v %v", c.user, c.pw, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{"alice:" + string(h1), "alice:" + string(h1) + ":", "alice:" + string(h1) + ":p:root",
		"alice:{SHA}abc:p", ":" + string(h1) + ":p", "a:b:c:d:e"} {
		if _, err := ParseUsers([]byte(bad + "\n")); err == nil {
			t.Errorf("accepted %q", bad)
		} else if strings.Contains(err.Error(), string(h1)) {
			t.Errorf("error shows the hash: %v", err)
		}
	}
}

func FuzzParseUsers(f *testing.F) {
	f.Add("alice:$2y$04$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234:p\n")
	f.Add("a:b:c:admin\n# x\n")
	f.Fuzz(func(t *testing.T, data string) {
		u, err := ParseUsers([]byte(data))
		if err != nil {
			return
		}
		for name, e := range u.byName {
			if name == "" || e.project == "" || strings.Contains(e.project, ":") {
				t.Fatalf("accepted user %q with project %q", name, e.project)
			}
		}
	})
}
