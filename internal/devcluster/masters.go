package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/forwardtls"
	"github.com/corral/corral/internal/luxi"
)

// maxMasters bounds Options.Masters: on one machine more candidates only
// add load.
const maxMasters = 9

// CorraldName is the process name of the n-th corrald (from 1): "corrald"
// for the first, "corrald N" for the others.
func CorraldName(n int) string {
	if n == 1 {
		return "corrald"
	}
	return "corrald " + strconv.Itoa(n)
}

// CandidateName is the n-th corrald's name in the master election. The
// first is the master node's name; the others stand in for candidates on
// other machines.
func CandidateName(n int) string {
	if n == 1 {
		return "node1"
	}
	return "node1-" + strconv.Itoa(n)
}

// candidateName is the n-th corrald's name in the master election under
// these options (see Options.CandidatesOnNodes).
func (o Options) candidateName(n int) string {
	if o.CandidatesOnNodes {
		return "node" + strconv.Itoa(n)
	}
	return CandidateName(n)
}

// candidateRunDir is the run directory of the n-th corrald: the cluster's
// for the first, a directory of its own below it for the others.
func candidateRunDir(runDir string, n int) string {
	if n == 1 {
		return runDir
	}
	return filepath.Join(runDir, "c"+strconv.Itoa(n))
}

// CandidateSocket is the LUXI socket of the n-th corrald.
func CandidateSocket(runDir string, n int) string {
	return bootstrap.Layout{RunDir: candidateRunDir(runDir, n)}.Socket()
}

func corraldLog(n int) string {
	if n == 1 {
		return "corrald.log"
	}
	return "corrald-" + strconv.Itoa(n) + ".log"
}

// prepareCandidateRunDir makes dir like ref (the first corrald's run
// directory): same mode and owners, so the socket gets the same access.
func prepareCandidateRunDir(ref, dir string) error {
	fi, err := os.Stat(ref)
	if err != nil {
		return err
	}
	// The candidate's own run directory above it is searchable by all, as
	// the cluster's run directory is.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, fi.Mode().Perm()); err != nil {
		return err
	}
	if err := os.Chmod(dir, fi.Mode().Perm()); err != nil {
		return err
	}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		if err := os.Chown(dir, int(sys.Uid), int(sys.Gid)); err != nil {
			return err
		}
	}
	return nil
}

// candidateArgs are the election flags of the n-th corrald: its name,
// and either a forward address on a free loopback port (forward) or its
// socket as the address standbys name.
func candidateArgs(runDir string, n int, name string, forward bool) ([]string, error) {
	args := []string{candidateNameFlag, name}
	if !forward {
		return append(args, "--candidate-address", CandidateSocket(runDir, n)), nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("a forward port for %s: %w", CorraldName(n), err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return append(args, forwardFlag, addr), nil
}

const (
	forwardFlag       = "--forward-address"
	candidateNameFlag = "--candidate-name"
)

// Candidate is one corrald of a dev cluster.
type Candidate struct {
	Proc   string // process name in dev.json ("corrald", "corrald 2", ...)
	Name   string // name in the master election
	Socket string // its LUXI socket
	// Forward is its forward address ("" = it does not forward), where it
	// serves LUXI over TLS while it is master.
	Forward string
}

// Candidates lists the dev cluster's corrald processes, first to last.
func (st *State) Candidates() []Candidate {
	var out []Candidate
	for n := 1; ; n++ {
		name := CorraldName(n)
		var proc *Proc
		for i := range st.Procs {
			if st.Procs[i].Name == name {
				proc = &st.Procs[i]
				break
			}
		}
		if proc == nil {
			return out
		}
		sock := CandidateSocket(st.RunDir, n)
		if n == 1 && st.Socket != "" {
			sock = st.Socket
		}
		c := Candidate{Proc: name, Name: CandidateName(n), Socket: sock}
		if i := slices.Index(proc.Args, candidateNameFlag); i >= 0 && i+1 < len(proc.Args) {
			c.Name = proc.Args[i+1]
		}
		if i := slices.Index(proc.Args, forwardFlag); i >= 0 && i+1 < len(proc.Args) {
			c.Forward = proc.Args[i+1]
		}
		out = append(out, c)
	}
}

// ErrNoMaster means no corrald of the dev cluster answers as master.
var ErrNoMaster = errors.New("no corrald answers as master")

// Leader asks each corrald which one is master: the master answers a
// query, a standby answers with its standby error, a dead one does not
// answer at all. A forwarding standby's socket reaches the master, so a
// forwarding candidate is asked on its forward address instead, where
// only the master listens. It does not wait for an election to finish.
func Leader(ctx context.Context, st *State) (Candidate, error) {
	var why []string
	for _, c := range st.Candidates() {
		var err error
		if c.Forward != "" {
			err = askForward(ctx, bootstrap.Layout{StateDir: st.StateDir}.MasterDir(), c.Forward)
		} else {
			err = askMaster(ctx, c.Socket)
		}
		if err == nil {
			return c, nil
		}
		why = append(why, fmt.Sprintf("%s: %v", c.Proc, err))
	}
	return Candidate{}, fmt.Errorf("%w (%s)", ErrNoMaster, strings.Join(why, "; "))
}

// WaitLeader polls Leader until a master answers or limit passes.
func WaitLeader(ctx context.Context, st *State, limit time.Duration) (Candidate, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		c, err := Leader(ctx, st)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return Candidate{}, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// askMaster returns nil when the corrald on sock serves as master.
func askMaster(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := luxi.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	var v []any
	return c.Call(ctx, "QueryConfigValues", []any{[]string{"cluster_name"}}, &v)
}

// askForward returns nil when a corrald serves as master on the forward
// address addr, dialled with the master certificates in masterDir.
func askForward(ctx context.Context, masterDir, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := forwardtls.DialClient(ctx, masterDir, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	var v []any
	return c.Call(ctx, "QueryConfigValues", []any{[]string{"cluster_name"}}, &v)
}

// IsStandbyError reports whether err is a standby's answer.
func IsStandbyError(err error) bool {
	var ee *ecode.Error
	return errors.As(err, &ee) && strings.Contains(ee.Msg, "this corrald is a standby")
}

// waitStandby waits until the corrald on sock answers, as master or as a
// standby.
func waitStandby(ctx context.Context, sock string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		err := askMaster(ctx, sock)
		if err == nil || IsStandbyError(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
