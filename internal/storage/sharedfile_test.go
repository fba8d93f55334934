package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// Two nodes mounting one shared directory: a disk created through one is
// attached on the other; a disk the other node cannot see is refused.
func TestSharedFileAttachOnAnotherNode(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	node1, err := NewSharedFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	node2, _ := NewSharedFile(dir)
	d := Disk{UUID: "d1", Index: 0, SizeMiB: 4, Template: TemplateSharedFile}
	p, err := node1.Create(ctx, "inst-1", d, KeepOwner())
	if err != nil {
		t.Fatal(err)
	}
	owner := KeepOwner()
	if os.Geteuid() == 0 {
		owner = Owner{UID: 4242, GID: 4242}
	}
	got, err := node2.Attach(ctx, "inst-1", d, owner)
	if err != nil || got != p {
		t.Fatalf("attach on node2 = %q, %v; want %q", got, err, p)
	}
	if os.Geteuid() == 0 {
		l, _ := node2.List(ctx)
		if len(l) != 1 || l[0].UID != 4242 {
			t.Fatalf("after attach the disk is %+v, want it owned by 4242", l)
		}
	}
	if st, err := os.Stat(filepath.Dir(p)); err != nil || st.Mode().Perm() != 0o711 {
		t.Fatalf("instance directory after attach: %v %v, want mode 0711 so qemu can reopen the image", st.Mode(), err)
	}
	if _, err := node2.Attach(ctx, "inst-2", d, KeepOwner()); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("attach of a disk the node cannot see = %v, want an environment error", err)
	}
	bigger := d
	bigger.SizeMiB = 8
	if _, err := node2.Attach(ctx, "inst-1", bigger, KeepOwner()); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("attach of a disk of another size = %v, want an environment error", err)
	}
	if err := node2.Detach(ctx, "inst-1", d); err != nil {
		t.Fatal(err)
	}
	if node1.Template() != TemplateSharedFile {
		t.Fatal(node1.Template())
	}
}
