package nodeserver

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func writeImport(t *testing.T, d exportDir, name, file, content string) string {
	t.Helper()
	p, err := d.importPath(name, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExportLifecycle(t *testing.T) {
	d := exportDir{dir: filepath.Join(t.TempDir(), "export"), node: "node1"}
	if names, err := d.list(); err != nil || len(names) != 0 {
		t.Fatalf("empty dir: %v %v", names, err)
	}
	p := writeImport(t, d, "inst1.example.com", "disk0", "first")
	if want := filepath.Join(d.dir, "inst1.example.com.new", "disk0"); p != want {
		t.Fatalf("import path %s, want %s", p, want)
	}
	if m := mode(t, filepath.Dir(p)); m != 0o700 {
		t.Errorf("build dir mode %o", m)
	}
	// Being built: not an export yet.
	if names, _ := d.list(); len(names) != 0 {
		t.Fatalf("an export being built is listed: %v", names)
	}
	if _, _, err := d.info("inst1.example.com"); ecode.ClassOf(err) != ecode.NoEnt ||
		!strings.Contains(err.Error(), "no export of instance inst1.example.com on node node1") {
		t.Fatalf("info before finalize: %v", err)
	}
	if err := d.finalize("inst1.example.com", "[export]\nversion = 0\n"); err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(d.dir, "inst1.example.com")
	if m := mode(t, filepath.Join(final, exportConfigFile)); m != 0o600 {
		t.Errorf("config.ini mode %o", m)
	}
	if names, _ := d.list(); !reflect.DeepEqual(names, []string{"inst1.example.com"}) {
		t.Fatalf("list %v", names)
	}
	path, cfg, err := d.info("inst1.example.com")
	if err != nil || path != final || cfg != "[export]\nversion = 0\n" {
		t.Fatalf("info: %q %q %v", path, cfg, err)
	}
	// A second export replaces the first whole: its files, not a merge.
	writeImport(t, d, "inst1.example.com", "disk1", "second")
	if err := d.finalize("inst1.example.com", "[export]\nversion = 1\n"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(final, "disk0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old export's file survived: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(final, "disk1")); err != nil || string(data) != "second" {
		t.Fatalf("new file: %q %v", data, err)
	}
	if _, cfg, _ := d.info("inst1.example.com"); !strings.Contains(cfg, "version = 1") {
		t.Fatalf("config %q", cfg)
	}
	entries, _ := os.ReadDir(d.dir)
	if len(entries) != 1 {
		t.Fatalf("leftovers in the export dir: %v", entries)
	}
	if err := d.finalize("inst1.example.com", "x"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("finalize with nothing built: %v", err)
	}
	if err := d.remove("inst1.example.com"); err != nil {
		t.Fatal(err)
	}
	if err := d.remove("inst1.example.com"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("second remove: %v", err)
	}
	if names, _ := d.list(); len(names) != 0 {
		t.Fatalf("list after remove: %v", names)
	}
}

// Names from the network never leave the export directory.
func TestExportBadNames(t *testing.T) {
	base := t.TempDir()
	d := exportDir{dir: filepath.Join(base, "export"), node: "node1"}
	victim := filepath.Join(base, "victim")
	if err := os.MkdirAll(filepath.Join(victim, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "x", exportConfigFile), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	badNames := []string{"", ".", "..", "../victim", "../victim/x", "/etc", "a/b", ".hidden", "-x", "a b", "a\x00", "inst1.new"}
	for _, n := range badNames {
		if _, err := d.importPath(n, "disk0"); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("importPath(%q): %v", n, err)
		}
		if _, err := d.exportPath(n, "disk0"); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("exportPath(%q): %v", n, err)
		}
		if _, _, err := d.info(n); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("info(%q): %v", n, err)
		}
		if err := d.remove(n); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("remove(%q): %v", n, err)
		}
		if err := d.finalize(n, "x"); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("finalize(%q): %v", n, err)
		}
	}
	for _, f := range []string{"", ".", "..", "../x", "a/b", "..disk", "disk..0", ".disk0", "/etc/passwd", exportConfigFile, "a\nb"} {
		if _, err := d.importPath("inst1", f); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("importPath file %q: %v", f, err)
		}
		if _, err := d.exportPath("inst1", f); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("exportPath file %q: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(victim, "x", exportConfigFile)); err != nil {
		t.Fatalf("victim touched: %v", err)
	}
}

// FuzzExportPaths: whatever the names, an accepted path is a file directly
// inside one export's directory.
func FuzzExportPaths(f *testing.F) {
	for _, s := range [][2]string{{"inst1", "disk0"}, {"..", "disk0"}, {"inst1", "../x"}, {"a.b", "c.d"}, {"x", "config.ini"}} {
		f.Add(s[0], s[1])
	}
	d := exportDir{dir: "/srv/export", node: "n"}
	f.Fuzz(func(t *testing.T, name, file string) {
		p, err := d.exportPath(name, file)
		if err != nil {
			return
		}
		rel, err := filepath.Rel(d.dir, p)
		if err != nil || strings.HasPrefix(rel, "..") || filepath.Dir(filepath.Dir(p)) != d.dir ||
			filepath.Base(p) != file || filepath.Base(filepath.Dir(p)) != name {
			t.Fatalf("name %q file %q gave %s", name, file, p)
		}
	})
}
