package osapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

const okScript = "#!/bin/sh\nexit 0\n"

// writeFile creates path (and its parents) with the given content and mode.
func writeFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // WriteFile honours umask
		t.Fatal(err)
	}
}

// makeOS writes a valid API 20 definition with two variants and two
// parameters; scripts overrides individual script bodies.
func makeOS(t *testing.T, searchDir, name string, scripts map[string]string) string {
	t.Helper()
	dir := filepath.Join(searchDir, name)
	writeFile(t, filepath.Join(dir, APIVersionFile), "20\n15\n", 0o644)
	writeFile(t, filepath.Join(dir, VariantsFile), "# comment\ndefault\n\n  minimal  \n", 0o644)
	writeFile(t, filepath.Join(dir, ParametersFile), "dhcp\tWhether to use DHCP\nroot-password   The root  password \n", 0o644)
	for _, s := range []string{ScriptCreate, ScriptExport, ScriptImport, ScriptRename, ScriptVerify} {
		body := okScript
		if b, ok := scripts[s]; ok {
			body = b
		}
		writeFile(t, filepath.Join(dir, s), body, 0o755)
	}
	return dir
}

func TestDiscover(t *testing.T) {
	type check func(t *testing.T, o OS)
	valid := func(t *testing.T, o OS) {
		t.Helper()
		if !o.Valid || o.Error != "" {
			t.Fatalf("want valid, got Valid=%v Error=%q", o.Valid, o.Error)
		}
	}
	invalid := func(substr string) check {
		return func(t *testing.T, o OS) {
			t.Helper()
			if o.Valid {
				t.Fatalf("want invalid (%s), got valid", substr)
			}
			if !strings.Contains(o.Error, substr) {
				t.Fatalf("error %q does not mention %q", o.Error, substr)
			}
			if o.APIVersion != 0 || o.Variants != nil || o.Parameters != nil {
				t.Fatalf("invalid OS carries data: %+v", o)
			}
		}
	}
	tests := []struct {
		name   string
		mutate func(t *testing.T, dir string)
		check  check
	}{
		{"valid", func(*testing.T, string) {}, func(t *testing.T, o OS) {
			valid(t, o)
			if o.APIVersion != 20 || !reflect.DeepEqual(o.APIVersions, []int{20, 15}) {
				t.Errorf("api: %d %v", o.APIVersion, o.APIVersions)
			}
			if !reflect.DeepEqual(o.Variants, []string{"default", "minimal"}) {
				t.Errorf("variants: %q", o.Variants)
			}
			want := [][2]string{{"dhcp", "Whether to use DHCP"}, {"root-password", "The root  password"}}
			if !reflect.DeepEqual(o.Parameters, want) {
				t.Errorf("parameters: %q", o.Parameters)
			}
			if !o.Trusted {
				t.Error("want trusted")
			}
		}},
		{"missing api file", func(t *testing.T, d string) { rm(t, d, APIVersionFile) }, invalid(APIVersionFile)},
		{"api file is a directory", func(t *testing.T, d string) {
			rm(t, d, APIVersionFile)
			if err := os.Mkdir(filepath.Join(d, APIVersionFile), 0o755); err != nil {
				t.Fatal(err)
			}
		}, invalid("not a regular file")},
		{"unsupported api version", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, APIVersionFile), "5\n30\n", 0o644)
		}, invalid("API version mismatch")},
		{"non-numeric api version", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, APIVersionFile), "twenty\n", 0o644)
		}, invalid("not an integer")},
		{"missing create", func(t *testing.T, d string) { rm(t, d, ScriptCreate) }, invalid("'create'")},
		{"missing rename", func(t *testing.T, d string) { rm(t, d, ScriptRename) }, invalid("'rename' under")},
		{"missing verify at api 20", func(t *testing.T, d string) { rm(t, d, ScriptVerify) }, invalid("'verify' under")},
		{"non-executable export", func(t *testing.T, d string) {
			if err := os.Chmod(filepath.Join(d, ScriptExport), 0o644); err != nil {
				t.Fatal(err)
			}
		}, invalid("'export' under " + "")},
		{"script is a directory", func(t *testing.T, d string) {
			rm(t, d, ScriptImport)
			if err := os.Mkdir(filepath.Join(d, ScriptImport), 0o755); err != nil {
				t.Fatal(err)
			}
		}, invalid("not a regular file")},
		{"missing parameters at api 20", func(t *testing.T, d string) { rm(t, d, ParametersFile) }, invalid(ParametersFile)},
		{"missing variants is fine", func(t *testing.T, d string) { rm(t, d, VariantsFile) }, func(t *testing.T, o OS) {
			valid(t, o)
			if o.Variants != nil {
				t.Errorf("variants: %q", o.Variants)
			}
		}},
		{"untrusted", func(t *testing.T, d string) {
			rm(t, d, ScriptCreate)
			writeFile(t, filepath.Join(d, ScriptCreateUntrusted), okScript, 0o755)
		}, func(t *testing.T, o OS) {
			valid(t, o)
			if o.Trusted {
				t.Error("want untrusted")
			}
		}},
		{"api 10 needs no verify, parameters or variants", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, APIVersionFile), "10\n", 0o644)
			rm(t, d, ScriptVerify)
			rm(t, d, ParametersFile)
		}, func(t *testing.T, o OS) {
			valid(t, o)
			if o.APIVersion != 10 || o.Variants != nil || o.Parameters != nil {
				t.Errorf("api 10 OS: %+v", o)
			}
		}},
		{"api 15 reads variants but not parameters", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, APIVersionFile), "15\n", 0o644)
			rm(t, d, ScriptVerify)
		}, func(t *testing.T, o OS) {
			valid(t, o)
			if o.APIVersion != 15 || len(o.Variants) != 2 || o.Parameters != nil {
				t.Errorf("api 15 OS: %+v", o)
			}
		}},
		{"unknown version next to a known one", func(t *testing.T, d string) {
			writeFile(t, filepath.Join(d, APIVersionFile), "25\n15\n", 0o644)
		}, func(t *testing.T, o OS) {
			valid(t, o)
			// The highest declared version (25) decides which files are
			// required, so verify and parameters.list still are.
			if o.APIVersion != 15 || o.Parameters == nil {
				t.Errorf("OS: %+v", o)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			search := t.TempDir()
			dir := makeOS(t, search, "debootstrap", nil)
			tt.mutate(t, dir)
			got, err := Discover([]string{search})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Name != "debootstrap" || got[0].Path != dir {
				t.Fatalf("Discover: %+v", got)
			}
			tt.check(t, got[0])
		})
	}
}

