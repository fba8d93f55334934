package storage

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

const inst = "6f1c-inst"

func newFile(t *testing.T) *File {
	t.Helper()
	return NewFile(filepath.Join(t.TempDir(), "file-storage"))
}

func stat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func wantClass(t *testing.T, err error, c ecode.Class) {
	t.Helper()
	if err == nil {
		t.Fatalf("want a %s error, got none", c)
	}
	if got := ecode.ClassOf(err); got != c {
		t.Fatalf("want class %s, got %s (%v)", c, got, err)
	}
}

func TestFileCreateIsSparse(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	d := Disk{UUID: "d0", Index: 0, SizeMiB: 256, Template: TemplateFile}
	p, err := f.Create(ctx, inst, d, KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(f.Dir(), inst, "d0.raw"); p != want || f.Path(inst, d) != want {
		t.Fatalf("path %s / %s, want %s", p, f.Path(inst, d), want)
	}
	st := stat(t, p)
	if st.Size != 256<<20 {
		t.Fatalf("size %d", st.Size)
	}
	if st.Blocks*512 >= 1<<20 {
		t.Fatalf("not sparse: %d bytes allocated", st.Blocks*512)
	}
	if st.Mode&0o777 != 0o600 {
		t.Errorf("file mode %o", st.Mode&0o777)
	}
	for _, dir := range []string{f.Dir(), filepath.Join(f.Dir(), inst)} {
		if m := stat(t, dir).Mode & 0o777; m != dirMode {
			t.Errorf("%s mode %o", dir, m)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(f.Dir(), inst))
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
}

func TestFileCreateIdempotent(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	d := Disk{UUID: "d0", SizeMiB: 8}
	p1, err := f.Create(ctx, inst, d, KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p1+".marker", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	fh, _ := os.OpenFile(p1, os.O_WRONLY, 0)
	fh.WriteAt([]byte("data"), 0)
	fh.Close()

	p2, err := f.Create(ctx, inst, d, KeepOwner())
	if err != nil || p2 != p1 {
		t.Fatalf("repeat create: %q %v", p2, err)
	}
	if b, _ := os.ReadFile(p1); string(b[:4]) != "data" {
		t.Fatal("repeat create must not touch the content")
	}

	d.SizeMiB = 16
	_, err = f.Create(ctx, inst, d, KeepOwner())
	wantClass(t, err, ecode.Exists)
	if stat(t, p1).Size != 8<<20 {
		t.Fatal("a mismatching create changed the file")
	}
}

func TestFileCreateConcurrent(t *testing.T) {
	f := newFile(t)
	d := Disk{UUID: "d0", SizeMiB: 4}
	var wg sync.WaitGroup
	paths := make([]string, 8)
	errs := make([]error, 8)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = f.Create(context.Background(), inst, d, KeepOwner()) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("create %d: %q %v", i, paths[i], errs[i])
		}
	}
	entries, _ := os.ReadDir(filepath.Join(f.Dir(), inst))
	if len(entries) != 1 || stat(t, paths[0]).Size != 4<<20 {
		t.Fatalf("entries %v", entries)
	}
}

func TestFileCreateOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	f := newFile(t)
	p, err := f.Create(context.Background(), inst, Disk{UUID: "d0", SizeMiB: 1}, Owner{UID: 4321, GID: 8765})
	if err != nil {
		t.Fatal(err)
	}
	if st := stat(t, p); st.Uid != 4321 || st.Gid != 8765 {
		t.Fatalf("owner %d:%d", st.Uid, st.Gid)
	}
	// Adopting the existing disk with a new owner (a new pool uid) moves it.
	if _, err := f.Create(context.Background(), inst, Disk{UUID: "d0", SizeMiB: 1}, Owner{UID: 1111, GID: -1}); err != nil {
		t.Fatal(err)
	}
	if st := stat(t, p); st.Uid != 1111 || st.Gid != 8765 {
		t.Fatalf("owner %d:%d", st.Uid, st.Gid)
	}
}

func TestFileCreateByIndex(t *testing.T) {
	f := newFile(t)
	p, err := f.Create(context.Background(), inst, Disk{Index: 2, SizeMiB: 1}, KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "disk2.raw" {
		t.Fatalf("path %s", p)
	}
}

func TestFileNoSpace(t *testing.T) {
	f := newFile(t)
	_, err := f.Create(context.Background(), inst, Disk{UUID: "huge", SizeMiB: 1 << 40}, KeepOwner())
	wantClass(t, err, ecode.NoRes)
	if !strings.HasPrefix(err.Error(), "not enough space on node: need 1099511627776 MiB, ") || !strings.HasSuffix(err.Error(), " MiB free") {
		t.Fatalf("message %q", err)
	}
	if _, err := os.Stat(filepath.Join(f.Dir(), inst)); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(filepath.Join(f.Dir(), inst))
		if len(entries) != 0 {
			t.Fatalf("a refused create left files: %v", entries)
		}
	}
}

