package nodeserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
)

// Point-in-time copies of running instances' disks ("snapshots"), which an
// export of a running instance reads instead of the disk the guest writes.
// A copy is a hidden file next to its disk (the same filesystem, never
// listed as a disk), made by the instance's hypervisor while the guest
// runs. Every copy is recorded in <state>/snapshots/<name>.json before its
// file exists, so one the job did not remove is found again: the records
// are swept when the daemon starts, since no transfer outlives it.

// snapshotNameRE is what a copy's name looks like (the daemon makes them).
var snapshotNameRE = regexp.MustCompile(`^snap-[0-9a-f]{16}$`)

// snapshotRecord is one copy on this node.
type snapshotRecord struct {
	Name         string    `json:"name"`
	Path         string    `json:"path"`
	InstanceUUID string    `json:"instance_uuid"`
	Disk         int       `json:"disk"`
	Created      time.Time `json:"created"`
}

// snapshotStore keeps the records of this node's copies.
type snapshotStore struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex
}

func (st *snapshotStore) recordPath(name string) string { return filepath.Join(st.dir, name+".json") }

func (st *snapshotStore) save(r snapshotRecord) error {
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		return ecode.ExecErrorf("snapshot records: %w", err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return ecode.ExecErrorf("snapshot record: %w", err)
	}
	if err := atomicfile.WriteFile(st.recordPath(r.Name), data, 0o600); err != nil {
		return ecode.ExecErrorf("snapshot record: %w", err)
	}
	return nil
}

// load returns the record of name; a missing one is NoEnt.
func (st *snapshotStore) load(name string) (snapshotRecord, error) {
	var r snapshotRecord
	if !snapshotNameRE.MatchString(name) {
		return r, ecode.Errorf(ecode.Inval, "invalid snapshot name %q", name)
	}
	data, err := os.ReadFile(st.recordPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return r, ecode.Errorf(ecode.NoEnt, "snapshot %s does not exist on this node (was its node daemon restarted?)", name)
	}
	if err != nil {
		return r, ecode.ExecErrorf("snapshot %s: %w", name, err)
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return r, ecode.ExecErrorf("snapshot %s: corrupt record: %w", name, err)
	}
	return r, nil
}

// remove deletes a copy's file, then its record; an unknown name is fine.
func (st *snapshotStore) remove(name string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, err := st.load(name)
	if ecode.ClassOf(err) == ecode.NoEnt {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.Remove(r.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ecode.ExecErrorf("removing snapshot %s: %w", name, err)
	}
	if err := os.Remove(st.recordPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ecode.ExecErrorf("removing snapshot record %s: %w", name, err)
	}
	return nil
}

// sweep removes every recorded copy: at start no transfer can still read
// one, and the job that made it fails and asks for its removal anyway.
func (st *snapshotStore) sweep() {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			st.log.Warn("cannot list disk snapshots", "dir", st.dir, "err", err)
		}
		return
	}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !snapshotNameRE.MatchString(name) {
			continue
		}
		if err := st.remove(name); err != nil {
			st.log.Warn("cannot remove a leftover disk snapshot", "name", name, "err", err)
			continue
		}
		st.log.Info("removed a leftover disk snapshot", "name", name)
	}
}

// snapshotRoutes registers the snapshot calls and removes the copies a
// previous daemon left.
func (s *Server) snapshotRoutes() {
	s.snaps = &snapshotStore{dir: filepath.Join(s.opts.StateDir, "snapshots"), log: s.log}
	s.snaps.sweep()
	handle(s, nodeapi.DiskSnapshot, s.diskSnapshot)
	handle(s, nodeapi.DiskSnapshotRemove, s.diskSnapshotRemove)
}

// diskSnapshot copies the named disks (all by default) of a running
// instance. If one copy fails, the ones already made are removed.
func (s *Server) diskSnapshot(ctx context.Context, a nodeapi.DiskSnapshotArgs) (any, error) {
	in := a.Instance
	h, err := s.hv(in.Hypervisor)
	if err != nil {
		return nil, err
	}
	snap, ok := h.(hypervisor.DiskSnapshotter)
	if !ok {
		return nil, ecode.Errorf(ecode.State, "hypervisor %s cannot copy the disks of a running instance", h.Name())
	}
	if err := refuseRBDTransfer(in); err != nil {
		return nil, err
	}
	run, err := h.Info(ctx, in.Name)
	if err != nil {
		return nil, err
	}
	if run == nil || run.UUID != in.UUID {
		return nil, hypervisor.NotRunning(in.Name)
	}
	disks := a.Disks
	if len(disks) == 0 {
		for i := range in.Disks {
			disks = append(disks, i)
		}
	}
	out := nodeapi.DiskSnapshotReply{Snapshots: []nodeapi.DiskSnapshotInfo{}}
	for _, i := range disks {
		info, err := s.snapshotDisk(ctx, snap, in, i)
		if err != nil {
			for _, done := range out.Snapshots {
				if rerr := s.snaps.remove(done.Name); rerr != nil {
					s.log.Warn("cannot remove a disk snapshot", "name", done.Name, "err", rerr)
				}
			}
			return nil, err
		}
		out.Snapshots = append(out.Snapshots, info)
	}
	return out, nil
}