func rm(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func TestDiscoverSearchPath(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	makeOS(t, first, "alpha", nil)
	shadowed := makeOS(t, second, "alpha", nil)
	rm(t, shadowed, ScriptCreate) // would be invalid, but first one wins
	makeOS(t, second, "beta", nil)
	makeOS(t, second, ".hidden", nil)
	writeFile(t, filepath.Join(second, "notadir"), "x", 0o644)
	if err := os.Symlink(filepath.Join(second, "beta"), filepath.Join(first, "gamma")); err != nil {
		t.Fatal(err)
	}
	// A search path entry that is a file is as unused as a missing one.
	fileInPath := filepath.Join(t.TempDir(), "plainfile")
	writeFile(t, fileInPath, "x", 0o644)

	got, err := Discover([]string{filepath.Join(first, "missing"), fileInPath, first, second})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range got {
		names = append(names, o.Name)
		if !o.Valid {
			t.Errorf("%s invalid: %s", o.Name, o.Error)
		}
	}
	if want := []string{"alpha", "beta", "gamma"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names %q, want %q", names, want)
	}
	if got[0].Path != filepath.Join(first, "alpha") {
		t.Errorf("alpha from %s, want the first search dir", got[0].Path)
	}
}

func TestDiscoverUnreadableDir(t *testing.T) {
	good := t.TempDir()
	makeOS(t, good, "alpha", nil)
	// Permissions cannot make a directory unreadable for root, so use a path
	// ReadDir rejects for a reason other than absence.
	got, err := Discover([]string{"/bad\x00dir", good})
	if err == nil {
		t.Fatal("want an error for the unreadable directory")
	}
	if len(got) != 1 || got[0].Name != "alpha" {
		t.Fatalf("other directories must still be listed: %+v", got)
	}
}

func TestFind(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	makeOS(t, second, "debootstrap", nil)
	bad := makeOS(t, first, "broken", nil)
	rm(t, bad, ScriptImport)
	search := []string{first, second}

	o, err := Find(search, "debootstrap+minimal")
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "debootstrap" || o.Path != filepath.Join(second, "debootstrap") || !o.Valid {
		t.Fatalf("Find: %+v", o)
	}

	_, err = Find(search, "nope+x")
	e, ok := ecode.As(err)
	if !ok || e.Class != ecode.NoEnt || e.Msg != "OS 'nope' not found on this node" {
		t.Fatalf("missing OS: %#v", err)
	}

	o, err = Find(search, "broken")
	if e, ok := ecode.As(err); !ok || e.Class != ecode.Environ || !strings.Contains(e.Msg, "'import'") {
		t.Fatalf("invalid OS: %v", err)
	}
	if o == nil || o.Valid {
		t.Fatalf("invalid OS must be returned for diagnosis: %+v", o)
	}

	for _, name := range []string{"", "../etc", "a/b", ".hidden", "+v"} {
		if _, err := Find(search, name); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("Find(%q): %v, want Inval", name, err)
		}
	}
}

