package kvm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/uidpool"
)

// Directories under RunDir for confinement. Their names are not 8 hex digits,
// so they never clash with an instance's run directory.
const (
	dirUIDPool    = "uidpool"
	dirChroots    = "kvm-chroot"
	dirQuarantine = "kvm-chroot-quarantine"
)

// Identity is the user a qemu process runs as.
type Identity struct {
	// Name is what -runas gets: a user name, or "uid:gid" for a pool uid
	// that has no name. "" keeps the caller's user.
	Name string
	// UID and GID are -1 when qemu keeps the caller's user.
	UID, GID int
	// Pool is set when the uid was taken from the cluster's uid pool.
	Pool bool
}

func (h *Hypervisor) uidAllocator() *uidpool.Allocator {
	return &uidpool.Allocator{
		Dir:   filepath.Join(h.opts.RunDir, dirUIDPool),
		Alive: h.uuidHasRecord,
		// From the allocation to the instance's record there are only the
		// node's disk and network preparations.
		Grace: h.opts.StartTimeout,
	}
}

// uuidHasRecord tells the allocator whether an instance still needs its uid:
// it does while the driver has a record of it (written before qemu starts,
// removed after qemu is gone).
func (h *Hypervisor) uuidHasRecord(uuid string) bool {
	recs, err := h.listRecords()
	if err != nil {
		return true // when in doubt, never hand a uid out twice
	}
	for _, r := range recs {
		if r.Spec.UUID == uuid {
			return true
		}
	}
	return false
}

// Identity returns the user the instance's qemu will run as, taking a uid from
// spec.UIDPool under security_model pool. The node calls it before Start to
// hand disks and tap devices to that user; Start reuses the same uid. A uid
// taken here and never started must be given back with ReleaseIdentity.
func (h *Hypervisor) Identity(ctx context.Context, spec hypervisor.InstanceSpec) (Identity, error) {
	if err := hypervisor.CheckSpec(spec); err != nil {
		return Identity{}, err
	}
	hv := hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), spec.HVParams)
	if err := h.ValidateParams(hv); err != nil {
		return Identity{}, err
	}
	return h.identity(hv, spec)
}

func (h *Hypervisor) identity(hv map[string]string, spec hypervisor.InstanceSpec) (Identity, error) {
	switch hv[hypervisor.ParamSecurityModel] {
	case hypervisor.SecurityPool:
		uid, err := h.uidAllocator().Acquire(spec.UIDPool, spec.UUID)
		if err != nil {
			return Identity{}, err
		}
		id := Identity{Name: fmt.Sprintf("%d:%d", uid, uid), UID: int(uid), GID: int(uid), Pool: true}
		if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
			if gid, err := strconv.Atoi(u.Gid); err == nil {
				id.Name, id.GID = u.Username, gid
			}
		}
		if id.UID == 0 {
			_ = h.ReleaseIdentity(spec.UUID)
			return Identity{}, ecode.Errorf(ecode.Inval, "the uid pool contains uid 0: qemu never runs as root")
		}
		return id, nil
	case hypervisor.SecurityUser:
		return lookupIdentity(hv[hypervisor.ParamSecurityDomain])
	}
	return lookupIdentity(h.opts.RunAsUser)
}

func lookupIdentity(name string) (Identity, error) {
	if name == "" {
		return Identity{UID: -1, GID: -1}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return Identity{}, ecode.Errorf(ecode.Environ, "qemu user %q: %v", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return Identity{}, ecode.Errorf(ecode.Environ, "qemu user %q has non-numeric ids", name)
	}
	if uid == 0 {
		return Identity{}, ecode.Errorf(ecode.Environ, "refusing to run qemu as %q: it has uid 0", name)
	}
	return Identity{Name: name, UID: uid, GID: gid}, nil
}

// ReleaseIdentity gives back the pool uid the instance holds, if any.
func (h *Hypervisor) ReleaseIdentity(uuid string) error {
	return h.uidAllocator().Release(uuid)
}

// chrootDir is the instance's jail: outside its run directory, which qemu's
// user owns, so that qemu can never put anything into its own jail.
func (h *Hypervisor) chrootDir(uuid string) string {
	return filepath.Join(h.opts.RunDir, dirChroots, strings.ToLower(uuid[:8]))
}

// prepareChroot creates the empty, root-owned (0700) jail. One found not
// empty is moved aside rather than used or deleted: whatever is in it may be
// evidence of an escape attempt.
func (h *Hypervisor) prepareChroot(name, dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	if err := h.quarantineIfUsed(name, dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("kvm: %w", err)
	}
	return os.Chmod(dir, 0o700)
}

// removeChroot removes an empty jail and quarantines one that is not.
func (h *Hypervisor) removeChroot(name, dir string) error {
	if err := h.quarantineIfUsed(name, dir); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kvm: %w", err)
	}
	return nil
}

func (h *Hypervisor) quarantineIfUsed(name, dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0 {
		return nil
	}
	qdir := filepath.Join(h.opts.RunDir, dirQuarantine)
	if err := os.MkdirAll(qdir, 0o700); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	dst := filepath.Join(qdir, filepath.Base(dir)+"-"+time.Now().UTC().Format("20060102T150405.000000000"))
	if err := os.Rename(dir, dst); err != nil {
		return fmt.Errorf("kvm: quarantine chroot %s: %w", dir, err)
	}
	h.log.Warn("chroot directory was not empty, moved to quarantine", "instance", name, "dir", dir, "quarantine", dst, "entries", len(entries))
	return nil
}

// sandboxOption is qemu's seccomp filter. obsolete=deny refuses system calls
// no current qemu needs; privilege changes stay allowed because -runas drops
// root after the filter is installed.
const sandboxOption = "on,obsolete=deny"

// helpHasSandbox reports whether qemu was built with seccomp support.
func helpHasSandbox(help string) bool {
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "-sandbox ") {
			return true
		}
	}
	return false
}
