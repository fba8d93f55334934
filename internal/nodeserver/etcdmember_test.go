package nodeserver

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestEtcdWrapper(t *testing.T) {
	for _, tc := range []struct {
		name, setpriv string
		want          []string
	}{
		{"as root", "/usr/bin/setpriv", []string{"exec '/usr/bin/setpriv' --reuid=120 --regid=121 --clear-groups --no-new-privs -- '/usr/bin/et'\\''cd' \"$@\""}},
		{"as the caller", "", []string{"exec '/usr/bin/et'\\''cd' \"$@\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := etcdWrapper("/usr/bin/et'cd", 120, 121, tc.setpriv)
			if !strings.HasPrefix(w, "#!/bin/sh\n") {
				t.Fatalf("wrapper %q is no shell script", w)
			}
			for _, s := range append(tc.want, "--client-cert-allowed-hostname=corral-etcd-client", "--peer-cert-allowed-hostname=corral-etcd-peer") {
				if !strings.Contains(w, s) {
					t.Errorf("wrapper %q lacks %q", w, s)
				}
			}
		})
	}
}

// runningEtcd trusts no pid file by itself: the process must be etcd on
// the member's data directory.
func TestRunningEtcd(t *testing.T) {
	dir := t.TempDir()
	if pid := runningEtcd(dir); pid != 0 {
		t.Fatalf("no pid file: pid %d", pid)
	}
	// This test process is alive but is no etcd of that directory.
	if err := os.WriteFile(filepath.Join(dir, "etcd.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid := runningEtcd(dir); pid != 0 {
		t.Fatalf("a stranger's pid was taken for the member: %d", pid)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd.pid"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if pid := runningEtcd(dir); pid != 0 {
		t.Fatalf("garbage pid file: %d", pid)
	}
}
