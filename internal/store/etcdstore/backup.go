package etcdstore

import (
	"context"
	"fmt"
	"io"

	"github.com/corral/corral/internal/atomicfile"
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

func (s *Store) backup(ctx context.Context, path string) error {
	// Cancelling ends the snapshot stream if the copy stops early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rc, err := s.cli.Snapshot(ctx)
	if err != nil {
		return s.mapErr(err)
	}
	defer rc.Close()
	return atomicfile.WriteFrom(path, 0o600, func(w io.Writer) error {
		if _, err := io.Copy(w, rc); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return s.mapErr(err)
		}
		return nil
	})
}
