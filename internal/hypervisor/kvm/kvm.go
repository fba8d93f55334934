// Package kvm runs each instance as its own qemu-system-x86_64 process,
// detached from the node daemon (-daemonize) so instances outlive daemon
// restarts, and controls it through QMP on a unix socket.
//
// Everything the driver needs to find an instance again is on disk: a JSON
// record per instance in StateDir, and a run directory per instance in RunDir
// (named by the first 8 characters of its uuid, to keep socket paths short)
// with qmp.sock, serial.sock, serial.log and the pid file. A pid is trusted
// only while /proc/PID/cmdline carries the instance's uuid.
package kvm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// DefaultRunAsUser is the unprivileged user qemu runs as when the node daemon
// runs as root: qemu never keeps root.
const DefaultRunAsUser = "corral-qemu"

// maxSocketPath is the size of sun_path less its terminating NUL.
const maxSocketPath = 107

// Options configure the driver.
type Options struct {
	// RunDir holds the per-instance directories with unix sockets; it must be
	// short because socket paths are limited to 107 bytes.
	RunDir string
	// StateDir holds one JSON record per started instance.
	StateDir string
	// QemuBinary defaults to qemu-system-x86_64 (looked up in PATH).
	QemuBinary string
	// RunAsUser is the user qemu switches to (security_model none). Empty
	// means DefaultRunAsUser when running as root, and no switch otherwise
	// (a test run by an ordinary user, where qemu cannot change user anyway).
	RunAsUser string
	// StartTimeout bounds qemu's start-up until it has daemonized; default 60s.
	StartTimeout time.Duration
	Logger       *slog.Logger
	// CgroupMountinfo is where the cgroup mounts are read from; default
	// /proc/self/mountinfo. "none" turns per-instance cgroups off.
	CgroupMountinfo string
	// CgroupParent is the cgroup (under each hierarchy's root) holding the
	// instances' cgroups; default "corral". The node daemon names one per
	// node, "corral-NODE".
	CgroupParent string
}

// Hypervisor is the kvm driver.
type Hypervisor struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per instance name: start/stop/cleanup
	help  map[string]qemuHelp    // per qemu binary: what its -help offers
}

// qemuHelp is what the driver learns from a qemu binary's -help.
type qemuHelp struct {
	runWith bool // -run-with user=,chroot=
	sandbox bool // -sandbox (built with seccomp)
	spice   bool // -spice (built with SPICE)
}

var _ hypervisor.Hypervisor = (*Hypervisor)(nil)

