// Package failpoint makes a daemon kill itself at named points of its work,
// so tests can check that a crash at exactly that point loses nothing. The
// points are armed from the environment variable CORRAL_FAILPOINTS when the
// daemon starts, e.g.
//
//	CORRAL_FAILPOINTS=step-committed=3,rpc-returned=1
//
// kills the process with SIGKILL the third time a job step commits, or the
// first time a node RPC returns, whichever comes first. SIGKILL rather than
// os.Exit or a panic: no deferred function runs and nothing is flushed, as
// when the machine loses power under the process. An unarmed set (the nil
// *Set included) costs a map lookup per hit.
package failpoint

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// EnvVar is the environment variable the daemons read their points from.
const EnvVar = "CORRAL_FAILPOINTS"

// The points corrald knows.
const (
	// StepCommitted: a job step's configuration writes and cursor are
	// committed (and applied), before anything else happens.
	StepCommitted = "step-committed"
	// RPCReturned: a node answered a job step's RPC successfully, before
	// the step commits.
	RPCReturned = "rpc-returned"
	// StepBegan: a job step is about to run. For a step that is unsafe
	// to repeat, the record that it began is durable by then; a safe step
	// costs no write.
	StepBegan = "step-began"
)

// The points corral-node knows.
const (
	// NodeInstanceStart: the hypervisor is about to be asked to start an
	// instance (so the instance never starts).
	NodeInstanceStart = "node-instance-start"
	// NodeInstanceStarted: the hypervisor started an instance; the RPC
	// answer is neither recorded nor sent.
	NodeInstanceStarted = "node-instance-started"
	// NodeInstanceStopped: the hypervisor stopped an instance; the RPC
	// answer is neither recorded nor sent.
	NodeInstanceStopped = "node-instance-stopped"
	// NodeDiskCreated: a disk was created; the RPC answer is neither
	// recorded nor sent.
	NodeDiskCreated = "node-disk-created"
)

// MasterPoints lists the points corrald accepts.
func MasterPoints() []string { return []string{StepCommitted, RPCReturned, StepBegan} }

// NodePoints lists the points corral-node accepts.
func NodePoints() []string {
	return []string{NodeInstanceStart, NodeInstanceStarted, NodeInstanceStopped, NodeDiskCreated}
}

// maxCount bounds a count so that a typo with many digits is reported
// rather than arming a point that can never fire.
const maxCount = 1 << 30

// Set is the armed points of one process. Its methods are safe for
// concurrent use and do nothing on a nil *Set.
type Set struct {
	points map[string]*point
	// die ends the process; tests of this package replace it.
	die func()
	out io.Writer
}

type point struct {
	at   int64 // kill on this hit
	hits atomic.Int64
}

// Parse reads a spec "name=N[,name=N...]" (spaces around entries are
// ignored). Every name must be one of known; N is the hit that kills, from
// 1. An empty spec arms nothing.
func Parse(spec string, known ...string) (*Set, error) {
	s := &Set{points: map[string]*point{}, die: killSelf, out: os.Stderr}
	if strings.TrimSpace(spec) == "" {
		return s, nil
	}
	for _, ent := range strings.Split(spec, ",") {
		ent = strings.TrimSpace(ent)
		name, count, ok := strings.Cut(ent, "=")
		name, count = strings.TrimSpace(name), strings.TrimSpace(count)
		switch {
		case ent == "":
			return nil, fmt.Errorf("%s=%q: empty entry (want name=N[,name=N...])", EnvVar, spec)
		case !ok:
			return nil, fmt.Errorf("%s: entry %q has no count (want %s=N)", EnvVar, ent, name)
		case !slices.Contains(known, name):
			return nil, fmt.Errorf("%s: unknown failpoint %q (this daemon knows %s)", EnvVar, name, strings.Join(known, ", "))
		case s.points[name] != nil:
			return nil, fmt.Errorf("%s: failpoint %q given twice", EnvVar, name)
		}
		n, err := strconv.ParseInt(count, 10, 64)
		if err != nil || n < 1 || n > maxCount {
			return nil, fmt.Errorf("%s: failpoint %s: count %q is not a whole number from 1 to %d", EnvVar, name, count, maxCount)
		}
		s.points[name] = &point{at: n}
	}
	return s, nil
}

// Load parses the points in CORRAL_FAILPOINTS as getenv (os.Getenv, say)
// reports it.
func Load(getenv func(string) string, known ...string) (*Set, error) {
	return Parse(getenv(EnvVar), known...)
}

// Armed reports whether any point is armed.
func (s *Set) Armed() bool { return s != nil && len(s.points) > 0 }

// String renders the armed points as Parse reads them, sorted by name.
func (s *Set) String() string {
	if s == nil {
		return ""
	}
	names := make([]string, 0, len(s.points))
	for n := range s.points {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		names[i] = n + "=" + strconv.FormatInt(s.points[n].at, 10)
	}
	return strings.Join(names, ",")
}

// Hit counts a pass through the named point and kills the process if this
// is the armed hit. It returns only if the process lives on.
func (s *Set) Hit(name string) {
	if s == nil {
		return
	}
	p := s.points[name]
	if p == nil {
		return
	}
	n := p.hits.Add(1)
	if n != p.at {
		return
	}
	// One write, unbuffered: it reaches the log before the process dies,
	// and tells an injected crash from a real one.
	fmt.Fprintf(s.out, "failpoint %s hit %d: killing the process\n", name, n)
	s.die()
}

// killSelf sends SIGKILL to this process. The signal is taken before the
// calling goroutine returns to user code; blocking afterwards makes sure it
// never goes on with the work the failpoint interrupts.
func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}
