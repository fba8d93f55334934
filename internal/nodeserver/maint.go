package nodeserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/seconds"
)

func (s *Server) maintRoutes() {
	handle(s, nodeapi.HasIPAddress, s.hasIPAddress)
	handle(s, nodeapi.RunCommand, s.runCommand)
	handle(s, nodeapi.WriteFile, s.writeFile)
	handle(s, nodeapi.ActivateMasterIP, s.activateMasterIP)
	handle(s, nodeapi.DeactivateMasterIP, s.deactivateMasterIP)
	handle(s, nodeapi.MasterIPStatus, s.masterIPStatus)
}

// hasIPAddress answers whether this node owns the address, as Ganeti
// decides it: a socket can be bound to it.
func (s *Server) hasIPAddress(ctx context.Context, a nodeapi.HasIPAddressArgs) (any, error) {
	ip := net.ParseIP(a.Address)
	if ip == nil {
		return nil, ecode.Errorf(ecode.Inval, "Invalid IP address '%s'", a.Address)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: ip})
	if err != nil {
		return false, nil
	}
	ln.Close()
	return true, nil
}

// commandEnv is the environment cluster commands run with: root's, as a
// fresh login would give it, not the daemon's, and CORRAL_NODE_NAME, the
// node's name in the cluster.
var commandEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8", "SHELL=/bin/sh", "USER=root", "LOGNAME=root"}

// commandKillGrace is how long a command's processes get after SIGKILL to
// let go of its output pipe.
const commandKillGrace = 5 * time.Second

func (s *Server) clusterCommandsAllowed(what string) error {
	if s.opts.NoClusterCommands {
		return ecode.New(ecode.PermissionDenied, ecode.Inval, fmt.Sprintf("node %s runs with --cluster-commands=false: it takes no %s", s.name, what))
	}
	return nil
}

// runCommand runs a shell command as root in its own process group, with
// no input, and returns its exit code and combined output (cut at
// MaxCommandOutput). At the timeout, or when the master gives up, the
// whole group is killed.
func (s *Server) runCommand(ctx context.Context, a nodeapi.RunCommandArgs) (any, error) {
	if err := s.clusterCommandsAllowed("cluster commands"); err != nil {
		return nil, err
	}
	if a.Command == "" {
		return nil, ecode.Errorf(ecode.Inval, "empty command")
	}
	timeout := seconds.Duration(a.Timeout)
	if timeout <= 0 {
		timeout = 5 * time.Minute
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, "/bin/sh", "-c", a.Command)
	cmd.Dir, cmd.Env = "/", append(slices.Clone(commandEnv), "CORRAL_NODE_NAME="+s.name)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = commandKillGrace
	out := &limitedBuffer{max: nodeapi.MaxCommandOutput}
	cmd.Stdout, cmd.Stderr = out, out
	s.log.Info("running a cluster command", "bytes", len(a.Command), "timeout", timeout)
	err := cmd.Run()
	if cmd.ProcessState == nil {
		return nil, fmt.Errorf("starting the command: %w", err)
	}
	r := nodeapi.RunCommandReply{Output: out.String(), Truncated: out.cut, ExitCode: cmd.ProcessState.ExitCode()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case cctx.Err() != nil && ctx.Err() == nil:
		r.TimedOut, r.ExitCode = true, -1
	case errors.As(err, &ee), errors.Is(err, exec.ErrWaitDelay):
	default:
		return nil, fmt.Errorf("running the command: %w", err)
	}
	s.log.Info("cluster command ended", "exit_code", r.ExitCode, "timed_out", r.TimedOut, "output_bytes", out.n)
	return r, nil
}

// limitedBuffer keeps the first max bytes written to it and counts the
// rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
	n   int
	cut bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	b.n += len(p)
	if room := b.max - b.Len(); room < len(p) {
		b.cut = true
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// writeFile replaces a file, owned by root, atomically. The path must be
// absolute and clean, and its directory must exist; a directory is not
// replaced.
func (s *Server) writeFile(ctx context.Context, a nodeapi.WriteFileArgs) (any, error) {
	if err := s.clusterCommandsAllowed("copied files"); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(a.Path) || filepath.Clean(a.Path) != a.Path || a.Path == "/" {
		return nil, ecode.Errorf(ecode.Inval, "the path %q is not absolute and clean", a.Path)
	}
	if a.Mode > 0o777 {
		return nil, ecode.Errorf(ecode.Inval, "mode %04o: only permission bits may be given", a.Mode)
	}
	if fi, err := os.Lstat(a.Path); err == nil && fi.IsDir() {
		return nil, ecode.Errorf(ecode.Inval, "%s is a directory", a.Path)
	}
	if err := atomicfile.WriteFile(a.Path, a.Data, os.FileMode(a.Mode)); err != nil {
		return nil, fmt.Errorf("writing %s: %w", a.Path, err)
	}
	s.log.Info("wrote a copied file", "path", a.Path, "bytes", len(a.Data), "mode", fmt.Sprintf("%04o", a.Mode))
	return nil, nil
}
