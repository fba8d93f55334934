package nodeserver

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/storage"
)

func TestStorageList(t *testing.T) {
	fileDir := filepath.Join(t.TempDir(), "storage", "file")
	shared := t.TempDir()
	s := &Server{name: "node1", log: slog.New(slog.DiscardHandler),
		storage: map[string]storage.Backend{storage.TemplateFile: storage.NewFile(fileDir)}}
	ctx := context.Background()
	// The node's file directory, before its first disk: its parent's
	// file system.
	got, err := s.storageList(ctx, nodeapi.StorageListArgs{Type: "file", Used: true})
	if err != nil {
		t.Fatal(err)
	}
	units := got.([]nodeapi.StorageUnit)
	if len(units) != 1 || units[0].Name != fileDir || units[0].SizeMiB <= 0 || units[0].UsedMiB != 0 {
		t.Fatalf("file units %+v", units)
	}
	if err := os.WriteFile(filepath.Join(shared, "disk"), make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = s.storageList(ctx, nodeapi.StorageListArgs{Type: "sharedfile", Dir: shared, Used: true})
	if err != nil {
		t.Fatal(err)
	}
	if units := got.([]nodeapi.StorageUnit); len(units) != 1 || units[0].Name != shared || units[0].UsedMiB != 2 {
		t.Fatalf("sharedfile units %+v", units)
	}
	// A shared directory that is not there is an error, not its parent.
	for _, a := range []nodeapi.StorageListArgs{{Type: "sharedfile", Dir: filepath.Join(shared, "unmounted")}, {Type: "sharedfile"}, {Type: "lvm-vg"}} {
		if _, err := s.storageList(ctx, a); err == nil {
			t.Errorf("%+v answered", a)
		}
	}
}
