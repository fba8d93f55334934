package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/cephtest"
	"github.com/corral/corral/internal/ecode"
)

// TestRBDAgainstCeph drives the rbd backend against a real Ceph cluster:
// every operation is checked with Ceph's own tools, not with the backend.
func TestRBDAgainstCeph(t *testing.T) {
	c := cephtest.Start(t, cephtest.Options{})
	ctx := context.Background()
	r := NewRBD()
	params := map[string]string{RBDParamPool: c.Pool, RBDParamConf: c.Conf, RBDParamKeyring: c.Keyring, RBDParamAccess: RBDAccessUserspace}
	const inst = "0f1e2d3c-aaaa-bbbb-cccc-000000000001"
	d := Disk{UUID: "d1sk-0000", Index: 0, SizeMiB: 16, Template: TemplateRBD, Params: params}
	image := c.Pool + "/" + inst + ".d1sk-0000.rbd"
	sizeOf := func() string {
		out, err := c.Run("rbd", "info", "--format", "json", image)
		if err != nil {
			return "missing"
		}
		i := strings.Index(out, `"size":`)
		return strings.SplitN(out[i+7:], ",", 2)[0]
	}

	p, err := r.Create(ctx, inst, d, KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	if p != "rbd:"+image || r.Path(inst, d) != p {
		t.Errorf("path %q, Path %q, want rbd:%s", p, r.Path(inst, d), image)
	}
	if got := sizeOf(); got != "16777216" {
		t.Fatalf("size after create = %s", got)
	}
	// Create again: the same disk is success, another size is not.
	if _, err := r.Create(ctx, inst, d, KeepOwner()); err != nil {
		t.Errorf("repeated create: %v", err)
	}
	other := d
	other.SizeMiB = 32
	if _, err := r.Create(ctx, inst, other, KeepOwner()); ecode.ClassOf(err) != ecode.Exists {
		t.Errorf("create with another size: %v, want Exists", err)
	}

	if err := r.Grow(ctx, inst, d, 24); err != nil {
		t.Fatal(err)
	}
	if got := sizeOf(); got != "25165824" {
		t.Fatalf("size after grow = %s", got)
	}
	if err := r.Grow(ctx, inst, d, 24); err != nil {
		t.Errorf("grow to the same size: %v", err)
	}
	if err := r.Grow(ctx, inst, d, 8); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("shrink: %v, want Inval", err)
	}

	// Import bytes, export them back through the rbd tool and the backend.
	d.SizeMiB = 24
	want := make([]byte, 24<<20)
	if _, err := rand.Read(want[:1<<20]); err != nil { // the rest stays zero (sparse)
		t.Fatal(err)
	}
	copy(want[20<<20:], "marker at 20 MiB")
	src := filepath.Join(t.TempDir(), "src.raw")
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Import(ctx, inst, d, src); err != nil {
		t.Fatal(err)
	}
	byTool := filepath.Join(t.TempDir(), "tool.raw")
	if _, err := c.Run("rbd", "export", "--no-progress", image, byTool); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(byTool); !bytes.Equal(got, want) {
		t.Fatalf("image bytes after import differ (%d bytes)", len(got))
	}
	byBackend := filepath.Join(t.TempDir(), "backend.raw")
	if err := r.Export(ctx, inst, d, byBackend); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(byBackend); !bytes.Equal(got, want) {
		t.Fatal("exported bytes differ")
	}
	var streamed bytes.Buffer
	if err := r.ExportTo(ctx, inst, d, &streamed); err != nil || !bytes.Equal(streamed.Bytes(), want) {
		t.Fatalf("streamed export: %v, %d bytes", err, streamed.Len())
	}
	if ls, _ := c.Run("rbd", "ls", c.Pool); strings.TrimSpace(ls) != inst+".d1sk-0000.rbd" {
		t.Errorf("pool holds %q after import, want only the disk's image", ls)
	}

	// Rename: the image moves, and back.
	l, err := r.Location(inst, d)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Rename(ctx, l, l.Image, "renamed"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := r.Exists(ctx, inst, d); ok {
		t.Error("image still under its old name after rename")
	}
	if _, err := c.Run("rbd", "info", c.Pool+"/renamed"); err != nil {
		t.Errorf("renamed image: %v", err)
	}
	if err := r.Rename(ctx, l, "renamed", l.Image); err != nil {
		t.Fatal(err)
	}

	if err := r.Remove(ctx, inst, d); err != nil {
		t.Fatal(err)
	}
	if got := sizeOf(); got != "missing" {
		t.Errorf("image still there after remove (size %s)", got)
	}
	if err := r.Remove(ctx, inst, d); err != nil {
		t.Errorf("removing a missing image: %v", err)
	}
	if err := r.Grow(ctx, inst, d, 32); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("grow of a missing image: %v, want NoEnt", err)
	}
}

func TestRBDLocationChecksParams(t *testing.T) {
	dir := t.TempDir()
	kr := filepath.Join(dir, "keyring")
	if err := os.WriteFile(kr, []byte("[mon.]\n\tkey = AAAA\n[client.corral]\n\tkey = SECRETKEY==\n\tcaps mon = \"allow r\"\n[client.other]\n\tkey = OTHER==\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := NewRBD()
	base := map[string]string{RBDParamConf: "/etc/ceph/x.conf", RBDParamKeyring: kr}
	l, err := r.Location("inst-1", Disk{UUID: "d", Params: base})
	if err != nil {
		t.Fatal(err)
	}
	if l.Client != "corral" || l.Pool != RBDDefaultPool || l.Image != "inst-1.d.rbd" {
		t.Errorf("location %+v", l)
	}
	key, err := ClientKeyring(kr, "corral")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(key); !strings.Contains(s, "SECRETKEY") || strings.Contains(s, "OTHER") || strings.Contains(s, "mon.") {
		t.Errorf("client keyring holds more or less than its own section: %q", s)
	}
	for name, p := range map[string]map[string]string{
		"kernel access":    {RBDParamAccess: RBDAccessKernel},
		"relative conf":    {RBDParamConf: "ceph.conf"},
		"colon in keyring": {RBDParamKeyring: "/a:b"},
		"pool with slash":  {RBDParamPool: "a/b"},
	} {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range p {
			m[k] = v
		}
		if _, err := r.Location("inst-1", Disk{UUID: "d", Params: m}); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: %v, want Inval", name, err)
		}
	}
	for _, bad := range []string{"a.b", "a@b", ".x", "a/b"} {
		if _, err := r.Location(bad, Disk{UUID: "d", Params: base}); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("instance uuid %q: %v, want Inval", bad, err)
		}
		if _, err := r.Location("inst", Disk{UUID: bad, Params: base}); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("disk uuid %q: %v, want Inval", bad, err)
		}
	}
	if _, err := r.Location("inst", Disk{UUID: "d", Params: map[string]string{RBDParamKeyring: filepath.Join(dir, "none")}}); err == nil {
		t.Error("a missing keyring was accepted")
	}
}

// FuzzKeyringClient checks the keyring reader never returns a name that
// could break out of qemu's rbd option string.
func FuzzKeyringClient(f *testing.F) {
	f.Add("[client.admin]\n\tkey = X\n")
	f.Add("[ client.a:b ]\n[client.ok]\n")
	f.Add("[client.]\n")
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text string) {
		p := filepath.Join(dir, "kr")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		name, err := KeyringClient(p)
		if err != nil {
			return
		}
		if name == "" || strings.ContainsAny(name, ":/ \x00]") {
			t.Fatalf("client name %q from %q", name, text)
		}
	})
}
