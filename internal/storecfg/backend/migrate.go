package backend

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	berrors "go.etcd.io/bbolt/errors"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/storecfg"
)

// Errors of Migrate a caller may test for.
var (
	// ErrLocked: another process (a running corrald) holds the bbolt file.
	ErrLocked = errors.New("the bbolt store is in use")
	// ErrNotEmpty: the target prefix already holds keys.
	ErrNotEmpty = errors.New("the target etcd prefix is not empty")
	// ErrNotBolt: the cluster does not run on bbolt (already migrated).
	ErrNotBolt = errors.New("the cluster is not on the bbolt store")
	// ErrMismatch: the copy does not match the source.
	ErrMismatch = errors.New("the copy in etcd differs from the bbolt store")
)

// MigrateOptions describe a move from bbolt to etcd.
type MigrateOptions struct {
	// MasterDir is the master state directory: config.db and store.json.
	MasterDir string
	// Target is the etcd store to fill. An empty Prefix means the
	// cluster's default (storecfg.DefaultPrefix); with https endpoints,
	// empty file names mean corrald's etcd client certificate and key and
	// the cluster CA in MasterDir.
	Target storecfg.Config
	// Out receives progress and the verification summary; nil discards.
	Out io.Writer
	// ProgressEvery is how many copied keys make a progress line (default
	// 10000).
	ProgressEvery int
	// BoltOpenTimeout is how long to wait for the bbolt file lock before
	// concluding corrald runs (default 1 s).
	BoltOpenTimeout time.Duration
	// DialTimeout bounds the first contact with etcd.
	DialTimeout time.Duration
	Logger      *slog.Logger
	// Now names the backup file (default time.Now).
	Now func() time.Time
}

// Summary describes one side of the verification: how many keys, how many
// bytes of keys and values, and a SHA-256 over every key and value in key
// order.
type Summary struct {
	Keys   int
	Bytes  int64
	SHA256 string
}

func (s Summary) String() string {
	return fmt.Sprintf("%d keys, %d bytes, sha256 %s", s.Keys, s.Bytes, s.SHA256)
}

// MigrateResult reports a migration that completed.
type MigrateResult struct {
	Config         storecfg.Config // the record now in store.json
	Source, Target Summary
	// Leased are keys attached to a lease, which were not copied: their
	// holder is stopped with the cluster, so they would expire anyway.
	Leased []string
	// Backup is the bbolt file's new name.
	Backup string
	// SourceRevision and TargetRevision are the stores' revisions; they
	// differ by design (nothing Corral stores in a value is a revision).
	SourceRevision, TargetRevision int64
}

const (
	pageSize      = 1000
	batchMaxOps   = store.MaxOpsPerTxn - store.GuardReserve
	batchMaxBytes = store.MaxTxnBytes
	maxReported   = 10
)

