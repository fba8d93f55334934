package devcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A state directory the daemons' users cannot traverse (what mktemp -d
// makes) is refused at once, naming the directory, its mode and the fix,
// before anything is created or started in it.
func TestUpRefusesUntraversableStateDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dev up needs root")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The parents t.TempDir made are 0700 too; open them so only dir is at fault.
	for d := filepath.Dir(dir); d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := t.TempDir() // no binaries: a refusal must come before that check
	start := time.Now()
	_, err := Up(context.Background(), Options{StateDir: dir, BinDir: bin, Hypervisors: []string{"fake"}})
	if err == nil {
		t.Fatal("dev up in a 0700 directory succeeded")
	}
	for _, want := range []string{dir, "0700", "chmod o+x " + dir, "corral-master"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("refusal took %v", d)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("dev up left %d entries in the refused directory", len(ents))
	}
}
