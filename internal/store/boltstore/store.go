// Package boltstore is the embedded backend of store.Store on bbolt. It
// emulates etcd's model: one global revision persisted with the data, KV
// metadata (create/mod revision, version, lease), compare-then-ops
// transactions, watches served from an in-memory history, and leases.
//
// All writes go through one commit loop that gathers the transactions
// waiting at that moment into a single bbolt transaction (group commit), so
// concurrent writers share an fsync and each transaction still gets its own
// revision. Reads use bbolt's read transactions and never wait for writers.
package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/corral/corral/internal/store"
)

// Options tunes Open. The zero value is right for production.
type Options struct {
	// NoSync skips fsync on commit. Only for tests and benchmarks: a crash
	// may lose or corrupt committed data.
	NoSync bool
	// WatchHistory is how many events the store keeps in memory so that a
	// Watch can start from a past revision (default 100000). Older starts
	// get store.ErrCompacted. The history starts empty at Open.
	WatchHistory int
	// WatchBuffer is how many undelivered events one watcher may have
	// queued before its watch ends with store.ErrWatchLagged (default
	// 10000). Writers never wait for watchers.
	WatchBuffer int
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// Now is the clock for leases; nil means time.Now.
	Now func() time.Time
	// OpenTimeout bounds the wait for the file lock held by another process
	// (default 5s).
	OpenTimeout time.Duration
}

const (
	defaultWatchHistory = 100000
	defaultWatchBuffer  = 10000
	defaultOpenTimeout  = 5 * time.Second
	// leaseTick is how often expiry is checked: a lease outlives its TTL by
	// at most this much.
	leaseTick = 100 * time.Millisecond
)

// Store is a store.Store on a bbolt file.
type Store struct {
	db   *bolt.DB
	log  *slog.Logger
	now  func() time.Time
	path string

	reqs      chan *request // unbuffered: a send succeeds only when the loop takes it
	closing   chan struct{}
	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup

	// Owned by the commit loop: last committed revision and lease id.
	rev     int64
	leaseID int64

	revision atomic.Int64 // last committed and published revision
	commits  atomic.Int64 // bbolt write transactions committed
	batched  atomic.Int64 // requests committed in them

	leaseMu sync.Mutex
	leases  map[int64]*leaseState

	hub *hub
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the store file at path (mode 0600).
//
// Leases found in the file get a fresh TTL from now, as etcd does when a
// member restarts: holders cannot renew while the store is closed, so a
// lease that expired meanwhile is reaped only if it is not kept alive within
// one TTL after Open.
func Open(path string, opts Options) (*Store, error) {
	if opts.WatchHistory <= 0 {
		opts.WatchHistory = defaultWatchHistory
	}
	if opts.WatchBuffer <= 0 {
		opts.WatchBuffer = defaultWatchBuffer
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = defaultOpenTimeout
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		opts.Logger.Warn("store file is accessible to group or others", "path", path, "mode", fi.Mode().Perm())
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: opts.OpenTimeout,
		NoSync:  opts.NoSync,
		// The freelist is rebuilt on open instead of written on every
		// commit, which makes small commits cheaper (etcd does the same).
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{
		db:      db,
		log:     opts.Logger,
		now:     opts.Now,
		path:    path,
		reqs:    make(chan *request),
		closing: make(chan struct{}),
		leases:  make(map[int64]*leaseState),
	}
	if err := s.load(); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.revision.Store(s.rev)
	s.hub = newHub(s.rev, opts.WatchHistory, opts.WatchBuffer)
	s.wg.Add(2)
	go s.commitLoop()
	go s.leaseLoop()
	s.log.Debug("store opened", "path", path, "revision", s.rev, "leases", len(s.leases))
	return s, nil
}

// load creates the buckets of a new file and reads the revision, lease
// counter and leases.
func (s *Store) load() error {
	now := s.now()
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketKV, bucketLease, bucketLeaseKeys} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if f := meta.Get(metaFormat); f == nil {
			if err := meta.Put(metaFormat, []byte{formatVersion}); err != nil {
				return err
			}
		} else if !bytes.Equal(f, []byte{formatVersion}) {
			return fmt.Errorf("unsupported format %v", f)
		}
		var err error
		if s.rev, err = readInt(meta, metaRev); err != nil {
			return fmt.Errorf("revision: %w", err)
		}
		if s.leaseID, err = readInt(meta, metaLeaseID); err != nil {
			return fmt.Errorf("lease counter: %w", err)
		}
		return tx.Bucket(bucketLease).ForEach(func(k, v []byte) error {
			id, err := getBE64(k)
			if err != nil {
				return fmt.Errorf("lease key %x: %w", k, err)
			}
			l, err := decodeLease(v)
			if err != nil {
				return fmt.Errorf("lease %d: %w", id, err)
			}
			s.leases[id] = &leaseState{ttl: l.ttl, expiry: now.Add(time.Duration(l.ttl) * time.Second)}
			return nil
		})
	})
}