// Migrate copies every key of the cluster's bbolt store into an empty etcd
// prefix, verifies the copy key by key, then switches store.json to etcd
// and renames the bbolt file as a backup. corrald must be stopped: the
// bbolt file lock, held by a running corrald, makes Migrate refuse.
//
// Until store.json is switched, nothing the cluster uses has changed; a
// failure before that removes what was copied (unless another writer showed
// up in the prefix) so the migration can simply be run again.
func Migrate(ctx context.Context, o MigrateOptions) (*MigrateResult, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = 10000
	}
	if o.BoltOpenTimeout <= 0 {
		o.BoltOpenTimeout = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	cur, err := storecfg.Load(o.MasterDir)
	if err != nil {
		return nil, err
	}
	if cur.Backend != storecfg.BackendBolt {
		return nil, fmt.Errorf("%w: %s says %s", ErrNotBolt, storecfg.Path(o.MasterDir), cur.Backend)
	}
	path := filepath.Join(o.MasterDir, storecfg.FileBolt)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no bbolt store to migrate: %w", err)
	}
	src, err := boltstore.Open(path, boltstore.Options{OpenTimeout: o.BoltOpenTimeout, Logger: o.Logger})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, ecode.Errorf(ecode.State, "%w: %s is locked by another process (is corrald running?); stop corrald first", ErrLocked, path)
	}
	if err != nil {
		return nil, err
	}
	defer src.Close()
	cdb, err := confdb.Open(ctx, src, nil)
	if err != nil {
		return nil, fmt.Errorf("reading the configuration from %s: %w", path, err)
	}
	target, err := fillTarget(o.Target, cdb.Cluster().ClusterName)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "Migrating the store of cluster %s from bbolt (%s) to etcd (%s, prefix %s)\n",
		cdb.Cluster().ClusterName, path, strings.Join(target.Endpoints, ","), target.Prefix)
	dst, err := OpenConfig(ctx, o.MasterDir, target, Options{Logger: o.Logger, DialTimeout: o.DialTimeout})
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	if kvs, _, err := dst.Range(ctx, "", store.RangeOptions{Limit: 1, KeysOnly: true}); err != nil {
		return nil, fmt.Errorf("checking the target prefix: %w", err)
	} else if len(kvs) > 0 {
		return nil, ecode.Errorf(ecode.Exists, "%w: %s holds keys (e.g. %s%s); give an empty prefix or delete them first",
			ErrNotEmpty, target.Prefix, target.Prefix, kvs[0].Key)
	}
	res := &MigrateResult{Config: target}
	if res.SourceRevision, err = src.Revision(ctx); err != nil {
		return nil, err
	}
	total, err := countKeys(ctx, src)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "Source: %d keys at revision %d\n", total, res.SourceRevision)

	t0 := time.Now()
	copied, leased, err := copyKeys(ctx, src, dst, total, o)
	res.Leased = leased
	if err != nil {
		return nil, abandon(ctx, dst, target, copied, err, o.Out)
	}
	for _, k := range leased {
		fmt.Fprintf(o.Out, "Not copied (attached to a lease, which would expire with its stopped holder): %s\n", k)
	}
	fmt.Fprintf(o.Out, "Copied %d keys in %s\n", copied, time.Since(t0).Round(time.Millisecond))

	diffs, err := verify(ctx, src, dst, res)
	fmt.Fprintf(o.Out, "Verify: bbolt %s\nVerify: etcd  %s\n", res.Source, res.Target)
	if err == nil && len(diffs) > 0 {
		for _, d := range diffs {
			fmt.Fprintf(o.Out, "Verify: %s\n", d)
		}
		err = fmt.Errorf("%w: %d keys on bbolt, %d on etcd, first differences: %s",
			ErrMismatch, res.Source.Keys, res.Target.Keys, strings.Join(diffs, "; "))
	}
	if err != nil {
		return nil, abandon(ctx, dst, target, copied, err, o.Out)
	}
	fmt.Fprintf(o.Out, "Verified: the same keys and values on both sides.\n")
	if res.TargetRevision, err = dst.Revision(ctx); err != nil {
		return nil, err
	}

	// The record first: a crash after it leaves a cluster on etcd with its
	// old file still in place, which is harmless; the other order could
	// leave a cluster with no store at all.
	if err := storecfg.Save(o.MasterDir, target); err != nil {
		return nil, abandon(ctx, dst, target, copied, err, o.Out)
	}
	fmt.Fprintf(o.Out, "Store record switched to etcd: %s\n", storecfg.Path(o.MasterDir))
	res.Backup = backupName(path, o.Now())
	if err := os.Rename(path, res.Backup); err != nil {
		return nil, fmt.Errorf("the cluster now uses etcd, but renaming %s to %s failed: %w", path, res.Backup, err)
	}
	if err := syncDir(o.MasterDir); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "The bbolt store is kept as %s (etcd revision %d; bbolt's was %d: revisions are per store)\n",
		res.Backup, res.TargetRevision, res.SourceRevision)
	return res, nil
}