func TestSplitName(t *testing.T) {
	for _, tt := range []struct{ in, name, variant string }{
		{"debootstrap", "debootstrap", ""},
		{"debootstrap+buster", "debootstrap", "buster"},
		{"a+b+c", "a", "b+c"},
		{"a+", "a", ""},
		{"", "", ""},
	} {
		n, v := SplitName(tt.in)
		if n != tt.name || v != tt.variant {
			t.Errorf("SplitName(%q) = %q, %q", tt.in, n, v)
		}
	}
}

func TestCheckVariant(t *testing.T) {
	withV := &OS{Name: "deb", APIVersion: 20, Variants: []string{"default", "minimal"}}
	noV := &OS{Name: "img", APIVersion: 20}
	api10 := &OS{Name: "old", APIVersion: 10, Variants: []string{"x"}}
	tests := []struct {
		os      *OS
		variant string
		force   bool
		want    string
		wantErr bool
	}{
		{withV, "minimal", false, "minimal", false},
		{withV, "", false, "", true},
		{withV, "", true, "default", false},
		{withV, "bogus", false, "", true},
		{withV, "bogus", true, "bogus", false},
		{noV, "", false, "", false},
		{noV, "x", false, "", true},
		{noV, "x", true, "", false},
		{api10, "", false, "", false},
	}
	for _, tt := range tests {
		got, err := tt.os.CheckVariant(tt.variant, tt.force)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s.CheckVariant(%q, %v) = %q, %v", tt.os.Name, tt.variant, tt.force, got, err)
		}
		if err != nil && ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("class %s, want Inval", ecode.ClassOf(err))
		}
	}
}

