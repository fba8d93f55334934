package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
)

// Options tune a Supervisor; zero values take the defaults.
type Options struct {
	Logger *slog.Logger
	// MinBackoff is the wait before restarting a process that died;
	// it doubles with each death up to MaxBackoff, and starts over once
	// a process has run for StableAfter.
	MinBackoff, MaxBackoff time.Duration
	StableAfter            time.Duration
	// StopGrace is how long a process has to exit after SIGTERM before
	// it gets SIGKILL.
	StopGrace time.Duration
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(30*time.Second, o.MinBackoff)
	}
	if o.StableAfter <= 0 {
		o.StableAfter = time.Minute
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 15 * time.Second
	}
}

// Supervisor runs the control planes of the clusters on one node. It is
// owned by the node daemon (root); the processes run as each cluster's
// user. Closing the supervisor leaves the processes running, and a new
// supervisor's Start adopts them: a node daemon restart does not restart
// a control plane. Its methods are safe for concurrent use.
type Supervisor struct {
	opts     Options
	mu       sync.Mutex
	clusters map[string]*supervised
}

// supervised is one cluster under supervision.
type supervised struct {
	cp     *ControlPlane
	lock   *os.File
	cancel context.CancelFunc
	wg     sync.WaitGroup
	procs  []*proc
}

// proc is one component's supervision state.
type proc struct {
	c  Component
	mu sync.Mutex
	h  *handle
	// restarts counts starts after the first (adoption is not a start).
	restarts int
	lastExit string
}

// ComponentStatus is what Status says of one component.
type ComponentStatus struct {
	Name     string
	PID      int // 0 when not running
	Running  bool
	Adopted  bool // found running when supervision began
	Since    time.Time
	Restarts int
	LastExit string // how the last process ended, or why none runs
}

// NewSupervisor makes a supervisor with no clusters.
func NewSupervisor(opts Options) *Supervisor {
	opts.setDefaults()
	return &Supervisor{opts: opts, clusters: map[string]*supervised{}}
}

// Start supervises cp's components: each one already running as it
// should (its pid file names a live process of the cluster's user with
// exactly the component's command line) is adopted, any other process of
// the cluster's is stopped, and the rest are started in order, each once
// what it needs accepts connections. Start returns without waiting for
// the components; WriteFiles must have run.
func (s *Supervisor) Start(cp *ControlPlane) error {
	uuid := cp.ID()
	if s.supervises(uuid) {
		return ecode.Errorf(ecode.Exists, "controlplane: cluster %s is already supervised", uuid)
	}
	if _, err := os.Stat(cp.runDir()); err != nil {
		return ecode.Errorf(ecode.State, "controlplane: cluster %s has no directory to run in (WriteFiles first): %w", uuid, err)
	}
	// The lock keeps any other supervisor, here or in another process,
	// away from the cluster from now on.
	lock, err := lockCluster(cp)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv := &supervised{cp: cp, lock: lock, cancel: cancel}
	for _, c := range cp.components {
		p := &proc{c: c}
		p.h = adopt(cp.PIDPath(c.Name), c.Argv(), cp.spec.UID)
		if p.h != nil {
			s.opts.Logger.Info("adopted a running control plane process", "cluster", uuid, "component", c.Name, "pid", p.h.pid)
		}
		sv.procs = append(sv.procs, p)
	}
	// Whatever else of the cluster runs (a process of an older command
	// line, one whose pid file was lost) must go before its replacement
	// binds the same ports.
	s.stopStrays(sv)
	s.mu.Lock()
	s.clusters[uuid] = sv
	s.mu.Unlock()
	for _, p := range sv.procs {
		sv.wg.Go(func() { s.run(ctx, sv, p) })
	}
	return nil
}

func (s *Supervisor) supervises(uuid string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.clusters[uuid]
	return ok
}

// lockCluster makes sure one supervisor at a time runs a cluster, even
// across processes.
func lockCluster(cp *ControlPlane) (*os.File, error) {
	f, err := os.OpenFile(cp.lockPath(), os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("controlplane: lock of cluster %s: %w", cp.ID(), err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ecode.Errorf(ecode.State, "controlplane: cluster %s is being supervised or stopped by another supervisor", cp.ID())
		}
		return nil, fmt.Errorf("controlplane: lock of cluster %s: %w", cp.ID(), err)
	}
	return f, nil
}

func (s *Supervisor) stopStrays(sv *supervised) {
	cp := sv.cp
	var paths []string
	keep := map[int]bool{}
	for _, p := range sv.procs {
		paths = append(paths, p.c.Path)
		if p.h != nil {
			keep[p.h.pid] = true
		}
	}
	var strays []int
	for _, pid := range clusterProcesses(paths, cp.spec.Dir, cp.spec.UID) {
		if !keep[pid] {
			strays = append(strays, pid)
		}
	}
	if len(strays) == 0 {
		return
	}
	s.opts.Logger.Warn("stopping control plane processes that are not the cluster's current ones", "cluster", cp.ID(), "pids", strays)
	killStrays(strays, func(argv []string) bool {
		return slices.Contains(paths, argv[0]) && slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, cp.spec.Dir+"/") })
	}, cp.spec.UID, s.opts.StopGrace)
}

