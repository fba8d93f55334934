// Package harness drives a real-process dev cluster for the end-to-end
// tests and the benchmark programs alike: it brings one up in a fresh
// temporary directory, dials its LUXI socket, kills, stops and restarts its
// daemons (corrald, node daemons, etcd members) by the names the dev cluster
// recorded, and tears it down again.
package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
)

// Cluster is a dev cluster, either brought up by Up or attached to.
type Cluster struct {
	// Socket is the master's LUXI socket.
	Socket string
	// State is the dev cluster's record of its daemons; nil when the
	// cluster is known by its socket alone.
	State *devcluster.State
	// Dir is the state directory Up created ("" when attached to).
	Dir string
}

// Up brings up a dev cluster in a new temporary directory named after
// prefix; o.StateDir is ignored. When it fails after creating the
// directory it still returns the Cluster, so the caller can read the logs
// and must call Down.
func Up(ctx context.Context, prefix string, o devcluster.Options) (*Cluster, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, fmt.Errorf("creating the dev cluster's state directory: %w", err)
	}
	c := &Cluster{Dir: dir}
	// The daemons run as other users and must reach their directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		return c, fmt.Errorf("opening the dev cluster's state directory to its daemons: %w", err)
	}
	o.StateDir = dir
	st, err := devcluster.Up(ctx, o)
	if st != nil {
		c.State, c.Socket = st, st.Socket
	}
	return c, err
}

// Attach returns the Cluster of a dev cluster that is already running.
func Attach(st *devcluster.State) *Cluster {
	return &Cluster{Socket: st.Socket, State: st}
}

// Down stops and purges a dev cluster Up brought up and removes its state
// directory; it does nothing for clusters attached to.
func (c *Cluster) Down(ctx context.Context, logf func(string, ...any)) error {
	if c.Dir == "" {
		return nil
	}
	err := devcluster.Down(ctx, c.Dir, true, logf)
	// Down leaves a state directory it did not create itself (ours is from
	// MkdirTemp), and Up may have failed before recording anything for Down
	// to use: the directory is ours to remove either way.
	if rerr := os.RemoveAll(c.Dir); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// Dial opens a new LUXI connection to the master.
func (c *Cluster) Dial(ctx context.Context) (*luxi.Client, error) {
	return luxi.Dial(ctx, c.Socket)
}

// Proc returns the dev cluster's record of the named daemon.
func (c *Cluster) Proc(name string) (devcluster.Proc, error) {
	if c.State == nil {
		return devcluster.Proc{}, fmt.Errorf("%s's pid is unknown for a cluster known by its LUXI socket alone", name)
	}
	for _, p := range c.State.Procs {
		if p.Name == name {
			return p, nil
		}
	}
	return devcluster.Proc{}, fmt.Errorf("the dev cluster has no %s", name)
}

// CorraldPID returns the pid of the running corrald.
func (c *Cluster) CorraldPID() (int, error) {
	p, err := c.Proc("corrald")
	return p.PID, err
}

// Kill sends the named daemon SIGKILL and waits (up to limit) until it is
// gone or a zombie. A daemon that has already exited counts as killed.
func (c *Cluster) Kill(name string, limit time.Duration) error {
	p, err := c.Proc(name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && Alive(p.PID) {
		return fmt.Errorf("killing %s (pid %d): %w", name, p.PID, err)
	}
	if !WaitGone(p.PID, limit) {
		return fmt.Errorf("%s (pid %d) did not die within %s", name, p.PID, limit)
	}
	return nil
}

// Stop sends the named daemon SIGTERM and waits for it to exit (SIGKILL
// after grace, which is then an error). It returns how long the orderly
// stop took. A daemon that has already exited counts as stopped.
func (c *Cluster) Stop(ctx context.Context, name string, grace time.Duration) (time.Duration, error) {
	p, err := c.Proc(name)
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && Alive(p.PID) {
		return 0, fmt.Errorf("stopping %s (pid %d): %w", name, p.PID, err)
	}
	deadline := t0.Add(grace)
	for Alive(p.PID) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			return time.Since(t0), fmt.Errorf("%s (pid %d) did not stop within %s; killed", name, p.PID, grace)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return time.Since(t0), nil
}

// StopCorrald is Stop for the master daemon.
func (c *Cluster) StopCorrald(ctx context.Context, grace time.Duration) (time.Duration, error) {
	return c.Stop(ctx, "corrald", grace)
}

// Restart starts the named, stopped daemon again with its original
// arguments and records its new pid.
func (c *Cluster) Restart(name string) (devcluster.Proc, error) {
	if c.State == nil {
		return devcluster.Proc{}, fmt.Errorf("restarting %s needs a dev cluster", name)
	}
	return devcluster.Restart(c.State, name)
}

// RestartCorrald starts a stopped corrald again with its original arguments
// and measures the time from starting the process to its first answered
// LUXI call (QueryConfigValues), waiting at most limit.
func (c *Cluster) RestartCorrald(ctx context.Context, limit time.Duration) (time.Duration, error) {
	t0 := time.Now()
	if _, err := c.Restart("corrald"); err != nil {
		return 0, err
	}
	for {
		cl, err := c.Dial(ctx)
		if err == nil {
			_, err = cl.QueryConfigValues(ctx, []string{"cluster_name"})
			cl.Close()
			if err == nil {
				return time.Since(t0), nil
			}
		}
		if time.Since(t0) > limit {
			return 0, fmt.Errorf("corrald did not answer within %s after restart: %w", limit, err)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Logs lists the daemons' log files, the etcd members' included.
func (c *Cluster) Logs() []string {
	if c.Dir == "" {
		return nil
	}
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	members, _ := filepath.Glob(filepath.Join(c.Dir, "etcd", "*", "*", "etcd.log"))
	return append(logs, members...)
}

// DumpLogs passes the last tail bytes of every log to logf, each under a
// header naming the file relative to the state directory.
func (c *Cluster) DumpLogs(logf func(string, ...any), tail int) {
	for _, l := range c.Logs() {
		b, _ := os.ReadFile(l)
		if len(b) > tail {
			b = b[len(b)-tail:]
		}
		name, _ := filepath.Rel(c.Dir, l)
		logf("==== %s ====\n%s", name, b)
	}
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which may itself hold ") ".
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && !strings.HasPrefix(s[i+1:], " Z")
}

// WaitGone waits, at most limit, until pid has exited (the dev cluster
// reaps its daemons, but a zombie may linger a moment), and reports
// whether it did.
func WaitGone(pid int, limit time.Duration) bool {
	for deadline := time.Now().Add(limit); Alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
