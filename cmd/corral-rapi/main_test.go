package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRefusesBadFlags: the front's own flags and the RAPI's registered
// ones are checked before anything listens.
func TestRunRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("admin x write\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// --allow-root: the tests may run as root, which is refused otherwise.
	base := []string{"--allow-root", "--users", users, "--cert", filepath.Join(dir, "none.crt"), "--key", filepath.Join(dir, "none.key"), "--port", "0"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--luxi-socket is required"},
		{[]string{"--luxi-socket", ""}, "empty socket path"},
		{[]string{"--luxi-socket", "/a", "--luxi-socket", "/b", "--max-clients", "0"}, "--max-clients must be at least 1"},
		{[]string{"--luxi-socket", "/a", "--users", filepath.Join(dir, "missing")}, "reading users file"},
		{[]string{"--luxi-socket", "/a"}, "RAPI: loading TLS key pair"},
	} {
		err := run(append(append([]string{}, base...), tc.args...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
