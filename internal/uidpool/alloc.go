package uidpool

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Allocator hands out uids of a pool on one node. A uid is taken while
// Dir/<uid> exists; the file holds the owner (an instance uuid), so a second
// request by the same owner gets the same uid back and a release removes only
// the owner's own file. Every change happens under an flock on Dir/.lock, so
// node daemons and tools racing on the same directory never hand one uid to
// two owners.
type Allocator struct {
	// Dir holds the lock files; created (0755) on first use.
	Dir string
	// Alive reports whether an owner still needs its uid. A lock file whose
	// owner is not alive and whose uid runs no process is stale and reused.
	// Nil means every owner is alive.
	Alive func(owner string) bool
	// ProcUIDs lists the uids of running processes; nil reads /proc. A uid
	// that runs any process is never handed out (someone else uses it).
	ProcUIDs func() (map[uint32]bool, error)
	// Grace protects a lock file younger than this from being judged stale:
	// the owner takes its uid before it exists where Alive can see it.
	Grace time.Duration
}

const lockName = ".lock"

func (a *Allocator) lockDir() (func(), error) {
	if err := os.MkdirAll(a.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("uidpool: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(a.Dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("uidpool: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("uidpool: lock %s: %w", a.Dir, err)
	}
	return func() { f.Close() }, nil // closing drops the flock
}

// holders reads the lock files: uid -> owner.
func (a *Allocator) holders() (map[uint32]string, error) {
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		return nil, fmt.Errorf("uidpool: %w", err)
	}
	out := map[uint32]string{}
	for _, e := range entries {
		n, err := strconv.ParseUint(e.Name(), 10, 32)
		if err != nil || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(a.Dir, e.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("uidpool: %w", err)
		}
		out[uint32(n)] = string(bytes.TrimSpace(data))
	}
	return out, nil
}

// Acquire returns the uid held by owner, or takes the lowest free uid of the
// pool for it. A pool with no free uid is an ecode.NoRes error that says how
// many instances use it.
func (a *Allocator) Acquire(pool Pool, owner string) (uint32, error) {
	if owner == "" || strings.ContainsAny(owner, "\n/") {
		return 0, fmt.Errorf("uidpool: invalid owner %q", owner)
	}
	if len(pool) == 0 {
		return 0, ecode.Errorf(ecode.Inval, "security_model pool needs a cluster uid pool, and it is empty")
	}
	unlock, err := a.lockDir()
	if err != nil {
		return 0, err
	}
	defer unlock()
	held, err := a.holders()
	if err != nil {
		return 0, err
	}
	for uid, o := range held {
		if o == owner && pool.Contains(uid) {
			return uid, nil
		}
	}
	procs, err := a.procUIDs()
	if err != nil {
		return 0, err
	}
	used := 0
	for _, r := range pool {
		for u := uint64(r[0]); u <= uint64(r[1]); u++ {
			uid := uint32(u)
			if o, ok := held[uid]; ok {
				if a.Alive == nil || a.Alive(o) || procs[uid] || a.young(uid) {
					used++
					continue
				}
				// Stale: its owner is gone and nothing runs under it.
				if err := os.Remove(a.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return 0, fmt.Errorf("uidpool: %w", err)
				}
			}
			if procs[uid] {
				continue
			}
			if err := a.take(uid, owner); err != nil {
				return 0, err
			}
			return uid, nil
		}
	}
	return 0, ecode.Errorf(ecode.NoRes, "no free uid in the pool %s: %d instances use them", pool, used)
}

func (a *Allocator) young(uid uint32) bool {
	st, err := os.Stat(a.path(uid))
	return err == nil && time.Since(st.ModTime()) < a.Grace
}

func (a *Allocator) path(uid uint32) string {
	return filepath.Join(a.Dir, strconv.FormatUint(uint64(uid), 10))
}

func (a *Allocator) take(uid uint32, owner string) error {
	f, err := os.OpenFile(a.path(uid), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("uidpool: take uid %d: %w", uid, err)
	}
	_, werr := f.WriteString(owner + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(a.path(uid))
		return fmt.Errorf("uidpool: take uid %d: %w", uid, werr)
	}
	return nil
}

// Lookup returns the uid owner holds, if any.
func (a *Allocator) Lookup(owner string) (uint32, bool, error) {
	held, err := a.holders()
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	for uid, o := range held {
		if o == owner {
			return uid, true, nil
		}
	}
	return 0, false, nil
}

// Release gives back every uid owner holds. Releasing what is not held
// succeeds.
func (a *Allocator) Release(owner string) error {
	if _, err := os.Stat(a.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	unlock, err := a.lockDir()
	if err != nil {
		return err
	}
	defer unlock()
	held, err := a.holders()
	if err != nil {
		return err
	}
	var errs []error
	for uid, o := range held {
		if o != owner {
			continue
		}
		if err := os.Remove(a.path(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("uidpool: release %s: %w", owner, err)
	}
	return nil
}

func (a *Allocator) procUIDs() (map[uint32]bool, error) {
	if a.ProcUIDs != nil {
		return a.ProcUIDs()
	}
	return ProcessUIDs()
}

// ProcessUIDs returns the real uids of the running processes (/proc).
func ProcessUIDs() (map[uint32]bool, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("uidpool: %w", err)
	}
	out := map[uint32]bool{}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue // the process has exited
		}
		if uid, ok := statusUID(data); ok {
			out[uid] = true
		}
	}
	return out, nil
}

func statusUID(data []byte) (uint32, bool) {
	for line := range strings.SplitSeq(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0, false
		}
		n, err := strconv.ParseUint(f[0], 10, 32)
		return uint32(n), err == nil
	}
	return 0, false
}