// snapshotDisk records, creates and fills the copy of disk i.
func (s *Server) snapshotDisk(ctx context.Context, snap hypervisor.DiskSnapshotter, in nodeapi.InstanceSpec, i int) (nodeapi.DiskSnapshotInfo, error) {
	src, err := s.diskImage(nodeapi.ImpExpIO{Instance: in, Disk: i})
	if err != nil {
		return nodeapi.DiskSnapshotInfo{}, err
	}
	st, err := os.Stat(src)
	if err != nil {
		return nodeapi.DiskSnapshotInfo{}, ecode.ExecErrorf("disk %d of %s: %w", i, in.Name, err)
	}
	if err := checkCopySpace(src, st); err != nil {
		return nodeapi.DiskSnapshotInfo{}, ecode.Errorf(ecode.NoRes, "no room for a copy of disk %d of %s: %w", i, in.Name, err)
	}
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nodeapi.DiskSnapshotInfo{}, ecode.ExecErrorf("snapshot name: %w", err)
	}
	name := "snap-" + hex.EncodeToString(rnd[:])
	r := snapshotRecord{Name: name, Path: filepath.Join(filepath.Dir(src), "."+filepath.Base(src)+"."+name),
		InstanceUUID: in.UUID, Disk: i, Created: time.Now().UTC()}
	if err := s.snaps.save(r); err != nil {
		return nodeapi.DiskSnapshotInfo{}, err
	}
	fail := func(err error) (nodeapi.DiskSnapshotInfo, error) {
		if rerr := s.snaps.remove(name); rerr != nil {
			s.log.Warn("cannot remove a disk snapshot", "name", name, "err", rerr)
		}
		return nodeapi.DiskSnapshotInfo{}, err
	}
	// Root's file: the hypervisor gets a descriptor, never the path.
	f, err := os.OpenFile(r.Path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return fail(ecode.ExecErrorf("snapshot of disk %d of %s: %w", i, in.Name, err))
	}
	err = f.Truncate(st.Size())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(ecode.ExecErrorf("snapshot of disk %d of %s: %w", i, in.Name, err))
	}
	began := time.Now()
	if err := snap.SnapshotDisk(ctx, in.Name, i, r.Path); err != nil {
		return fail(err)
	}
	took := time.Since(began)
	s.log.Info("disk snapshot made", "instance", in.Name, "disk", i, "name", name, "took", took.Round(time.Millisecond))
	return nodeapi.DiskSnapshotInfo{Disk: i, Name: name, SizeMiB: (st.Size() + mib - 1) / mib, Seconds: took.Seconds()}, nil
}

// checkCopySpace refuses a copy that would not fit next to the disk: the
// copy takes at least the space the disk's data takes.
func checkCopySpace(src string, st os.FileInfo) error {
	used := st.Size()
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		used = min(used, sys.Blocks*512)
	}
	var vfs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(src), &vfs); err != nil {
		return err
	}
	if free := int64(vfs.Bavail) * vfs.Bsize; free < used {
		return fmt.Errorf("it needs %d MiB, %d MiB are free in %s", used/mib, free/mib, filepath.Dir(src))
	}
	return nil
}

func (s *Server) diskSnapshotRemove(ctx context.Context, a nodeapi.DiskSnapshotRemoveArgs) (any, error) {
	for _, n := range a.Names {
		if err := s.snaps.remove(n); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// snapshotImage is the copy an export reads for x: it must be a copy of
// the same instance's same disk.
func (s *Server) snapshotImage(x nodeapi.ImpExpIO) (string, error) {
	r, err := s.snaps.load(x.Snapshot)
	if err != nil {
		return "", err
	}
	if r.InstanceUUID != x.Instance.UUID || r.Disk != x.Disk {
		return "", ecode.Errorf(ecode.Inval, "snapshot %s is not a copy of disk %d of instance %s", x.Snapshot, x.Disk, x.Instance.Name)
	}
	return r.Path, nil
}