// New prepares the driver's directories. It does not start or inspect any
// instance; running instances are found through their records on demand.
func New(opts Options) (*Hypervisor, error) {
	if opts.RunDir == "" || opts.StateDir == "" {
		return nil, fmt.Errorf("kvm: RunDir and StateDir are required")
	}
	var err error
	if opts.RunDir, err = filepath.Abs(opts.RunDir); err != nil {
		return nil, fmt.Errorf("kvm: %w", err)
	}
	if opts.StateDir, err = filepath.Abs(opts.StateDir); err != nil {
		return nil, fmt.Errorf("kvm: %w", err)
	}
	if longest := filepath.Join(opts.RunDir, "01234567", fileSerial); len(longest) > maxSocketPath {
		return nil, fmt.Errorf("kvm: run dir %s is too long: socket paths such as %s exceed %d bytes", opts.RunDir, longest, maxSocketPath)
	}
	if opts.QemuBinary == "" {
		opts.QemuBinary = "qemu-system-x86_64"
	}
	if opts.RunAsUser == "" && os.Geteuid() == 0 {
		opts.RunAsUser = DefaultRunAsUser
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// qemu, once it has dropped root, still has to reach its own directory.
	if err := os.MkdirAll(opts.RunDir, 0o755); err != nil {
		return nil, fmt.Errorf("kvm: %w", err)
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("kvm: %w", err)
	}
	return &Hypervisor{
		opts:  opts,
		log:   log.With("hypervisor", hypervisor.KVM),
		locks: map[string]*sync.Mutex{},
		help:  map[string]qemuHelp{},
	}, nil
}

// Name returns "kvm".
func (h *Hypervisor) Name() string { return hypervisor.KVM }

// ValidateParams checks a filled kvm parameter set.
func (h *Hypervisor) ValidateParams(hv map[string]string) error {
	return hypervisor.ValidateParams(hypervisor.KVM, hv)
}

func (h *Hypervisor) lock(name string) func() {
	h.mu.Lock()
	l, ok := h.locks[name]
	if !ok {
		l = &sync.Mutex{}
		h.locks[name] = l
	}
	h.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (h *Hypervisor) tryLock(name string) (func(), bool) {
	h.mu.Lock()
	l, ok := h.locks[name]
	if !ok {
		l = &sync.Mutex{}
		h.locks[name] = l
	}
	h.mu.Unlock()
	if !l.TryLock() {
		return nil, false
	}
	return l.Unlock, true
}

// Start launches qemu for spec and returns once qemu has daemonized.
func (h *Hypervisor) Start(ctx context.Context, spec hypervisor.InstanceSpec) error {
	if err := hypervisor.CheckSpec(spec); err != nil {
		return err
	}
	hv := hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), spec.HVParams)
	if err := h.ValidateParams(hv); err != nil {
		return err
	}
	unlock := h.lock(spec.Name)
	defer unlock()

	old, pid, err := h.find(spec.Name)
	if err != nil {
		return err
	}
	if pid != 0 {
		if old.Spec.UUID == spec.UUID {
			return nil
		}
		return ecode.Errorf(ecode.Exists, "instance %s already runs with uuid %s", spec.Name, old.Spec.UUID)
	}
	if old != nil {
		h.log.Info("removing leftovers of a stopped instance", "instance", spec.Name)
		// The same instance keeps the pool uid the node may have handed its
		// disks to already.
		if err := h.cleanupKeepUID(old, old.Spec.UUID == spec.UUID); err != nil {
			return err
		}
	}
	dir := filepath.Join(h.opts.RunDir, strings.ToLower(spec.UUID[:8]))
	if err := h.checkDirFree(spec.Name, dir); err != nil {
		return err
	}
	res, err := h.NodeInfo(ctx)
	if err != nil {
		return err
	}
	if spec.MemoryMiB > res.MemoryFreeMiB {
		return ecode.Errorf(ecode.NoRes, "not enough memory to start %s: need %d MiB, %d MiB free", spec.Name, spec.MemoryMiB, res.MemoryFreeMiB)
	}
	id, err := h.identity(hv, spec)
	if err != nil {
		return err
	}
	startErr := func(err error) error {
		if id.Pool {
			if rerr := h.ReleaseIdentity(spec.UUID); rerr != nil {
				h.log.Warn("releasing pool uid after failed start", "instance", spec.Name, "err", rerr)
			}
		}
		return err
	}
	if err := checkHostParams(spec, hv, id.UID, id.GID); err != nil {
		return startErr(err)
	}
	features, err := h.qemuFeatures(ctx)
	if err != nil {
		return startErr(err)
	}
	if hv[hypervisor.ParamSpiceBind] != "" && !features.spice {
		return startErr(ecode.Errorf(ecode.Environ, "instance %s: SPICE is configured, but %s is built without it (its -help has no -spice)", spec.Name, h.opts.QemuBinary))
	}
	runAs, uid, gid := id.Name, id.UID, id.GID
	useChroot := hypervisor.Bool(hv, hypervisor.ParamUseChroot)

	rec := &record{Spec: spec, Dir: dir, User: runAs, StartedAt: time.Now().UTC()}
	rec.Confinement = hypervisor.Confinement{
		SecurityModel: hv[hypervisor.ParamSecurityModel], User: runAs, UID: uid, Sandbox: features.sandbox,
	}
	if useChroot {
		rec.Confinement.Chroot = h.chrootDir(spec.UUID)
	}
	rt := Runtime{
		Binary:           h.opts.QemuBinary,
		QMPSocket:        rec.path(fileQMP),
		SerialSocket:     rec.path(fileSerial),
		SerialLog:        rec.path(fileSerialLog),
		PIDFile:          rec.path(filePID),
		VNCSocket:        rec.path(fileVNC),
		GuestAgentSocket: rec.path(fileGuestAgent),
		ChrootDir:        h.chrootDir(spec.UUID),
		RunAs:            runAs,
		RunWith:          features.runWith,
		Sandbox:          features.sandbox,
		NoDirectIO:       map[int]bool{},
	}
	rt.CephFiles = rec.Dir
	if hv[hypervisor.ParamDiskCache] == hypervisor.CacheNone {
		for _, d := range spec.Disks {
			if d.RBD != nil {
				continue // librbd, no file: cache=none only turns the rbd cache off
			}
			direct, err := supportsDirectIO(d.Path)
			if err != nil {
				return startErr(ecode.Errorf(ecode.Environ, "instance %s: disk %d: %v", spec.Name, d.Index, err))
			}
			if !direct {
				h.log.Info("disk does not support O_DIRECT, using writeback cache", "instance", spec.Name, "disk", d.Index, "path", d.Path)
				rt.NoDirectIO[d.Index] = true
			}
		}
	}
	argv, err := BuildCommand(spec, rt)
	if err != nil {
		return startErr(err)
	}

	if err := h.prepareDir(rec, uid, gid, useChroot); err != nil {
		return startErr(err)
	}
	if err := writeCephFiles(spec.Disks, rec.Dir, uid, gid); err != nil {
		_ = h.cleanup(rec)
		return startErr(err)
	}
	// The record goes first: if the daemon dies while qemu starts, the next
	// one still finds (and can stop) the process.
	if err := h.saveRecord(rec); err != nil {
		_ = h.cleanup(rec)
		return startErr(err)
	}
	if err := h.runQemu(ctx, rec, argv); err != nil {
		if pid := livePID(rec); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if cerr := h.cleanup(rec); cerr != nil {
			h.log.Warn("cleanup after failed start", "instance", spec.Name, "err", cerr)
		}
		return startErr(err)
	}
	qpid := livePID(rec)
	h.confineCgroups(rec, qpid)
	if err := afterStart(ctx, rec.path(fileQMP), qpid, spec, hv); err != nil {
		if qpid != 0 {
			_ = syscall.Kill(qpid, syscall.SIGKILL)
			_, _ = waitGone(ctx, qpid, spec.UUID, 10*time.Second)
		}
		if cerr := h.cleanup(rec); cerr != nil {
			h.log.Warn("cleanup after failed start", "instance", spec.Name, "err", cerr)
		}
		return startErr(ecode.Errorf(ecode.Environ, "instance %s: %w", spec.Name, err))
	}
	h.log.Info("instance started", "instance", spec.Name, "uuid", spec.UUID, "pid", qpid, "user", runAs,
		"chroot", rec.Confinement.Chroot, "sandbox", rec.Confinement.Sandbox, "cgroups", rec.Confinement.Cgroups)
	return nil
}