// run keeps one component running until ctx ends.
func (s *Supervisor) run(ctx context.Context, sv *supervised, p *proc) {
	cp, log := sv.cp, s.opts.Logger.With("cluster", sv.cp.ID(), "component", p.c.Name)
	if p.current() == nil && p.c.After != "" {
		p.setExit("waiting for " + p.c.After)
		if waitForAddress(ctx, p.c.After) != nil {
			return
		}
	}
	backoff := s.opts.MinBackoff
	for first := true; ; first = false {
		h := p.current()
		if h == nil {
			if !first {
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, s.opts.MaxBackoff)
			}
			var err error
			if h, err = s.spawn(cp, p, !first); err != nil {
				log.Error("cannot start a control plane process", "err", err)
				continue
			}
			log.Info("started a control plane process", "pid", h.pid, "restarts", p.restarts)
		}
		select {
		case <-ctx.Done():
			return
		case <-h.done:
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(h.started) >= s.opts.StableAfter {
			backoff = s.opts.MinBackoff
		}
		log.Warn("control plane process ended", "pid", h.pid, "how", h.status, "log", cp.LogPath(p.c.Name))
		p.ended(h)
	}
}

// spawn starts the component and records it.
func (s *Supervisor) spawn(cp *ControlPlane, p *proc, restart bool) (*handle, error) {
	h, err := startChild(p.c, cp.homeDir(), cp.spec.UID, cp.spec.GID, cp.LogPath(p.c.Name))
	if err != nil {
		p.setExit(err.Error())
		return nil, err
	}
	if err := atomicfile.WriteFile(cp.PIDPath(p.c.Name), []byte(pidString(h.pid)), 0o600); err != nil {
		s.opts.Logger.Warn("cannot write a pid file: a node daemon restart will not adopt the process", "cluster", cp.ID(), "component", p.c.Name, "err", err)
	}
	p.mu.Lock()
	p.h = h
	if restart {
		p.restarts++
	}
	p.mu.Unlock()
	return h, nil
}

func (p *proc) current() *handle {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.h
}

func (p *proc) setExit(why string) {
	p.mu.Lock()
	p.lastExit = why
	p.mu.Unlock()
}

// ended forgets the handle of a process that exited.
func (p *proc) ended(h *handle) {
	p.mu.Lock()
	if p.h == h {
		p.h = nil
		p.lastExit = h.status
	}
	p.mu.Unlock()
	h.release()
}

// Status reports each component of a supervised cluster.
func (s *Supervisor) Status(uuid string) ([]ComponentStatus, error) {
	s.mu.Lock()
	sv, ok := s.clusters[uuid]
	s.mu.Unlock()
	if !ok {
		return nil, ecode.Errorf(ecode.NoEnt, "controlplane: cluster %s is not supervised here", uuid)
	}
	out := make([]ComponentStatus, 0, len(sv.procs))
	for _, p := range sv.procs {
		p.mu.Lock()
		st := ComponentStatus{Name: p.c.Name, Restarts: p.restarts, LastExit: p.lastExit}
		if h := p.h; h != nil && !h.exited() {
			st.PID, st.Running, st.Adopted, st.Since = h.pid, true, h.adopted, h.started
		}
		p.mu.Unlock()
		out = append(out, st)
	}
	return out, nil
}

// Stop stops the cluster's processes, last started first (SIGTERM, then
// SIGKILL after the grace period), supervised here or not: processes
// found through pid files and /proc are stopped too. With remove, the
// cluster directory goes as well, so nothing of the cluster is left: no
// process, no listening port, no file.
func (s *Supervisor) Stop(cp *ControlPlane, remove bool) error {
	uuid := cp.ID()
	s.mu.Lock()
	sv, ok := s.clusters[uuid]
	delete(s.clusters, uuid)
	s.mu.Unlock()
	if ok {
		sv.cancel()
		sv.wg.Wait()
	} else {
		if _, err := os.Stat(cp.spec.Dir); errors.Is(err, os.ErrNotExist) {
			return nil // nothing was ever written, or it is gone already
		}
		lock, err := lockCluster(cp)
		if err != nil {
			return err
		}
		sv = &supervised{cp: cp, lock: lock}
		for _, c := range cp.components {
			sv.procs = append(sv.procs, &proc{c: c, h: adopt(cp.PIDPath(c.Name), c.Argv(), cp.spec.UID)})
		}
	}
	for _, p := range slices.Backward(sv.procs) {
		if h := p.current(); h != nil {
			h.terminate(s.opts.StopGrace)
			h.release()
		}
		_ = os.Remove(cp.PIDPath(p.c.Name))
	}
	s.stopStrays(&supervised{cp: cp, procs: sv.procs})
	s.opts.Logger.Info("control plane stopped", "cluster", uuid, "remove", remove)
	sv.lock.Close()
	if remove {
		if err := os.RemoveAll(cp.spec.Dir); err != nil {
			return fmt.Errorf("controlplane: remove the directory of cluster %s: %w", uuid, err)
		}
	}
	return nil
}

// Close stops supervising every cluster and leaves their processes
// running, for the next supervisor to adopt.
func (s *Supervisor) Close() {
	s.mu.Lock()
	clusters := s.clusters
	s.clusters = map[string]*supervised{}
	s.mu.Unlock()
	for _, sv := range clusters {
		sv.cancel()
		sv.wg.Wait()
		for _, p := range sv.procs {
			if h := p.current(); h != nil {
				h.release()
			}
		}
		sv.lock.Close()
	}
}
