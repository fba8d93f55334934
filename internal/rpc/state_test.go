package rpc

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestEpochStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "epoch")
	s, err := openEpoch(path)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		epoch int64
		ok    bool
		after int64
	}{
		{0, true, 0}, {4, true, 4}, {4, true, 4}, {3, false, 4}, {9, true, 9}, {0, false, 9},
	}
	for _, st := range steps {
		err := s.admit(st.epoch, func(int64) error { return nil })
		if (err == nil) != st.ok || s.get() != st.after {
			t.Fatalf("admit(%d) = %v, epoch %d; want ok=%v, %d", st.epoch, err, s.get(), st.ok, st.after)
		}
		if err != nil && ecode.ClassOf(err) != ecode.State {
			t.Fatalf("refusal class %s", ecode.ClassOf(err))
		}
	}
	again, err := openEpoch(path)
	if err != nil || again.get() != 9 {
		t.Fatalf("reopened: %d, %v", again.get(), err)
	}
	// A refused raise leaves the epoch, and the file, as they were.
	if err := s.admit(12, func(int64) error { return errNoGrant }); err != errNoGrant || s.get() != 9 {
		t.Fatalf("refused raise: %v, epoch %d", err, s.get())
	}
	if again, _ := openEpoch(path); again.get() != 9 {
		t.Fatalf("refused raise reached the file: %d", again.get())
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("epoch file mode %o", fi.Mode().Perm())
	}
	// A damaged epoch file stops the daemon instead of opening the fence.
	os.WriteFile(path, []byte("garbage"), 0o600)
	if _, err := openEpoch(path); err == nil {
		t.Fatal("damaged epoch file accepted")
	}
}

func TestOpStoreExpiryAndPrune(t *testing.T) {
	dir := t.TempDir()
	ops, err := newOpStore(dir, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ops.now = func() time.Time { return now }
	key := opKey("m", "op")
	if err := ops.save(key, opRecord{Method: "m", Op: "op", Time: now.Add(-30 * time.Minute), Status: 200, Body: []byte(`{"ok":true}`)}); err != nil {
		t.Fatal(err)
	}
	rec, _, err := ops.begin(context.Background(), key)
	if err != nil || rec == nil || string(rec.Body) != `{"ok":true}` {
		t.Fatalf("fresh record: %+v, %v", rec, err)
	}
	// Past the TTL the record no longer answers.
	now = now.Add(time.Hour)
	rec, done, err := ops.begin(context.Background(), key)
	if err != nil || rec != nil {
		t.Fatalf("expired record answered: %+v, %v", rec, err)
	}
	done()

	// prune goes by file age.
	old, fresh := opKey("m", "old"), opKey("m", "fresh")
	for _, k := range []string{old, fresh} {
		if err := ops.save(k, opRecord{Method: "m", Op: k, Time: now, Status: 200, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	stale := now.Add(-2 * time.Hour)
	os.Chtimes(ops.path(old), stale, stale)
	n, err := ops.prune()
	if err != nil || n != 1 {
		t.Fatalf("prune removed %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(ops.path(old)); !os.IsNotExist(err) {
		t.Fatal("old record survived prune")
	}
	if _, err := os.Stat(ops.path(fresh)); err != nil {
		t.Fatal("fresh record pruned")
	}
}

func TestOpStoreCorruptRecordRefuses(t *testing.T) {
	ops, err := newOpStore(t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	key := opKey("m", "op")
	os.WriteFile(ops.path(key), []byte("{"), 0o600)
	if _, _, err := ops.begin(context.Background(), key); err == nil {
		t.Fatal("corrupt record was ignored; the operation could run twice")
	}
}

func TestOpKeyIncludesMethod(t *testing.T) {
	if opKey("a", "x") == opKey("b", "x") || opKey("a", "x") == opKey("a", "y") {
		t.Fatal("keys collide")
	}
	// The separator keeps ("ab","c") and ("a","bc") apart.
	if opKey("ab", "c") == opKey("a", "bc") {
		t.Fatal("keys collide across the separator")
	}
}

func FuzzParseEpoch(f *testing.F) {
	for _, s := range []string{"0", "17", "-1", "-0", "+1", "", "99999999999999999999", " 3", "3\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseEpoch(s)
		if err != nil {
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("class %s", ecode.ClassOf(err))
			}
			return
		}
		for _, c := range s {
			if c < '0' || c > '9' {
				t.Fatalf("parseEpoch accepted %q as %d", s, n)
			}
		}
		if m, err := parseEpochFile([]byte(strconv.FormatInt(n, 10) + "\n")); err != nil || m != n {
			t.Fatalf("epoch file round trip of %d: %d, %v", n, m, err)
		}
	})
}
