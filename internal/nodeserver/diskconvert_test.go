package nodeserver

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/storage"
)

// TestDiskConvertFileAndSharedFile copies a sparse disk from the file
// template to sharedfile and back: the same bytes, the holes kept, no
// temporary file left.
func TestDiskConvertFileAndSharedFile(t *testing.T) {
	fileDir, shared := t.TempDir(), t.TempDir()
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		storage: map[string]storage.Backend{storage.TemplateFile: storage.NewFile(fileDir)}}
	ctx := context.Background()
	const inst = "0c1d2e3f-0000-4000-8000-000000000001"
	disk := nodeapi.DiskSpec{UUID: "d1", Index: 0, SizeMiB: 8, Mode: "rw"}
	src := storage.NewFile(fileDir).Path(inst, diskOf(storage.TemplateFile, disk))
	if err := os.MkdirAll(filepath.Dir(src), 0o750); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 8<<20)
	copy(want[3<<20:], "in the middle")
	copy(want[len(want)-4:], "tail")
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	args := nodeapi.DiskConvertArgs{InstanceUUID: inst, FromTemplate: storage.TemplateFile, ToTemplate: storage.TemplateSharedFile,
		From: disk, To: disk, SharedFileDir: shared}
	r, err := s.diskConvert(ctx, args)
	if err != nil {
		t.Fatal(err)
	}
	dst := r.(nodeapi.DiskReply).Path
	if filepath.Dir(filepath.Dir(dst)) != shared {
		t.Fatalf("converted disk at %s, not in the shared directory %s", dst, shared)
	}
	got, err := os.ReadFile(dst)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("converted disk differs (%d bytes, %v)", len(got), err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dst, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used >= int64(len(want))/2 {
		t.Errorf("converted disk uses %d bytes of %d: the holes were filled", used, len(want))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(dst), ".*convert")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// And back, over a file that a failed earlier try left behind.
	if err := os.WriteFile(src, []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	args.FromTemplate, args.ToTemplate = storage.TemplateSharedFile, storage.TemplateFile
	if _, err := s.diskConvert(ctx, args); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(src); !bytes.Equal(got, want) {
		t.Fatal("converting back did not restore the bytes")
	}

	args.ToTemplate = "plain"
	if _, err := s.diskConvert(ctx, args); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("conversion to plain: %v, want an Inval error", err)
	}
	args.FromTemplate, args.ToTemplate, args.InstanceUUID = storage.TemplateFile, storage.TemplateSharedFile, "0c1d2e3f-0000-4000-8000-000000000002"
	if _, err := s.diskConvert(ctx, args); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("conversion of a missing disk: %v, want NoEnt", err)
	}
}
