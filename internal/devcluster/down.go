package devcluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/corral/corral/internal/coe/controlplane"
	"github.com/corral/corral/internal/ganetidropin"
	"github.com/corral/corral/internal/hypervisor/kvm"
	"github.com/corral/corral/internal/netdev"
)

// Down stops the daemons and qemu processes of a dev cluster. With purge it
// also removes the state directory.
func Down(ctx context.Context, stateDir string, purge bool, logf func(string, ...any)) error {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	st, err := Load(abs)
	if err != nil {
		return err
	}
	// Newest first: corral-rapi, the other master candidates, the extra
	// node daemons, corrald, the etcd members, then the master's node
	// daemon.
	procs := st.Procs
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if !alive(p) {
			continue
		}
		logf("Stopping %s (pid %d)", p.Name, p.PID)
		stop(p.PID, 10*time.Second)
	}
	stopNodeMembers(abs, logf)
	stopCOEControlPlanes(abs, logf)
	cleanKubeletWorkers(abs, logf)
	// Instances survive their node daemon on purpose; a dev cluster going
	// down takes them along.
	ents, _ := os.ReadDir(abs)
	for _, e := range ents {
		kdir := filepath.Join(abs, e.Name(), "kvm")
		if _, err := os.Stat(kdir); err != nil {
			continue
		}
		h, err := kvm.New(kvm.Options{RunDir: filepath.Join(st.RunDir, e.Name(), "kvm"), StateDir: kdir})
		if err != nil {
			continue
		}
		list, err := h.List(ctx)
		if err != nil {
			continue
		}
		for _, r := range list {
			logf("Stopping qemu of instance %s (pid %d)", r.Name, r.PID)
			if err := h.Stop(ctx, r.Name, 0, true); err != nil {
				logf("  %v", err)
			}
			for i := 0; i < 8; i++ {
				_ = netdev.DeleteTap(netdev.TapName(e.Name(), r.UUID, i))
			}
		}
	}
	if err := os.RemoveAll(st.RunDir); err != nil {
		return err
	}
	if purge {
		if st.GanetiRoot != "" {
			removeSsconf(st.GanetiRoot, logf)
		}
		if st.Created {
			logf("Removing %s", abs)
			return os.RemoveAll(abs)
		}
		// Not ours to remove whole: only what Up put there.
		logf("Removing the dev cluster's files from %s", abs)
		for _, e := range ents {
			if e.Name() == "logs" || e.Name() == "master" || e.Name() == "env" || e.Name() == "dev.json" || e.Name() == "etcd" || e.Name() == "rapi" || e.Name() == RAPIEnvFile || e.Name() == BaremetalEnvFile || e.Name() == COEEnvFile || e.Name() == "coe" || e.Name() == "ganeti" || strings.HasPrefix(e.Name(), "node") {
				if err := os.RemoveAll(filepath.Join(abs, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return os.Remove(filepath.Join(abs, "dev.json"))
}

// stopCOEControlPlanes stops the processes of the COE clusters' control
// planes, which outlive their node daemon on purpose (a node daemon
// restart keeps them): every process whose command line names a file
// under the dev cluster's COE directory (<state-dir>/coe).
func stopCOEControlPlanes(abs string, logf func(string, ...any)) {
	dir := filepath.Join(abs, "coe") + "/"
	ents, _ := os.ReadDir("/proc")
	var wg sync.WaitGroup
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		argv0, _, _ := strings.Cut(string(b), "\x00")
		logf("Stopping %s of a COE cluster (pid %d)", filepath.Base(argv0), pid)
		wg.Go(func() { stop(pid, 10*time.Second) })
	}
	wg.Wait()
}

// cleanKubeletWorkers removes what the kubelet workers of COE clusters
// left on the host once their processes are stopped (pods, shims, mounts,
// cgroups, bridges), so that the state directory can go.
func cleanKubeletWorkers(abs string, logf func(string, ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(abs, "coe", "*", "workers", "*"))
	for _, d := range dirs {
		logf("Cleaning up after the kubelet worker %s", d)
		if err := controlplane.CleanWorkerLeftovers(d, controlplane.DefaultWorkerHost(), 10*time.Second); err != nil {
			logf("  %v", err)
		}
	}
}

// removeSsconf removes the ssconf files drop-in mode wrote under root, so
// that Ganeti's tools no longer find a cluster there.
func removeSsconf(root string, logf func(string, ...any)) {
	l := ganetidropin.Layout{Root: root}
	logf("Removing the Ganeti ssconf files from %s", l.DataDir())
	for _, k := range ganetidropin.Keys() {
		if err := os.Remove(l.SsconfPath(k)); err != nil && !errors.Is(err, os.ErrNotExist) {
			logf("  %v", err)
		}
	}
}

// alive checks the pid still runs the binary we started (pids get reused).
func alive(p Proc) bool {
	b, err := os.ReadFile(filepath.Join("/proc", itoa(p.PID), "cmdline"))
	if err != nil || len(p.Args) == 0 {
		return false
	}
	return strings.HasPrefix(string(b), p.Args[0])
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			break
		}
	}
	return string(b[n:])
}

func stop(pid int, grace time.Duration) {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		// A zombie child of ours still answers signal 0; check its state.
		if b, err := os.ReadFile(filepath.Join("/proc", itoa(pid), "stat")); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}
