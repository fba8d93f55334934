package etcdstore

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Backup implements store.Store with etcd's snapshot of the member the
// client reaches. The snapshot holds etcd's whole keyspace, other prefixes
// included (etcd has no partial snapshot), and is restored with etcdctl
// snapshot restore (see etcdproc.StartFromSnapshot).
//
// The snapshot streams into a temporary file beside path that is synced and
// renamed into place, so path never holds a partial copy; a snapshot of a
// large keyspace is never held in memory.
func (s *Store) Backup(ctx context.Context, path string) error {
	if err := s.check(ctx); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := s.backup(ctx, path); err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return nil
}

func (s *Store) backup(ctx context.Context, path string) (err error) {
	// Cancelling ends the snapshot stream if the copy stops early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := s.cli.Snapshot(ctx)
	if err != nil {
		return s.mapErr(err)
	}
	defer rc.Close()
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*") // mode 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, rc); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return s.mapErr(err)
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	// The rename is durable only once the directory is.
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
