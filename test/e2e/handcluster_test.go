package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
)

// handCluster is a one-machine cluster set up by hand, as an operator
// would: its own state and run directories, an address and ports, the CLI
// pointed at them, daemons started directly (no dev cluster).
type handCluster struct {
	t                 *testing.T
	dir, run          string
	ip                string
	rpcPort, joinPort int
	l                 bootstrap.Layout
	env               []string
}

// newHandCluster makes the directories (removed when the test ends) and
// picks the address; tag keeps run directories of parallel tests apart.
func newHandCluster(t *testing.T, tag string) *handCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "corral-"+tag+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	run := fmt.Sprintf("/run/crl-%s%d", tag, os.Getpid())
	t.Cleanup(func() { os.RemoveAll(run) })
	ips, rpcPort, joinPort, err := devcluster.PickAddresses(1)
	if err != nil {
		t.Fatal(err)
	}
	return &handCluster{t: t, dir: dir, run: run, ip: ips[0], rpcPort: rpcPort, joinPort: joinPort,
		l:   bootstrap.Layout{StateDir: dir, RunDir: run},
		env: append(os.Environ(), "CORRAL_STATE_DIR="+dir, "CORRAL_RUN_DIR="+run)}
}

// corral runs the CLI against this cluster.
func (h *handCluster) corral(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "corral"), args...)
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// initArgs is `cluster init` of a fake-hypervisor cluster named name on
// this address, with extra flags.
func (h *handCluster) initArgs(name string, extra ...string) []string {
	args := []string{"cluster", "init", "--master-name", "m1", "--master-ip", h.ip,
		"--rpc-port", strconv.Itoa(h.rpcPort), "--join-port", strconv.Itoa(h.joinPort), "--enabled-hypervisors", "fake"}
	return append(append(args, extra...), name)
}

// startNode starts the node daemon (as root), killed when the test ends.
func (h *handCluster) startNode(extra ...string) <-chan error {
	h.t.Helper()
	args := []string{"--state-dir", h.l.NodeDir(""), "--run-dir", h.l.NodeRunDir(""),
		"--listen", net.JoinHostPort(h.ip, strconv.Itoa(h.rpcPort)), "--hypervisors", "fake",
		"--ssh-dir", filepath.Join(h.l.NodeDir(""), "ssh")} // never the machine's own /root/.ssh
	node := exec.Command(filepath.Join(binDir, "corral-node"), append(args, extra...)...)
	return h.start(node, "node.log")
}

// startMaster starts corrald as corral-master, killed when the test ends,
// and waits until the CLI reaches it. The channel gets its exit.
func (h *handCluster) startMaster() <-chan error {
	h.t.Helper()
	cred, err := bootstrap.MasterCredential()
	if err != nil {
		h.t.Fatal(err)
	}
	master := exec.Command(filepath.Join(binDir, "corrald"), "--state-dir", h.dir, "--run-dir", h.run)
	master.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	exited := h.start(master, "corrald.log")
	waitFor(h.t, 30*time.Second, "corrald's LUXI socket", func() bool {
		_, err := h.corral("cluster", "info")
		return err == nil
	})
	return exited
}

// start runs cmd in its own session with its output in logName; the
// channel gets its exit (once).
func (h *handCluster) start(cmd *exec.Cmd, logName string) <-chan error {
	h.t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	logf, err := os.Create(filepath.Join(h.dir, logName))
	if err != nil {
		h.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		exited <- err
		close(done)
	}()
	h.t.Cleanup(func() { _ = cmd.Process.Kill(); <-done; logf.Close() })
	return exited
}

// log returns a daemon's log, for failure messages.
func (h *handCluster) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(h.dir, name))
	return string(b)
}