// checkDirFree refuses to start when another live instance uses the same
// run directory (two uuids sharing their first 8 characters).
func (h *Hypervisor) checkDirFree(name, dir string) error {
	recs, err := h.listRecords()
	if err != nil {
		return err
	}
	for _, r := range recs {
		if r.Spec.Name == name || r.Dir != dir {
			continue
		}
		// A dead holder is removed now: its later cleanup would otherwise
		// delete the directory under the new instance.
		if livePID(r) == 0 && time.Since(r.StartedAt) >= h.opts.StartTimeout {
			if unlock, ok := h.tryLock(r.Spec.Name); ok {
				err := h.cleanup(r)
				unlock()
				if err == nil {
					continue
				}
			}
		}
		return ecode.Errorf(ecode.Exists, "instance %s: run directory %s is in use by instance %s", name, dir, r.Spec.Name)
	}
	return nil
}

// qemuFeatures asks the qemu binary what its -help offers, once per binary.
// It also catches a missing binary before anything changes.
func (h *Hypervisor) qemuFeatures(ctx context.Context) (qemuHelp, error) {
	h.mu.Lock()
	v, ok := h.help[h.opts.QemuBinary]
	h.mu.Unlock()
	if ok {
		return v, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, h.opts.QemuBinary, "-help")
	cmd.Env = qemuEnv()
	out, err := cmd.Output()
	if err != nil {
		return v, ecode.Errorf(ecode.Environ, "cannot run %s: %v", h.opts.QemuBinary, err)
	}
	v = qemuHelp{runWith: helpHasRunWithUser(string(out)), sandbox: helpHasSandbox(string(out)), spice: helpHasSpice(string(out))}
	h.mu.Lock()
	h.help[h.opts.QemuBinary] = v
	h.mu.Unlock()
	return v, nil
}