func readInt(b *bolt.Bucket, key []byte) (int64, error) {
	v := b.Get(key)
	if v == nil {
		return 0, nil
	}
	return getBE64(v)
}

// Close stops the background work, ends every watch and closes the file.
// Transactions already handed to the commit loop finish first.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing)
		s.wg.Wait()
		s.hub.close()
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

func (s *Store) closed() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// view runs fn in a read transaction, mapping a closed database to
// store.ErrClosed.
func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed() {
		return store.ErrClosed
	}
	err := s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return store.ErrClosed
	}
	return err
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (*store.KV, error) {
	var out *store.KV
	err := s.view(ctx, func(tx *bolt.Tx) error {
		rec := tx.Bucket(bucketKV).Get([]byte(key))
		if rec == nil {
			return nil
		}
		kv, err := toKV(key, rec, false)
		if err != nil {
			return err
		}
		out = &kv
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get %q: %w", key, err)
	}
	return out, nil
}

// Range implements store.Store.
func (s *Store) Range(ctx context.Context, prefix string, opts store.RangeOptions) ([]store.KV, int64, error) {
	var (
		out []store.KV
		rev int64
	)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		var err error
		if rev, err = readInt(tx.Bucket(bucketMeta), metaRev); err != nil {
			return err
		}
		out, err = scanPrefix(tx.Bucket(bucketKV), prefix, opts)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("range %q: %w", prefix, err)
	}
	return out, rev, nil
}

// scanPrefix returns the keys under prefix from opts.From on. Keys and
// values are copied into shared arenas rather than one allocation each.
func scanPrefix(b *bolt.Bucket, prefix string, opts store.RangeOptions) ([]store.KV, error) {
	start := prefix
	if opts.From > start {
		start = opts.From
	}
	var (
		out    []store.KV
		keys   stringArena
		values byteArena
	)
	if opts.Limit > 0 && opts.Limit <= 1024 {
		out = make([]store.KV, 0, opts.Limit)
	}
	c := b.Cursor()
	for k, rec := c.Seek([]byte(start)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, rec = c.Next() {
		if opts.Limit > 0 && len(out) >= opts.Limit {
			break
		}
		h, v, err := decodeKV(rec)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
		kv := store.KV{Key: keys.copy(k), CreateRevision: h.create, ModRevision: h.mod, Version: h.version, Lease: h.lease}
		if !opts.KeysOnly {
			kv.Value = values.copy(v)
		}
		out = append(out, kv)
	}
	return out, nil
}

// arenaChunk is the allocation unit of the arenas; larger items get their
// own allocation.
const arenaChunk = 32 << 10

// byteArena hands out copies that share backing arrays. Each copy's
// capacity ends at its length, so appending to one cannot overwrite another.
type byteArena struct{ buf []byte }

func (a *byteArena) copy(b []byte) []byte {
	if len(b) > arenaChunk/4 {
		return append([]byte(nil), b...)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, arenaChunk)
	}
	off := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[off:len(a.buf):len(a.buf)]
}

// stringArena makes strings that share backing arrays. The bytes behind a
// string are written once and never again (only unused capacity is
// appended to), which is what unsafe.String requires.
type stringArena struct{ buf []byte }

func (a *stringArena) copy(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > arenaChunk/4 {
		return string(b)
	}
	if cap(a.buf)-len(a.buf) < len(b) {
		a.buf = make([]byte, 0, arenaChunk)
	}
	off := len(a.buf)
	a.buf = append(a.buf, b...)
	return unsafe.String(&a.buf[off], len(b))
}

// Revision implements store.Store.
func (s *Store) Revision(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if s.closed() {
		return 0, store.ErrClosed
	}
	return s.revision.Load(), nil
}

// Backup implements store.Store: it writes a consistent snapshot to a
// temporary file next to path, syncs it and renames it into place, so path
// never holds a partial copy.
func (s *Store) Backup(ctx context.Context, path string) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, "."+base+".tmp*") // mode 0600
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly after the rename
	err = s.view(ctx, func(tx *bolt.Tx) error {
		_, err := tx.WriteTo(ctxWriter{ctx, f})
		return err
	})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return nil
}

// ctxWriter lets a long backup stop when its context ends.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}
