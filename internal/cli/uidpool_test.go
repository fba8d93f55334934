package cli

import (
	"strings"
	"testing"
)

func TestClusterModifyUIDPool(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "cluster", "modify", "--uid-pool", "2000-2009, 1000", "--add-uids", "3000", "--remove-uids", "1000")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	ops := f.submitted()
	want := `{"OP_ID":"OP_CLUSTER_SET_PARAMS","uid_pool":[[1000,1000],[2000,2009]],"add_uids":[[3000,3000]],"remove_uids":[[1000,1000]]}`
	if len(ops) != 1 || !sameJSON(t, ops[0], want) {
		got, _ := jsonText(ops)
		t.Fatalf("opcodes %s, want %s", got, want)
	}

	// An empty --uid-pool clears the pool.
	f = newFake(t)
	if r := f.run(t, "cluster", "modify", "--uid-pool", ""); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if ops := f.submitted(); len(ops) != 1 || !sameJSON(t, ops[0], `{"OP_ID":"OP_CLUSTER_SET_PARAMS","uid_pool":[]}`) {
		got, _ := jsonText(ops)
		t.Fatalf("opcodes %s", got)
	}

	for _, bad := range [][]string{{"--uid-pool", "9-1"}, {"--add-uids", "1-2-3"}, {"--remove-uids", "x"}} {
		f := newFake(t)
		r := f.run(t, append([]string{"cluster", "modify"}, bad...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, bad[0]) {
			t.Errorf("%q: exit %d, stderr %q", bad, r.code, r.stderr)
		}
		if n := f.callCount(); n != 0 {
			t.Errorf("%q: %d calls made to the master", bad, n)
		}
	}
}