// helpHasRunWithUser reports whether qemu's help text offers -run-with with a
// user= part: qemu 9.0 has -run-with but only for chroot, and needs -runas.
func helpHasRunWithUser(help string) bool {
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "-run-with ") && strings.Contains(line, "user=") {
			return true
		}
	}
	return false
}

// supportsDirectIO reports whether path can be opened with O_DIRECT, which
// cache=none needs; tmpfs, for one, refuses it.
func supportsDirectIO(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if errors.Is(err, syscall.EINVAL) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	f.Close()
	return true, nil
}

func (h *Hypervisor) prepareDir(rec *record, uid, gid int, chroot bool) error {
	if err := os.RemoveAll(rec.Dir); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	if err := os.Mkdir(rec.Dir, 0o750); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	// qemu drops to uid after creating its sockets and files here; it must
	// still be able to remove its pid file on exit.
	if uid >= 0 {
		if err := os.Chown(rec.Dir, uid, gid); err != nil {
			return fmt.Errorf("kvm: %w", err)
		}
	}
	if chroot {
		// Empty and root-owned: the jail gives qemu nothing to read or write.
		if err := h.prepareChroot(rec.Spec.Name, h.chrootDir(rec.Spec.UUID)); err != nil {
			return err
		}
	}
	return nil
}

// qemuEnv is qemu's whole environment: nothing of the daemon's leaks in.
func qemuEnv() []string { return []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"} }

func (h *Hypervisor) runQemu(ctx context.Context, rec *record, argv []string) error {
	logf, err := os.OpenFile(rec.path(fileStartLog), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	defer logf.Close()
	cctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, argv[0], argv[1:]...)
	cmd.Env = qemuEnv()
	cmd.Dir = "/"
	// A file, not a pipe: the daemonized child keeps the descriptors until it
	// has finished starting, and a pipe would make Wait hang on it.
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session, so signals meant for the daemon's process group never
	// reach a guest.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	h.log.Debug("starting qemu", "instance", rec.Spec.Name, "argv", argv)
	runErr := cmd.Run()
	if runErr == nil {
		if livePID(rec) != 0 {
			return nil
		}
		runErr = errors.New("qemu exited right after starting")
	}
	out, _ := os.ReadFile(rec.path(fileStartLog))
	msg := strings.TrimSpace(string(out))
	if len(msg) > 2000 {
		msg = msg[len(msg)-2000:]
	}
	return ecode.New(ecode.HypervisorError, ecode.Environ,
		fmt.Sprintf("failed to start instance %s: %v: %s", rec.Spec.Name, runErr, msg))
}

// Stop shuts the instance down: ACPI power button, then SIGKILL once timeout
// has passed (at once when force). The run directory and record go with it.
func (h *Hypervisor) Stop(ctx context.Context, name string, timeout time.Duration, force bool) error {
	unlock := h.lock(name)
	defer unlock()
	rec, pid, err := h.find(name)
	if err != nil || rec == nil {
		return err
	}
	if pid != 0 && !force {
		pctx, cancel := context.WithTimeout(ctx, defaultQMPTimeout)
		_, err := qmpDo(pctx, rec.path(fileQMP), "system_powerdown", nil)
		cancel()
		if err != nil {
			h.log.Warn("graceful shutdown failed, killing", "instance", name, "err", err)
		} else {
			gone, err := waitGone(ctx, pid, rec.Spec.UUID, timeout)
			if err != nil {
				return err
			}
			if gone {
				pid = 0
			} else {
				h.log.Warn("guest did not power off in time, killing", "instance", name, "timeout", timeout)
			}
		}
	}
	if pid != 0 {
		// A forced stop, or a guest that ignored the power button, still
		// lets qemu close its disks: "quit" ends it at once without the
		// guest, and librbd leaves no watch behind that would keep the
		// image busy for half a minute.
		if quitQemu(ctx, rec, pid) {
			pid = 0
		}
	}
	if pid != 0 {
		if processIsInstance(pid, rec.Spec.UUID) {
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kvm: kill %s (pid %d): %w", name, pid, err)
			}
		}
		gone, err := waitGone(ctx, pid, rec.Spec.UUID, 30*time.Second)
		if err != nil {
			return err
		}
		if !gone {
			return ecode.ExecErrorf("instance %s: qemu (pid %d) survived SIGKILL", name, pid)
		}
	}
	if err := h.cleanup(rec); err != nil {
		return err
	}
	h.log.Info("instance stopped", "instance", name)
	return nil
}

