package controlplane

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
)

func fastOptions() Options {
	return Options{MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, StopGrace: 5 * time.Second}
}

// startedCluster writes a cluster with fake components and starts it,
// waiting for every component to run.
func startedCluster(t *testing.T, sup *Supervisor) *ControlPlane {
	t.Helper()
	requireRoot(t)
	base := baseDir(t)
	cp, err := New(testSpec(t, base, "c1", fakeToolsDir(t, base)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = NewSupervisor(fastOptions()).Stop(cp, true) })
	if err := sup.Start(cp); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "every component running", func() bool { return allRunning(t, sup, cp) })
	return cp
}

func allRunning(t *testing.T, sup *Supervisor, cp *ControlPlane) bool {
	st, err := sup.Status(cp.Spec().ClusterUUID)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st {
		if !c.Running {
			return false
		}
	}
	return len(st) == len(cp.Components())
}

func pids(t *testing.T, sup *Supervisor, uuid string) map[string]int {
	t.Helper()
	st, err := sup.Status(uuid)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, c := range st {
		out[c.Name] = c.PID
	}
	return out
}

func status(t *testing.T, sup *Supervisor, uuid, name string) ComponentStatus {
	t.Helper()
	st, err := sup.Status(uuid)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no component %s", name)
	return ComponentStatus{}
}

func TestSupervisorRunsEachComponentAsTheClusterUserInItsOwnSession(t *testing.T) {
	sup := NewSupervisor(fastOptions())
	defer sup.Close()
	cp := startedCluster(t, sup)
	for name, pid := range pids(t, sup, "c1") {
		if owner := procOwner(pid); owner != cp.Spec().UID {
			t.Errorf("%s (pid %d) runs as uid %d, want %d", name, pid, owner, cp.Spec().UID)
		}
		if sid, err := unix.Getsid(pid); err != nil || sid != pid {
			t.Errorf("%s (pid %d) is in session %d, want its own", name, pid, sid)
		}
		b, err := os.ReadFile(cp.PIDPath(name))
		if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
			t.Errorf("pid file of %s: %q, %v; want %d", name, b, err, pid)
		}
		if argv, _, _ := readProc(pid); !strings.HasSuffix(argv[0], "/tools/"+name) {
			t.Errorf("pid %d runs %v, not %s", pid, argv, name)
		}
	}
	if err := sup.Start(cp); ecode.ClassOf(err) != ecode.Exists {
		t.Errorf("starting a supervised cluster again: %v, want %s", err, ecode.Exists)
	}
	other := NewSupervisor(fastOptions())
	defer other.Close()
	if err := other.Start(cp); ecode.ClassOf(err) != ecode.State {
		t.Errorf("a second supervisor took a supervised cluster: %v, want %s", err, ecode.State)
	}
}

func TestSupervisorRestartsADeadProcess(t *testing.T) {
	sup := NewSupervisor(fastOptions())
	defer sup.Close()
	cp := startedCluster(t, sup)
	before := status(t, sup, "c1", APIServer)
	if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the API server restarted", func() bool {
		st := status(t, sup, "c1", APIServer)
		return st.Running && st.PID != before.PID
	})
	after := status(t, sup, "c1", APIServer)
	if after.Restarts != 1 || after.LastExit != "killed by SIGKILL" {
		t.Errorf("after a kill: restarts %d, last exit %q", after.Restarts, after.LastExit)
	}
	b, _ := os.ReadFile(cp.PIDPath(APIServer))
	if strings.TrimSpace(string(b)) != strconv.Itoa(after.PID) {
		t.Errorf("pid file says %q after the restart, want %d", b, after.PID)
	}
	for _, other := range []string{Etcd, ControllerManager, Scheduler, Kwok} {
		if st := status(t, sup, "c1", other); st.Restarts != 0 {
			t.Errorf("%s restarted %d times when only the API server died", other, st.Restarts)
		}
	}
}

func TestANewSupervisorAdoptsTheRunningProcesses(t *testing.T) {
	first := NewSupervisor(fastOptions())
	cp := startedCluster(t, first)
	before := pids(t, first, "c1")
	first.Close() // as the node daemon does when it stops
	for name, pid := range before {
		if procOwner(pid) != cp.Spec().UID {
			t.Fatalf("%s (pid %d) did not outlive its supervisor", name, pid)
		}
	}
	second := NewSupervisor(fastOptions())
	defer second.Close()
	if err := second.Start(cp); err != nil {
		t.Fatal(err)
	}
	st, err := second.Status("c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range st {
		if !c.Running || !c.Adopted || c.PID != before[c.Name] || c.Restarts != 0 {
			t.Errorf("%s after the restart: %+v, want pid %d adopted", c.Name, c, before[c.Name])
		}
	}
	// An adopted process that dies is restarted like a child.
	if err := syscall.Kill(before[Scheduler], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the adopted scheduler replaced", func() bool {
		s := status(t, second, "c1", Scheduler)
		return s.Running && s.PID != before[Scheduler] && !s.Adopted
	})
}

