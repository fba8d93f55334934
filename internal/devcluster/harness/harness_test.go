package harness

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// sleeper starts a process that lives until killed; reap says whether the
// test waits for it (so it does not linger as a zombie).
func sleeper(t *testing.T, reap bool) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if !reap {
			_ = cmd.Wait()
		}
		<-done
	})
	if reap {
		go func() { _ = cmd.Wait(); close(done) }()
	} else {
		close(done)
	}
	return cmd
}

func clusterWith(name string, pid int) *Cluster {
	return Attach(&devcluster.State{Socket: "/nonexistent", Procs: []devcluster.Proc{{Name: name, PID: pid}}})
}

func TestKillWaitsUntilTheDaemonIsGone(t *testing.T) {
	// Unreaped: the killed process stays a zombie, which must count as gone.
	cmd := sleeper(t, false)
	c := clusterWith("corral-node node2", cmd.Process.Pid)
	if !Alive(cmd.Process.Pid) {
		t.Fatal("a running process reads as not alive")
	}
	if err := c.Kill("corral-node node2", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if Alive(cmd.Process.Pid) {
		t.Fatal("killed process still reads as alive")
	}
	// Killing it again finds it already gone, which is no error.
	if err := c.Kill("corral-node node2", time.Second); err != nil {
		t.Fatalf("killing an exited daemon: %v", err)
	}
}

func TestStopEndsTheDaemon(t *testing.T) {
	cmd := sleeper(t, true)
	c := clusterWith("corrald", cmd.Process.Pid)
	if pid, err := c.CorraldPID(); err != nil || pid != cmd.Process.Pid {
		t.Fatalf("CorraldPID = %d, %v; want %d", pid, err, cmd.Process.Pid)
	}
	if _, err := c.StopCorrald(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !WaitGone(cmd.Process.Pid, time.Second) {
		t.Fatal("stopped process still alive")
	}
}

func TestWaitGoneGivesUpOnALiveProcess(t *testing.T) {
	cmd := sleeper(t, true)
	if WaitGone(cmd.Process.Pid, 50*time.Millisecond) {
		t.Fatal("WaitGone reported a running process as gone")
	}
}

func TestUnknownDaemons(t *testing.T) {
	bySocket := &Cluster{Socket: "/nonexistent"}
	if _, err := bySocket.CorraldPID(); err == nil || !strings.Contains(err.Error(), "socket alone") {
		t.Fatalf("pid of a socket-only cluster: %v", err)
	}
	if _, err := bySocket.RestartCorrald(context.Background(), time.Second); err == nil {
		t.Fatal("restarting corrald of a socket-only cluster succeeded")
	}
	c := clusterWith("corrald", 1)
	if err := c.Kill("corral-node node9", time.Second); err == nil || !strings.Contains(err.Error(), "no corral-node node9") {
		t.Fatalf("killing an unknown daemon: %v", err)
	}
	if err := bySocket.Down(context.Background(), t.Logf); err != nil {
		t.Fatalf("Down of a cluster attached to: %v", err)
	}
}
