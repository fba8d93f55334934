package e2e

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc/bmctest"
)

// corralConsole is a console session of the corral command (`corral
// instance console NAME`, `corral baremetal node console NAME`): the test
// reads what it prints and types on its input.
type corralConsole struct {
	t    *testing.T
	what string // the command, for messages
	cmd  *exec.Cmd
	in   io.WriteCloser
	con  *bmctest.SerialConsole
	pos  int // where the next expect starts
}

// openCorralConsole starts `corral args...` on the cluster; it is killed
// when the test ends if close did not end it.
func openCorralConsole(t *testing.T, c *cluster, args ...string) *corralConsole {
	t.Helper()
	s := &corralConsole{t: t, what: "corral " + strings.Join(args, " "), cmd: exec.Command(filepath.Join(binDir, "corral"), args...)}
	s.cmd.Env = append(os.Environ(), "CORRAL_STATE_DIR="+c.st.StateDir, "CORRAL_RUN_DIR="+c.st.RunDir, "CORRAL_SOCKET="+c.st.Socket)
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = s.cmd.Stdout
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.con = bmctest.NewSerialConsole(out, s.in)
	t.Cleanup(func() { s.cmd.Process.Kill() })
	return s
}

func (s *corralConsole) send(text string) {
	s.t.Helper()
	s.con.Send(s.t, text)
}

// expect waits for want after what was already expected, and moves past
// it; false when d passed.
func (s *corralConsole) expect(want string, d time.Duration) bool {
	end := s.con.TryWaitFor(s.pos, want, d)
	if end < 0 {
		return false
	}
	s.pos = end
	return true
}

func (s *corralConsole) mustExpect(want string, d time.Duration) {
	s.t.Helper()
	s.pos = s.con.WaitFor(s.t, s.pos, want, d)
}

// rescueLogin logs in as the rescue user with the password.
func (s *corralConsole) rescueLogin(password string) {
	s.t.Helper()
	s.pos = loginAsRescue(s.t, s.con, s.pos, password)
}

// run types a command and waits for want, which the command's own echo
// must not hold.
func (s *corralConsole) run(command, want string, d time.Duration) {
	s.t.Helper()
	if strings.Contains(command, want) {
		s.t.Fatalf("the console echoes %q, which holds %q: the test would pass on the echo", command, want)
	}
	s.send(command + "\n")
	s.mustExpect(want, d)
}

// close leaves the console with Ctrl-].
func (s *corralConsole) close() {
	s.t.Helper()
	s.send("\x1d")
	s.in.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
		s.t.Errorf("%s did not leave on Ctrl-]", s.what)
	}
}

// loginAsRescue logs in as the rescue user on con, looking from position
// from, and returns the position after the shell answered. A console
// attached after the prompt was printed shows nothing until the getty
// prints again: ask for one until it comes.
func loginAsRescue(t *testing.T, con *bmctest.SerialConsole, from int, password string) int {
	t.Helper()
	pos := -1
	for i := 0; i < 10 && pos < 0; i++ {
		con.Send(t, "\n")
		pos = con.TryWaitFor(from, "login: ", 3*time.Second)
	}
	if pos < 0 {
		pos = con.WaitFor(t, from, "login: ", time.Second)
	}
	con.Send(t, "rescue\n")
	pos = con.WaitFor(t, pos, "Password: ", 10*time.Second)
	con.Send(t, password+"\n")
	con.Send(t, "echo RESCUE-LOGIN-$((6*7))\n")
	return con.WaitFor(t, pos, "RESCUE-LOGIN-42", 15*time.Second)
}