func TestCheckParams(t *testing.T) {
	o := &OS{Name: "deb", APIVersion: 20, Parameters: [][2]string{{"dhcp", ""}, {"root-password", ""}}}
	if err := o.CheckParams(map[string]string{"dhcp": "yes", "root-password": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := o.CheckParams(nil); err != nil {
		t.Fatal(err)
	}
	err := o.CheckParams(map[string]string{"zz": "1", "dhcp": "no", "aa": "2"})
	e, ok := ecode.As(err)
	if !ok || e.Class != ecode.Inval || !strings.HasSuffix(e.Msg, "OS deb: aa, zz") {
		t.Fatalf("unknown params: %v", err)
	}
	old := &OS{Name: "old", APIVersion: 15}
	if err := old.CheckParams(map[string]string{"anything": "1"}); err != nil {
		t.Fatalf("API < 20 is not checked: %v", err)
	}
}

// TestDefaultSearchPathEndsWithGanetis checks that the default path lists
// Corral's directories first and then Ganeti's OS_SEARCH_PATH in Ganeti's
// order, so packaged Ganeti OS definitions are found.
func TestDefaultSearchPathEndsWithGanetis(t *testing.T) {
	ganeti := []string{"/srv/ganeti/os", "/usr/local/lib/ganeti/os", "/usr/lib/ganeti/os", "/usr/share/ganeti/os"}
	got := DefaultSearchPath()
	if len(got) <= len(ganeti) {
		t.Fatalf("DefaultSearchPath() = %q: want Corral's directories before Ganeti's", got)
	}
	corral, tail := got[:len(got)-len(ganeti)], got[len(got)-len(ganeti):]
	if !reflect.DeepEqual(tail, ganeti) {
		t.Fatalf("DefaultSearchPath() ends with %q, want Ganeti's %q", tail, ganeti)
	}
	for _, d := range corral {
		if !strings.Contains(d, "/corral/") {
			t.Errorf("%s precedes Ganeti's directories but is not one of Corral's", d)
		}
	}
}

// TestFindInLaterDirAndEarlierWins lays out a search path shaped like the
// default one (Corral's directories, then Ganeti's): an OS only in a Ganeti
// directory is found, and on a name clash the earlier directory's
// definition is used, even when the later one is the valid one.
func TestFindInLaterDirAndEarlierWins(t *testing.T) {
	root := t.TempDir()
	var search []string
	for _, d := range DefaultSearchPath() {
		search = append(search, filepath.Join(root, d))
	}
	ganetiShare := search[len(search)-1]
	corralSrv := search[0]
	makeOS(t, ganetiShare, "noop", nil)
	makeOS(t, ganetiShare, "debootstrap", nil)
	ours := makeOS(t, corralSrv, "debootstrap", nil)
	rm(t, ours, ScriptRename) // the earlier definition wins even when broken

	o, err := Find(search, "noop")
	if err != nil || o.Path != filepath.Join(ganetiShare, "noop") {
		t.Fatalf("OS in the last directory: %+v, %v", o, err)
	}
	o, err = Find(search, "debootstrap")
	if ecode.ClassOf(err) != ecode.Environ || o == nil || o.Path != ours {
		t.Fatalf("name clash: got %+v, %v; want the earlier (invalid) definition %s", o, err, ours)
	}
	all, err := Discover(search)
	if err != nil {
		t.Fatal(err)
	}
	paths := map[string]string{}
	for _, o := range all {
		paths[o.Name] = o.Path
	}
	if paths["noop"] != filepath.Join(ganetiShare, "noop") || paths["debootstrap"] != ours {
		t.Fatalf("Discover: %q", paths)
	}
}

// TestDebianGanetiNoopOS runs the OS definition Debian's ganeti-os-noop
// package installs (API versions 5 and 10, no variants or parameters)
// through Corral's OS API: it is found via the default path's Ganeti
// directory, its create script runs, and export and import stream a disk.
func TestDebianGanetiNoopOS(t *testing.T) {
	const dir = "/usr/share/ganeti/os"
	if _, err := os.Stat(filepath.Join(dir, "noop", APIVersionFile)); err != nil {
		t.Skipf("Debian's ganeti-os-noop is not installed: %v", err)
	}
	if !slices.Contains(DefaultSearchPath(), dir) {
		t.Fatalf("%s is not in the default search path", dir)
	}
	o, err := Find([]string{t.TempDir(), dir}, "noop")
	if err != nil {
		t.Fatal(err)
	}
	if o.APIVersion != APIv10 || len(o.Variants) != 0 || len(o.Parameters) != 0 {
		t.Fatalf("noop: %+v", o)
	}
	r := &Runner{LogDir: filepath.Join(t.TempDir(), "os"), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	src, dst := filepath.Join(t.TempDir(), "src.raw"), filepath.Join(t.TempDir(), "dst.raw")
	payload := make([]byte, 2<<20)
	rand.Read(payload)
	if err := os.WriteFile(src, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	// noop's import writes with conv=nocreat: the disk must exist.
	if err := os.WriteFile(dst, make([]byte, len(payload)), 0o600); err != nil {
		t.Fatal(err)
	}
	inst := testInstance()
	inst.OS = "noop"
	inst.Disks[0].Path = src
	if _, err := r.RunCreate(context.Background(), o, inst, false); err != nil {
		t.Fatalf("create: %v", err)
	}
	var out bytes.Buffer
	if _, err := r.RunExport(context.Background(), o, inst, 0, &out); err != nil {
		t.Fatalf("export: %v", err)
	}
	if !bytes.Equal(out.Bytes(), payload) {
		t.Fatalf("export streamed %d bytes, want the %d-byte disk", out.Len(), len(payload))
	}
	inst.Disks[0].Path = dst
	if _, err := r.RunImport(context.Background(), o, inst, 0, bytes.NewReader(payload)); err != nil {
		t.Fatalf("import: %v", err)
	}
	if got, _ := os.ReadFile(dst); !bytes.Equal(got, payload) {
		t.Fatal("import did not write the streamed disk")
	}
}

func TestOSVersionFile(t *testing.T) {
	search := t.TempDir()
	makeOS(t, search, "withver", nil)
	writeFile(t, filepath.Join(search, "withver", VersionFile), "  2.4-1  \nignored second line\n", 0o644)
	makeOS(t, search, "nover", nil)
	o, err := Find([]string{search}, "withver")
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != "2.4-1" {
		t.Fatalf("os_version: got %q, want the first line trimmed", o.Version)
	}
	o, err = Find([]string{search}, "nover")
	if err != nil || o.Version != "" {
		t.Fatalf("no os_version file: %+v %v", o, err)
	}
	if err := os.Mkdir(filepath.Join(search, "nover", VersionFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if o, err := Find([]string{search}, "nover"); err == nil || o.Valid {
		t.Fatalf("an os_version that is not a file must make the definition invalid: %+v", o)
	}
}
