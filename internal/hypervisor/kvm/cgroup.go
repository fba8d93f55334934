package kvm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroupParent is the directory under each hierarchy holding one cgroup per
// instance, unless Options.CgroupParent names another.
const cgroupParent = "corral"

// cgroupParentOf is the node's parent cgroup: one per node daemon, so two
// daemons on one host (a test cluster) never share an instance's cgroup
// while it migrates between them.
func (h *Hypervisor) cgroupParentOf() string {
	if h.opts.CgroupParent != "" {
		return h.opts.CgroupParent
	}
	return cgroupParent
}

// cgroupLayout is where the cgroup controllers the driver uses are mounted.
type cgroupLayout struct {
	// V2 is the cgroup2 mount point when it offers both memory and cpu.
	V2 string
	// V1 maps "memory" and "cpu" to their v1 mount points.
	V1 map[string]string
}

// parseMountinfo finds the cgroup mounts in /proc/self/mountinfo's text.
// controllers reads a v2 mount's cgroup.controllers file.
func parseMountinfo(data string, controllers func(mount string) string) cgroupLayout {
	l := cgroupLayout{V1: map[string]string{}}
	for line := range strings.SplitSeq(data, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 5 || len(qf) < 3 {
			continue
		}
		mount := unescapeMount(pf[4])
		switch qf[0] {
		case "cgroup2":
			have := strings.Fields(controllers(mount))
			if l.V2 == "" && slices.Contains(have, "memory") && slices.Contains(have, "cpu") {
				l.V2 = mount
			}
		case "cgroup":
			for opt := range strings.SplitSeq(qf[2], ",") {
				if (opt == "memory" || opt == "cpu") && l.V1[opt] == "" {
					l.V1[opt] = mount
				}
			}
		}
	}
	return l
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func (h *Hypervisor) cgroupLayout() (cgroupLayout, error) {
	path := h.opts.CgroupMountinfo
	if path == "" {
		path = "/proc/self/mountinfo"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return cgroupLayout{}, err
	}
	return parseMountinfo(string(data), func(m string) string {
		b, _ := os.ReadFile(filepath.Join(m, "cgroup.controllers"))
		return string(b)
	}), nil
}

// cgroupMemoryBytes is the memory limit of an instance's qemu: the guest's
// memory plus room for qemu itself (device models, TCG's translation cache,
// I/O buffers), so that the limit stops a runaway process but never a guest
// using the memory it was given.
func cgroupMemoryBytes(memMiB int64) int64 {
	return (memMiB + 512 + memMiB/8) << 20
}

const cpuPeriodUS = 100000

// placeInCgroups creates the instance's cgroups with memory and cpu limits
// and moves pid into them. It returns the directories used; an error means
// the process is not (fully) confined, which the caller reports rather than
// failing the start.
func (h *Hypervisor) placeInCgroups(uuid string, pid int, memMiB int64, vcpus int) ([]string, error) {
	l, err := h.cgroupLayout()
	if err != nil {
		return nil, fmt.Errorf("cgroups: %w", err)
	}
	name := strings.ToLower(uuid[:8])
	quota := strconv.Itoa(vcpus * cpuPeriodUS)
	mem := strconv.FormatInt(cgroupMemoryBytes(memMiB), 10)
	procs := strconv.Itoa(pid)
	if l.V2 != "" {
		parent := filepath.Join(l.V2, h.cgroupParentOf())
		dir := filepath.Join(parent, name)
		err := errors.Join(
			mkdirCgroup(parent),
			writeCgroup(l.V2, "cgroup.subtree_control", "+memory +cpu"),
			writeCgroup(parent, "cgroup.subtree_control", "+memory +cpu"),
			mkdirCgroup(dir),
		)
		if err == nil {
			err = errors.Join(
				writeCgroup(dir, "memory.max", mem),
				writeCgroup(dir, "cpu.max", quota+" "+strconv.Itoa(cpuPeriodUS)),
				writeCgroup(dir, "cgroup.procs", procs),
			)
		}
		if err != nil {
			return nil, fmt.Errorf("cgroup v2 %s: %w", dir, err)
		}
		return []string{dir}, nil
	}
	if l.V1["memory"] == "" || l.V1["cpu"] == "" {
		return nil, fmt.Errorf("cgroups: no memory and cpu controllers mounted (v2 at %q lacks them, v1 has %v)", l.V2, l.V1)
	}
	var dirs []string
	var errs []error
	for _, c := range []struct{ ctrl, file, val string }{
		{"memory", "memory.limit_in_bytes", mem},
		{"cpu", "cpu.cfs_quota_us", quota},
	} {
		dir := filepath.Join(l.V1[c.ctrl], h.cgroupParentOf(), name)
		err := errors.Join(mkdirCgroup(filepath.Dir(dir)), mkdirCgroup(dir))
		if err == nil && c.ctrl == "cpu" {
			err = writeCgroup(dir, "cpu.cfs_period_us", strconv.Itoa(cpuPeriodUS))
		}
		if err == nil {
			err = errors.Join(writeCgroup(dir, c.file, c.val), writeCgroup(dir, "cgroup.procs", procs))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cgroup v1 %s: %w", dir, err))
			continue
		}
		dirs = append(dirs, dir)
	}
	return dirs, errors.Join(errs...)
}

func mkdirCgroup(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

func writeCgroup(dir, file, val string) error {
	// O_TRUNC is harmless on cgroupfs and lets tests use plain directories.
	return os.WriteFile(filepath.Join(dir, file), []byte(val), 0o644)
}

// removeCgroups removes the instance's cgroup directories once its process
// has gone: rmdir on cgroupfs, where the control files are not real files.
// Elsewhere (tests lay cgroups out in plain directories) the files go too.
func (h *Hypervisor) removeCgroups(dirs []string) error {
	var errs []error
	for _, d := range dirs {
		var err error
		if isCgroupFS(d) {
			err = rmdirCgroup(d)
		} else {
			err = os.RemoveAll(d)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func isCgroupFS(path string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == 0x27e0eb || st.Type == 0x63677270 // CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC
}

// confineCgroups puts the started qemu into its cgroups and records the
// outcome. Failing to do so (no permission, no controller) leaves the
// instance running: it is logged and shown in the confinement info.
func (h *Hypervisor) confineCgroups(rec *record, pid int) {
	switch {
	case pid == 0:
		return
	case h.opts.CgroupMountinfo == "none":
		rec.Confinement.CgroupError = "per-instance cgroups are turned off on this node"
	default:
		dirs, err := h.placeInCgroups(rec.Spec.UUID, pid, rec.Spec.MemoryMiB, rec.Spec.VCPUs)
		rec.Confinement.Cgroups = dirs
		if err != nil {
			rec.Confinement.CgroupError = err.Error()
			h.log.Warn("instance runs without (full) cgroup limits", "instance", rec.Spec.Name, "err", err)
		}
	}
	if err := h.saveRecord(rec); err != nil {
		h.log.Warn("cannot record the instance's cgroups", "instance", rec.Spec.Name, "err", err)
	}
}

// rmdirCgroup removes a cgroup directory. A process killed a moment ago may
// still be leaving it (EBUSY until the kernel has finished its exit), so
// the removal is retried for a short while.
func rmdirCgroup(d string) error {
	var err error
	for range 40 {
		if err = os.Remove(d); !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}
