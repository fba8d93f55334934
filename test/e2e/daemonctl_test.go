package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/devcluster"
	devharness "github.com/corral/corral/internal/devcluster/harness"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/hypervisor/fake"
	"github.com/corral/corral/internal/luxi"
)

// Helpers to stop and start single daemons of a dev cluster, with or
// without failpoints, and to read what they logged.

// daemonWait bounds every wait for a daemon to start, stop or crash.
const daemonWait = 30 * time.Second

// gone reports whether pid has exited (the dev cluster reaps its daemons,
// but a zombie may linger a moment).
func gone(pid int) bool { return !devharness.Alive(pid) }

// waitGone waits, bounded, for pid to exit.
func waitGone(pid int, limit time.Duration) bool { return devharness.WaitGone(pid, limit) }

// stopDaemon ends a daemon with SIGTERM, as its service manager would, and
// waits until it is gone.
func (c *cluster) stopDaemon(name string) {
	c.t.Helper()
	if _, err := c.h.Stop(context.Background(), name, daemonWait); err != nil {
		c.t.Fatal(err)
	}
	if name == "corrald" && c.luxi != nil {
		c.luxi.Close()
		c.luxi = nil
	}
}

// killDaemon ends a daemon with SIGKILL and waits until it is gone.
func (c *cluster) killDaemon(name string) {
	c.t.Helper()
	if err := c.h.Kill(name, daemonWait); err != nil {
		c.t.Fatal(err)
	}
}

// startDaemon starts a stopped daemon with extra environment entries and
// waits until it serves: corrald answers LUXI (and c.luxi talks to it), a
// node daemon accepts connections on its RPC address.
func (c *cluster) startDaemon(name string, env ...string) devcluster.Proc {
	c.t.Helper()
	if old := c.proc(name); !gone(old.PID) {
		// Its successor could not listen, and the old one would answer.
		c.t.Fatalf("starting %s: it still runs as pid %d", name, old.PID)
	}
	p, err := devcluster.RestartWith(c.st, name, env)
	if err != nil {
		c.t.Fatalf("starting %s: %v", name, err)
	}
	deadline := time.Now().Add(daemonWait)
	for {
		var err error
		if name == "corrald" {
			err = c.redial()
		} else {
			var conn net.Conn
			if conn, err = net.DialTimeout("tcp", listenAddr(p), time.Second); err == nil {
				conn.Close()
			}
		}
		if err == nil {
			return p
		}
		if gone(p.PID) || time.Now().After(deadline) {
			c.dumpLogs()
			c.t.Fatalf("%s did not come up (env %v): %v", name, env, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// redial replaces c.luxi with a connection that has answered a call.
func (c *cluster) redial() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := luxi.Dial(ctx, c.st.Socket)
	if err != nil {
		return err
	}
	if _, err := cl.QueryConfigValues(ctx, []string{"cluster_name"}); err != nil {
		cl.Close()
		return err
	}
	if c.luxi != nil {
		c.luxi.Close()
	}
	c.luxi = cl
	return nil
}

// listenAddr is a node daemon's --listen argument.
func listenAddr(p devcluster.Proc) string {
	if i := slices.Index(p.Args, "--listen"); i >= 0 && i+1 < len(p.Args) {
		return p.Args[i+1]
	}
	return ""
}

// logSize is the current length of a daemon's log, to read what it logs
// from now on with logSince.
func (c *cluster) logSize(name string) int64 {
	st, err := os.Stat(c.proc(name).Log)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince is what a daemon logged from offset off on (at most 4 MiB).
func (c *cluster) logSince(name string, off int64) string {
	f, err := os.Open(c.proc(name).Log)
	if err != nil {
		return ""
	}
	defer f.Close()
	b, _ := io.ReadAll(io.NewSectionReader(f, off, 4<<20))
	return string(b)
}

// failpointLine is what a daemon writes just before a failpoint kills it.
func failpointLine(name string, hit int) string {
	return fmt.Sprintf("failpoint %s hit %d: killing the process\n", name, hit)
}

// waitInjectedCrash waits, bounded, for a daemon armed with failpoint
// name=hit to kill itself, and checks from its log that the crash was the
// injected one and that it was armed as asked.
func (c *cluster) waitInjectedCrash(daemon string, pid int, logOff int64, name string, hit int) {
	c.t.Helper()
	if !waitGone(pid, daemonWait) {
		c.dumpLogs()
		c.t.Fatalf("%s armed with %s=%d did not crash within %v", daemon, name, hit, daemonWait)
	}
	log := c.logSince(daemon, logOff)
	armed := fmt.Sprintf("failpoints=\"%s=%d\"", name, hit)
	if !strings.Contains(log, "level=WARN msg=\"failpoints armed") || !strings.Contains(log, armed) {
		c.t.Fatalf("%s did not log a warning naming its armed failpoint %s:\n%s", daemon, armed, log)
	}
	if n := strings.Count(log, "killing the process"); n != 1 || !strings.Contains(log, failpointLine(name, hit)) {
		c.t.Fatalf("%s died, but its log does not show exactly one injected crash %q:\n%s", daemon, failpointLine(name, hit), log)
	}
}

// nodeInstances is what the fake hypervisor of a node has running, read
// from its state file (it survives the node daemon).
func (c *cluster) nodeInstances(node string) []hypervisor.RunningInstance {
	c.t.Helper()
	h, err := fake.New(filepath.Join(c.dir, node, "fake"), hypervisor.NodeResources{})
	if err != nil {
		c.t.Fatalf("fake hypervisor state of %s: %v", node, err)
	}
	l, err := h.List(context.Background())
	if err != nil {
		c.t.Fatalf("fake hypervisor state of %s: %v", node, err)
	}
	return l
}

// waitJob waits, bounded, for a job to end and returns its status and
// result; a job that does not end fails the test with its log.
func (c *cluster) waitJob(id int64, limit time.Duration) (string, []any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	status, res, err := luxi.WaitForJob(ctx, c.luxi, id, nil)
	if err != nil && status == "" {
		qctx, qcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer qcancel()
		rows, _ := c.luxi.QueryJobs(qctx, []int64{id}, []string{"status", "opstatus", "oplog"})
		c.t.Fatalf("job %d did not end within %v: %v; %s", id, limit, err, toJSON(rows))
	}
	return status, res
}