// quitQemu asks qemu to quit over QMP and reports whether it has gone
// within a few seconds.
func quitQemu(ctx context.Context, rec *record, pid int) bool {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	wait := 3 * time.Second
	if _, err := qmpDo(qctx, rec.path(fileQMP), "quit", nil); err != nil {
		wait = 500 * time.Millisecond // it may have gone before answering
	}
	gone, err := waitGone(ctx, pid, rec.Spec.UUID, wait)
	return err == nil && gone
}

// waitGone waits until pid is no longer the instance's qemu; false when it
// still is after d.
func waitGone(ctx context.Context, pid int, uuid string, d time.Duration) (bool, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	// Polling: qemu is not our child, so there is nothing to wait(2) on.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if !processIsInstance(pid, uuid) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return !processIsInstance(pid, uuid), nil
		case <-tick.C:
		}
	}
}

// Reboot resets the guest (QMP system_reset), like pressing the reset button.
func (h *Hypervisor) Reboot(ctx context.Context, name string) error {
	rec, pid, err := h.find(name)
	if err != nil {
		return err
	}
	if pid == 0 {
		return hypervisor.NotRunning(name)
	}
	if _, err := qmpDo(ctx, rec.path(fileQMP), "system_reset", nil); err != nil {
		return ecode.ExecErrorf("reboot %s: %w", name, err)
	}
	return nil
}

// List returns the instances whose qemu runs, sorted by name. Records left by
// qemu processes that have exited (guest powered off, crash) are removed.
func (h *Hypervisor) List(ctx context.Context) ([]hypervisor.RunningInstance, error) {
	recs, err := h.listRecords()
	if err != nil {
		return nil, err
	}
	var out []hypervisor.RunningInstance
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pid := livePID(r)
		if pid == 0 {
			h.collect(r)
			continue
		}
		out = append(out, h.describe(ctx, r, pid))
	}
	return out, nil
}

// Info returns the instance if its qemu runs, nil otherwise.
func (h *Hypervisor) Info(ctx context.Context, name string) (*hypervisor.RunningInstance, error) {
	rec, pid, err := h.find(name)
	if err != nil || rec == nil {
		return nil, err
	}
	if pid == 0 {
		h.collect(rec)
		return nil, nil
	}
	ri := h.describe(ctx, rec, pid)
	return &ri, nil
}

// collect removes what a qemu that exited on its own left behind, unless a
// start of that instance may be in progress (here or in another process).
func (h *Hypervisor) collect(r *record) {
	if time.Since(r.StartedAt) < h.opts.StartTimeout {
		return
	}
	unlock, ok := h.tryLock(r.Spec.Name)
	if !ok {
		return
	}
	defer unlock()
	if cur, pid, err := h.find(r.Spec.Name); err != nil || cur == nil || pid != 0 || cur.StartedAt != r.StartedAt {
		return
	}
	h.log.Info("instance's qemu has exited, removing its run directory", "instance", r.Spec.Name)
	if err := h.cleanup(r); err != nil {
		h.log.Warn("cleanup of exited instance", "instance", r.Spec.Name, "err", err)
	}
}

