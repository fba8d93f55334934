package bootstrap

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckTraversable(t *testing.T) {
	top := t.TempDir()
	for d := top; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	deep := filepath.Join(top, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(top, "a", "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckTraversable(deep); err != nil {
		t.Fatalf("0755 path refused: %v", err)
	}
	// A closed parent is named, not the directory asked about.
	if err := os.Chmod(filepath.Join(top, "a"), 0o750); err != nil {
		t.Fatal(err)
	}
	err := CheckTraversable(deep)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(top, "a")+" has mode 0750") || !strings.Contains(err.Error(), "chmod o+x "+filepath.Join(top, "a")) {
		t.Fatalf("closed parent: %v", err)
	}
	// Through a symlink, the real directory is judged.
	link := filepath.Join(top, "link")
	if err := os.Symlink(deep, link); err != nil {
		t.Fatal(err)
	}
	if err := CheckTraversable(link); err == nil {
		t.Fatal("symlink to a closed path accepted")
	}
}