// fillTarget completes and validates the record of the target.
func fillTarget(t storecfg.Config, clusterName string) (storecfg.Config, error) {
	if t.Backend == "" {
		t.Backend = storecfg.BackendEtcd
	}
	if t.Backend != storecfg.BackendEtcd {
		return t, fmt.Errorf("migration target must be etcd, not %q", t.Backend)
	}
	if t.Prefix == "" {
		t.Prefix = storecfg.DefaultPrefix(clusterName)
	}
	https := false
	for _, e := range t.Endpoints {
		if strings.HasPrefix(e, "https:") {
			https = true
		}
	}
	if https && t.CertFile == "" && t.KeyFile == "" && t.CAFile == "" {
		t.CertFile, t.KeyFile, t.CAFile = storecfg.FileEtcdClientCert, storecfg.FileEtcdClientKey, storecfg.FileClusterCA
	}
	if err := t.Validate(); err != nil {
		return t, ecode.Errorf(ecode.Inval, "%v", err)
	}
	return t, nil
}

func backupName(path string, now time.Time) string {
	return path + ".pre-etcd-" + now.UTC().Format("20060102T150405Z")
}

// abandon removes what a failed migration copied, unless the failure says
// another writer is in the prefix, whose keys are not ours to remove.
func abandon(ctx context.Context, dst store.Store, target storecfg.Config, copied int, cause error, out io.Writer) error {
	if copied == 0 || errors.Is(cause, errForeignKey) {
		return fmt.Errorf("%w (the cluster stays on bbolt)", cause)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := dst.Txn(cctx, nil, []store.Op{store.DeletePrefix("")}, nil); err != nil {
		return fmt.Errorf("%w (the cluster stays on bbolt; removing the partial copy under %s failed too: %v)", cause, target.Prefix, err)
	}
	fmt.Fprintf(out, "Removed the partial copy under %s\n", target.Prefix)
	return fmt.Errorf("%w (the cluster stays on bbolt; the partial copy was removed)", cause)
}

var errForeignKey = errors.New("a key appeared in the target prefix during the copy: another writer uses it")

// pager walks a store's keys in order, a page at a time, so that a large
// store is never held in memory whole.
type pager struct {
	st       store.Store
	keysOnly bool
	from     string
	buf      []store.KV
	done     bool
}

// next returns the next key, or nil at the end.
func (p *pager) next(ctx context.Context) (*store.KV, error) {
	if len(p.buf) == 0 {
		if p.done {
			return nil, nil
		}
		kvs, _, err := p.st.Range(ctx, "", store.RangeOptions{Limit: pageSize, From: p.from, KeysOnly: p.keysOnly})
		if err != nil {
			return nil, err
		}
		if len(kvs) < pageSize {
			p.done = true
		}
		if len(kvs) == 0 {
			return nil, nil
		}
		p.buf = kvs
		// The smallest key after the page's last.
		p.from = kvs[len(kvs)-1].Key + "\x00"
	}
	kv := &p.buf[0]
	p.buf = p.buf[1:]
	return kv, nil
}

func countKeys(ctx context.Context, st store.Store) (int, error) {
	p := &pager{st: st, keysOnly: true}
	n := 0
	for {
		kv, err := p.next(ctx)
		if err != nil {
			return 0, fmt.Errorf("counting keys: %w", err)
		}
		if kv == nil {
			return n, nil
		}
		n++
	}
}

// copyKeys writes every unleased key of src into dst in transactions that
// fit the store's limits, each put guarded by the key's absence.
func copyKeys(ctx context.Context, src, dst store.Store, total int, o MigrateOptions) (copied int, leased []string, err error) {
	p := &pager{st: src}
	var cmps []store.Cmp
	var ops []store.Op
	size := 0
	nextReport := o.ProgressEvery
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		res, err := dst.Txn(ctx, cmps, ops, nil)
		if err != nil {
			return fmt.Errorf("writing to etcd: %w", err)
		}
		if !res.Succeeded {
			return errForeignKey
		}
		copied += len(ops)
		cmps, ops, size = cmps[:0], ops[:0], 0
		if copied >= nextReport {
			fmt.Fprintf(o.Out, "copied %d/%d keys (%d%%)\n", copied, total, copied*100/max(total, 1))
			for nextReport <= copied {
				nextReport += o.ProgressEvery
			}
		}
		return nil
	}
	for {
		kv, err := p.next(ctx)
		if err != nil {
			return copied, leased, fmt.Errorf("reading bbolt: %w", err)
		}
		if kv == nil {
			break
		}
		if kv.Lease != 0 {
			leased = append(leased, kv.Key)
			continue
		}
		guarded := 2*len(kv.Key) + len(kv.Value)
		if len(ops) == batchMaxOps || size+guarded > batchMaxBytes {
			if err := flush(); err != nil {
				return copied, leased, err
			}
		}
		if guarded <= batchMaxBytes {
			cmps = append(cmps, store.Missing(kv.Key))
			size += len(kv.Key)
		}
		// A value so large that the guard no longer fits goes alone and
		// unguarded: the prefix was empty at the start, and verification
		// would see a foreign key anyway.
		ops = append(ops, store.Put(kv.Key, kv.Value))
		size += len(kv.Key) + len(kv.Value)
	}
	return copied, leased, flush()
}