func TestFileInvalidInput(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		inst string
		d    Disk
	}{
		{"zero size", inst, Disk{UUID: "d", SizeMiB: 0}},
		{"negative size", inst, Disk{UUID: "d", SizeMiB: -1}},
		{"overflowing size", inst, Disk{UUID: "d", SizeMiB: 1 << 50}},
		{"empty instance", "", Disk{UUID: "d", SizeMiB: 1}},
		{"escaping instance", "..", Disk{UUID: "d", SizeMiB: 1}},
		{"slash in instance", "a/b", Disk{UUID: "d", SizeMiB: 1}},
		{"escaping disk", inst, Disk{UUID: "../../etc/passwd", SizeMiB: 1}},
		{"hidden disk", inst, Disk{UUID: ".d", SizeMiB: 1}},
		{"negative index", inst, Disk{Index: -1, SizeMiB: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Create(ctx, tt.inst, tt.d, KeepOwner())
			wantClass(t, err, ecode.Inval)
		})
	}
	if f.Path("..", Disk{UUID: "d"}) != "" {
		t.Error("Path must refuse unsafe ids")
	}
	if _, err := os.Stat(f.Dir()); !os.IsNotExist(err) {
		t.Error("refused input must change nothing")
	}
}

func TestFileRemove(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	d0, d1 := Disk{UUID: "d0", SizeMiB: 1}, Disk{UUID: "d1", SizeMiB: 1}
	for _, d := range []Disk{d0, d1} {
		if _, err := f.Create(ctx, inst, d, KeepOwner()); err != nil {
			t.Fatal(err)
		}
	}
	instDir := filepath.Join(f.Dir(), inst)
	if err := f.Remove(ctx, inst, d0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.Path(inst, d0)); !os.IsNotExist(err) {
		t.Fatal("d0 still there")
	}
	if _, err := os.Stat(f.Path(inst, d1)); err != nil {
		t.Fatal("d1 must survive")
	}
	if err := f.Remove(ctx, inst, d0); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if err := f.Remove(ctx, inst, d1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(instDir); !os.IsNotExist(err) {
		t.Fatal("the instance directory should go with its last disk")
	}
	if err := f.Remove(ctx, "never-created", d0); err != nil {
		t.Fatalf("remove of a missing instance: %v", err)
	}
	wantClass(t, f.Remove(ctx, "../x", d0), ecode.Inval)
}

func TestFileGrow(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	d := Disk{UUID: "d0", SizeMiB: 10}
	p, err := f.Create(ctx, inst, d, KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Grow(ctx, inst, d, 20); err != nil {
		t.Fatal(err)
	}
	if st := stat(t, p); st.Size != 20<<20 || st.Blocks*512 >= 1<<20 {
		t.Fatalf("after grow: size %d, allocated %d", st.Size, st.Blocks*512)
	}
	if err := f.Grow(ctx, inst, d, 20); err != nil {
		t.Fatalf("growing to the current size: %v", err)
	}
	wantClass(t, f.Grow(ctx, inst, d, 5), ecode.Inval)
	wantClass(t, f.Grow(ctx, inst, d, 1<<40), ecode.NoRes)
	wantClass(t, f.Grow(ctx, inst, Disk{UUID: "missing"}, 30), ecode.NoEnt)
	if stat(t, p).Size != 20<<20 {
		t.Fatal("failed grows changed the size")
	}
}

func TestFileFree(t *testing.T) {
	f := newFile(t) // the directory does not exist yet
	total, free, err := f.Free(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(f.Dir()), &st); err != nil {
		t.Fatal(err)
	}
	if want := int64(st.Blocks * uint64(st.Bsize) >> 20); total != want {
		t.Fatalf("total %d MiB, want %d", total, want)
	}
	if free <= 0 || free > total {
		t.Fatalf("free %d of %d", free, total)
	}
}

func TestFileList(t *testing.T) {
	f := newFile(t)
	ctx := context.Background()
	if got, err := f.List(ctx); err != nil || got != nil {
		t.Fatalf("empty: %v %v", got, err)
	}
	mk := func(instUUID string, d Disk) {
		if _, err := f.Create(ctx, instUUID, d, KeepOwner()); err != nil {
			t.Fatal(err)
		}
	}
	mk("i1", Disk{UUID: "a", SizeMiB: 2})
	mk("i1", Disk{Index: 1, SizeMiB: 3})
	mk("i2", Disk{UUID: "b", SizeMiB: 1})
	// Noise List must ignore: an unfinished create, a stray file, a file at the top.
	os.WriteFile(filepath.Join(f.Dir(), "i2", ".b.raw.tmp-123"), nil, 0o600)
	os.WriteFile(filepath.Join(f.Dir(), "i2", "notes.txt"), nil, 0o600)
	os.WriteFile(filepath.Join(f.Dir(), "top.raw"), nil, 0o600)
	// A partly written disk has allocated blocks.
	fh, _ := os.OpenFile(filepath.Join(f.Dir(), "i2", "b.raw"), os.O_WRONLY, 0)
	fh.WriteAt(make([]byte, 64<<10), 0)
	fh.Sync()
	fh.Close()

	got, err := f.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Path < got[j].Path })
	type row struct {
		inst, disk string
		mib        int64
		uid        int
		mode       os.FileMode
	}
	var rows []row
	for _, g := range got {
		rows = append(rows, row{g.InstUUID, g.DiskUUID, g.SizeMiB, g.UID, g.Mode})
		if g.SizeBytes != g.SizeMiB<<20 || g.Path != filepath.Join(f.Dir(), g.InstUUID, g.DiskUUID+".raw") {
			t.Errorf("entry %+v", g)
		}
	}
	uid := os.Geteuid()
	want := []row{{"i1", "a", 2, uid, 0o600}, {"i1", "disk1", 3, uid, 0o600}, {"i2", "b", 1, uid, 0o600}}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows %+v\nwant %+v", rows, want)
	}
	if got[2].AllocatedBytes < 64<<10 || got[0].AllocatedBytes >= 1<<20 {
		t.Errorf("allocated: %d, %d", got[2].AllocatedBytes, got[0].AllocatedBytes)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := f.List(cctx); err == nil {
		t.Error("List must honour cancellation")
	}
}