func (h *Hypervisor) describe(ctx context.Context, r *record, pid int) hypervisor.RunningInstance {
	ri := hypervisor.RunningInstance{
		Name: r.Spec.Name, UUID: r.Spec.UUID, State: hypervisor.StateRunning,
		MemoryMiB: r.Spec.MemoryMiB, VCPUs: r.Spec.VCPUs, PID: pid, StartedAt: r.StartedAt,
	}
	conf := r.Confinement
	conf.Cgroups = slices.Clone(conf.Cgroups)
	ri.Confinement = &conf
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := queryStatus(qctx, r.path(fileQMP))
	if err != nil {
		// The process is there; a busy or unreachable monitor does not make
		// the guest any less alive.
		h.log.Debug("query-status failed", "instance", r.Spec.Name, "err", err)
		return ri
	}
	ri.State = stateFromQMP(st.Status)
	return ri
}

// stateFromQMP maps qemu's RunState names onto the states Corral reports.
func stateFromQMP(status string) hypervisor.State {
	switch status {
	case "running", "debug":
		return hypervisor.StateRunning
	case "shutdown":
		return hypervisor.StateStopped
	case "guest-panicked", "internal-error", "io-error":
		return hypervisor.StateCrashed
	default: // paused, prelaunch, suspended, inmigrate, postmigrate, watchdog, ...
		return hypervisor.StatePaused
	}
}

// NodeInfo reports memory from /proc/meminfo with every running instance's
// full memory counted as used: guests touch their memory lazily, and the
// memory promised to them is not free for new instances.
func (h *Hypervisor) NodeInfo(ctx context.Context) (hypervisor.NodeResources, error) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return hypervisor.NodeResources{}, fmt.Errorf("kvm: %w", err)
	}
	mi, err := parseMeminfo(data)
	if err != nil {
		return hypervisor.NodeResources{}, err
	}
	recs, err := h.listRecords()
	if err != nil {
		return hypervisor.NodeResources{}, err
	}
	var promisedKiB, rssKiB int64
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return hypervisor.NodeResources{}, err
		}
		pid := livePID(r)
		if pid == 0 {
			continue
		}
		promisedKiB += r.Spec.MemoryMiB * 1024
		if st, err := readProcStatus(pid); err == nil {
			rssKiB += min(st.RSSKiB, r.Spec.MemoryMiB*1024)
		}
	}
	return nodeResources(mi, promisedKiB, rssKiB, runtime.NumCPU()), nil
}

func nodeResources(mi meminfo, promisedKiB, rssKiB int64, cpus int) hypervisor.NodeResources {
	free := mi.AvailableKiB + rssKiB - promisedKiB
	node := mi.TotalKiB - mi.AvailableKiB - rssKiB
	return hypervisor.NodeResources{
		MemoryTotalMiB: mi.TotalKiB / 1024,
		MemoryFreeMiB:  max(free, 0) / 1024,
		MemoryNodeMiB:  max(node, 0) / 1024,
		CPUs:           cpus,
		Hypervisor:     hypervisor.KVM,
	}
}

// Console connects to the instance's serial console socket.
func (h *Hypervisor) Console(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	rec, pid, err := h.find(name)
	if err != nil {
		return nil, err
	}
	if pid == 0 {
		return nil, hypervisor.NotRunning(name)
	}
	if !hypervisor.Bool(hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), rec.Spec.HVParams), hypervisor.ParamSerialConsole) {
		return nil, ecode.Errorf(ecode.State, "instance %s has no serial console (serial_console is off)", name)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", rec.path(fileSerial))
	if err != nil {
		return nil, ecode.ExecErrorf("console of %s: %w", name, err)
	}
	return conn, nil
}

// ConsoleLog is the serial log of a started instance, "" when there is none.
func (h *Hypervisor) ConsoleLog(name string) string {
	rec, err := h.loadRecord(name)
	if err != nil || rec == nil {
		return ""
	}
	if !hypervisor.Bool(hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), rec.Spec.HVParams), hypervisor.ParamSerialConsole) {
		return ""
	}
	return rec.path(fileSerialLog)
}