// verify walks both stores side by side, summarising each and listing the
// first keys that differ.
func verify(ctx context.Context, src, dst store.Store, res *MigrateResult) ([]string, error) {
	sp, dp := &pager{st: src}, &pager{st: dst}
	sh, dh := sha256.New(), sha256.New()
	var diffs []string
	report := func(format string, args ...any) {
		if len(diffs) < maxReported {
			diffs = append(diffs, fmt.Sprintf(format, args...))
		}
	}
	next := func(p *pager, skipLeased bool) (*store.KV, error) {
		for {
			kv, err := p.next(ctx)
			if err != nil || kv == nil || !skipLeased || kv.Lease == 0 {
				return kv, err
			}
		}
	}
	s, err := next(sp, true)
	if err != nil {
		return nil, fmt.Errorf("verify: reading bbolt: %w", err)
	}
	d, err := next(dp, false)
	if err != nil {
		return nil, fmt.Errorf("verify: reading etcd: %w", err)
	}
	for s != nil || d != nil {
		switch {
		case d == nil || (s != nil && s.Key < d.Key):
			report("%s missing on etcd", s.Key)
			add(sh, &res.Source, s)
			s, err = next(sp, true)
		case s == nil || d.Key < s.Key:
			report("%s only on etcd", d.Key)
			add(dh, &res.Target, d)
			d, err = next(dp, false)
		default:
			if string(s.Value) != string(d.Value) {
				report("%s has a different value (%d bytes on bbolt, %d on etcd)", s.Key, len(s.Value), len(d.Value))
			}
			if d.Lease != 0 {
				report("%s is attached to lease %d on etcd", d.Key, d.Lease)
			}
			add(sh, &res.Source, s)
			add(dh, &res.Target, d)
			if s, err = next(sp, true); err == nil {
				d, err = next(dp, false)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("verify: %w", err)
		}
	}
	res.Source.SHA256 = hex.EncodeToString(sh.Sum(nil))
	res.Target.SHA256 = hex.EncodeToString(dh.Sum(nil))
	if len(diffs) == 0 && res.Source != res.Target {
		diffs = append(diffs, "the summaries differ")
	}
	return diffs, nil
}

// add feeds one key and value into a side's hash, each length-prefixed so
// that no two different sequences of keys and values hash alike.
func add(h hash.Hash, s *Summary, kv *store.KV) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(kv.Key)))])
	io.WriteString(h, kv.Key)
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(kv.Value)))])
	h.Write(kv.Value)
	s.Keys++
	s.Bytes += int64(len(kv.Key) + len(kv.Value))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