func TestDiskless(t *testing.T) {
	b := NewDiskless()
	ctx := context.Background()
	if b.Template() != TemplateDiskless || b.Path(inst, Disk{}) != "" {
		t.Fatal("identity")
	}
	_, err := b.Create(ctx, inst, Disk{UUID: "d", SizeMiB: 1}, KeepOwner())
	wantClass(t, err, ecode.Inval)
	wantClass(t, b.Grow(ctx, inst, Disk{}, 2), ecode.Inval)
	if err := b.Remove(ctx, inst, Disk{}); err != nil {
		t.Fatal(err)
	}
	if tot, free, err := b.Free(ctx); tot != 0 || free != 0 || err != nil {
		t.Fatal("free")
	}
	if l, err := b.List(ctx); l != nil || err != nil {
		t.Fatal("list")
	}
}

func TestForTemplate(t *testing.T) {
	for _, tt := range []struct {
		template, dir string
		want          string // template of the backend, "" for an Inval error
	}{
		{TemplateDiskless, "", TemplateDiskless},
		{TemplateFile, "/srv/corral/file-storage", TemplateFile},
		{TemplateFile, "", ""},
		{TemplateFile, "relative/dir", ""},
		{TemplatePlain, "/x", ""},
		{TemplateDRBD, "/x", ""},
		{TemplateRBD, "", TemplateRBD},
		{TemplateSharedFile, "/x", TemplateSharedFile},
		{TemplateSharedFile, "", ""},
		{TemplateSharedFile, "rel", ""},
		{"bogus", "/x", ""},
	} {
		b, err := ForTemplate(tt.template, tt.dir, tt.dir)
		if tt.want == "" {
			if ecode.ClassOf(err) != ecode.Inval || b != nil {
				t.Errorf("ForTemplate(%q, %q) = %v, %v; want Inval", tt.template, tt.dir, b, err)
			}
			continue
		}
		if err != nil || b.Template() != tt.want {
			t.Errorf("ForTemplate(%q, %q) = %v, %v", tt.template, tt.dir, b, err)
		}
	}
}

func TestOSBackendType(t *testing.T) {
	for tmpl, want := range map[string]string{
		TemplateFile: "file:loop", TemplateSharedFile: "file:loop", TemplatePlain: "block",
		TemplateDRBD: "block", TemplateRBD: "file:loop", TemplateDiskless: "", "bogus": "",
	} {
		if got := OSBackendType(tmpl); got != want {
			t.Errorf("OSBackendType(%q) = %q, want %q", tmpl, got, want)
		}
	}
}
