package e2e

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestRecreateDisks recreates the disk of a stopped file instance with the
// CLI and with Ganeti's RAPI client: the node's image is replaced by an
// empty one of the recorded or the newly given size.
func TestRecreateDisks(t *testing.T) {
	requireRoot(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 64}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "start": true})

	out, err := c.corral("instance", "activate-disks", "web1")
	if err != nil {
		t.Fatalf("activate-disks: %v\n%s", err, out)
	}
	_, path, _ := strings.Cut(strings.TrimSpace(out), ":disk/0:")
	if path == "" {
		t.Fatalf("no disk path in %q", out)
	}
	// scribble writes a marker into the image and checks it is there.
	scribble := func(t *testing.T) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("old contents"), 4096); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// emptyOf checks the image is all zeros and of the given size.
	emptyOf := func(t *testing.T, step string, mib int64) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if int64(len(b)) != mib<<20 {
			t.Errorf("%s: image is %d bytes, want %d", step, len(b), mib<<20)
		}
		if i := bytes.IndexFunc(b, func(r rune) bool { return r != 0 }); i >= 0 {
			t.Errorf("%s: image has data at offset %d, want only zeros", step, i)
		}
	}

	scribble(t)
	if out, err := c.corral("instance", "recreate-disks", "web1"); err == nil || !strings.Contains(out, "is marked to be up, cannot recreate disks") {
		t.Fatalf("recreate-disks of a running instance: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "shutdown", "web1"); err != nil {
		t.Fatalf("shutdown: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "recreate-disks", "web1"); err != nil {
		t.Fatalf("recreate-disks: %v\n%s", err, out)
	}
	emptyOf(t, "recreate", 64)

	scribble(t)
	if out, err := c.corral("instance", "recreate-disks", "--disk", "0:size=96M", "web1"); err != nil {
		t.Fatalf("recreate-disks --disk 0:size=96M: %v\n%s", err, out)
	}
	emptyOf(t, "recreate with a new size", 96)
	if out, err := c.corral("instance", "list", "--no-headers", "-o", "disk.sizes", "web1"); err != nil || strings.TrimSpace(out) != "96M" {
		t.Errorf("disk.sizes after recreate with a new size: %q, %v", out, err)
	}

	t.Run("ganeti-rapi-client", func(t *testing.T) {
		requireRAPIClient(t)
		s := devRAPI(t, c)
		scribble(t)
		r := s.py(t, "recreate", "web1")
		if v, _ := r["recreate"].(map[string]any); v["ok"] != true || v["status"] != "success" {
			t.Fatalf("RecreateInstanceDisks: %v", r["recreate"])
		}
		emptyOf(t, "recreate through RAPI", 96)
	})
	if out, err := c.corral("instance", "startup", "web1"); err != nil {
		t.Fatalf("startup after recreate: %v\n%s", err, out)
	}
}