func TestAdoptionChecksTheCommandLineAndTheUser(t *testing.T) {
	requireRoot(t)
	// A live process of root whose pid a pid file holds: not ours.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()
	base := baseDir(t)
	cp, err := New(testSpec(t, base, "c1", fakeToolsDir(t, base)))
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.WriteFiles(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp.PIDPath(Kwok), []byte(strconv.Itoa(sleeper.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A process of the cluster's user running the scheduler binary with
	// the cluster's directory but an older command line.
	var stale *exec.Cmd
	for _, c := range cp.Components() {
		if c.Name == Scheduler {
			stale = exec.Command(c.Path, append(c.Args[:len(c.Args):len(c.Args)], "--v=9")...)
		}
	}
	stale.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(cp.Spec().UID), Gid: uint32(cp.Spec().GID)}}
	if err := stale.Start(); err != nil {
		t.Fatal(err)
	}
	staleDone := make(chan error, 1)
	go func() { staleDone <- stale.Wait() }()
	if err := os.WriteFile(cp.PIDPath(Scheduler), []byte(strconv.Itoa(stale.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	sup := NewSupervisor(fastOptions())
	defer sup.Close()
	t.Cleanup(func() { _ = NewSupervisor(fastOptions()).Stop(cp, true) })
	if err := sup.Start(cp); err != nil {
		t.Fatal(err)
	}
	select {
	case <-staleDone:
	case <-time.After(10 * time.Second):
		t.Error("the stale scheduler still runs after Start")
	}
	waitFor(t, 30*time.Second, "every component running", func() bool { return allRunning(t, sup, cp) })
	for _, c := range []string{Kwok, Scheduler} {
		st := status(t, sup, "c1", c)
		if st.Adopted || st.PID == sleeper.Process.Pid || st.PID == stale.Process.Pid {
			t.Errorf("%s: %+v; adopted a process that is not the component", c, st)
		}
	}
	if procOwner(sleeper.Process.Pid) != 0 {
		t.Error("root's sleep named by a forged pid file was killed")
	}
}

func TestStopRemovesEverything(t *testing.T) {
	sup := NewSupervisor(fastOptions())
	defer sup.Close()
	cp := startedCluster(t, sup)
	spec := cp.Spec()
	running := pids(t, sup, "c1")
	waitFor(t, 10*time.Second, "the API server and etcd listening", func() bool {
		return listening(spec.APIServerPort) && listening(spec.EtcdClientPort)
	})
	if err := sup.Stop(cp, true); err != nil {
		t.Fatal(err)
	}
	for name, pid := range running {
		if procOwner(pid) != -1 {
			t.Errorf("%s (pid %d) still runs", name, pid)
		}
	}
	if left := clusterProcesses([]string{spec.Tools.Path("etcd")}, spec.Dir, spec.UID); len(left) > 0 {
		t.Errorf("processes of the cluster left: %v", left)
	}
	for _, p := range []int{spec.APIServerPort, spec.EtcdClientPort, spec.EtcdPeerPort} {
		if listening(p) {
			t.Errorf("port %d still listens", p)
		}
	}
	if _, err := os.Stat(spec.Dir); !os.IsNotExist(err) {
		t.Errorf("the cluster directory is still there: %v", err)
	}
	if _, err := sup.Status("c1"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Errorf("Status of a stopped cluster: %v", err)
	}
	if err := sup.Stop(cp, true); err != nil {
		t.Errorf("stopping a removed cluster again: %v", err)
	}
}

func TestStopWithoutSupervisionFindsTheProcesses(t *testing.T) {
	first := NewSupervisor(fastOptions())
	cp := startedCluster(t, first)
	running := pids(t, first, "c1")
	first.Close()
	// As a node daemon that restarted and is told to delete the cluster.
	if err := NewSupervisor(fastOptions()).Stop(cp, false); err != nil {
		t.Fatal(err)
	}
	for name, pid := range running {
		if procOwner(pid) != -1 {
			t.Errorf("%s (pid %d) still runs", name, pid)
		}
	}
	if _, err := os.Stat(cp.PKIPath("ca.crt")); err != nil {
		t.Errorf("Stop without remove removed files: %v", err)
	}
	if _, err := os.Stat(cp.PIDPath(Etcd)); !os.IsNotExist(err) {
		t.Errorf("pid file of a stopped etcd left: %v", err)
	}
}
