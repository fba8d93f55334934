// Package locking is corrald's lock manager: named shared/exclusive locks
// grouped in Ganeti's levels.
//
// A job takes locks level by level in a fixed order (cluster, node_alloc,
// instance, nodegroup, network, node, node_res) and, inside a level, in name
// order. Because every owner climbs the same total order and may never go back
// down while it holds something, no cycle of waiters can form, so the manager
// needs no deadlock detector.
//
// Waiters queue per lock, most urgent priority first and first come first
// served within a priority. A newcomer is granted only if it is compatible
// with the holders and with every waiter queued ahead of it, so a stream of
// shared requests cannot starve a queued exclusive one.
package locking

import (
	"errors"
	"fmt"

	"github.com/corral/corral/internal/ecode"
)

// Level is a lock level. Levels are acquired in increasing order.
type Level int

// The levels, in acquisition order.
const (
	LevelCluster Level = iota
	LevelNodeAlloc
	LevelInstance
	LevelNodeGroup
	LevelNetwork
	LevelNode
	LevelNodeRes
	// LevelMachine locks bare-metal machines (Corral only; last, so that
	// Ganeti's levels keep their order and numbers).
	LevelMachine
	// LevelCOE locks Kubernetes clusters as a service: a COE cluster by
	// its uuid, a template by "template:<uuid>", a project's quota by
	// "quota:<project>" (Corral only, after the machines).
	LevelCOE

	numLevels = int(LevelCOE) + 1
)

// Names of the single lock that lives at the cluster and node_alloc levels.
const (
	BGL = "BGL" // the big cluster lock
	NAL = "NAL" // the node allocation lock
)

// All names every lock of a level, including locks first named after it was
// granted.
const All = "*"

var levelNames = [numLevels]string{
	LevelCluster:   "cluster",
	LevelNodeAlloc: "node_alloc",
	LevelInstance:  "instance",
	LevelNodeGroup: "nodegroup",
	LevelNetwork:   "network",
	LevelNode:      "node",
	LevelNodeRes:   "node_res",
	LevelMachine:   "machine",
	LevelCOE:       "coe",
}

// Levels returns every level in acquisition order.
func Levels() []Level {
	l := make([]Level, numLevels)
	for i := range l {
		l[i] = Level(i)
	}
	return l
}

func (l Level) valid() bool { return l >= 0 && int(l) < numLevels }

func (l Level) String() string {
	if !l.valid() {
		return fmt.Sprintf("level(%d)", int(l))
	}
	return levelNames[l]
}

// ParseLevel parses a level name as printed by Level.String. Ganeti's own
// spellings "node-alloc" and "node-res" are accepted too, since operators
// coming from Ganeti type them.
func ParseLevel(s string) (Level, error) {
	switch s {
	case "node-alloc":
		return LevelNodeAlloc, nil
	case "node-res":
		return LevelNodeRes, nil
	}
	for i, n := range levelNames {
		if n == s {
			return Level(i), nil
		}
	}
	return 0, ecode.Errorf(ecode.Inval, "unknown lock level %q: %w", s, ErrInvalid)
}

// Mode is the mode a lock is requested or held in.
type Mode int

// Modes. Shared is the zero value because it is the harmless default.
const (
	Shared Mode = iota
	Exclusive
)

func (m Mode) String() string {
	switch m {
	case Shared:
		return "shared"
	case Exclusive:
		return "exclusive"
	}
	return fmt.Sprintf("mode(%d)", int(m))
}

// ParseMode parses "shared" or "exclusive".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "shared":
		return Shared, nil
	case "exclusive":
		return Exclusive, nil
	}
	return 0, ecode.Errorf(ecode.Inval, "unknown lock mode %q: %w", s, ErrInvalid)
}

// Request asks for Names at Level in Mode. Names may be []string{All}.
type Request struct {
	Level Level
	Names []string
	Mode  Mode
}

// Priorities are Ganeti's: lower is more urgent.
const (
	PriorityHighest = -20
	PriorityNormal  = 0
	PriorityLowest  = 19
)

// Errors for errors.Is. Misuse of the API is a bug in the caller, so Acquire
// returns these inside an ecode.Error of kind ProgrammerError; the parsers
// return them with class Inval because their input comes from users. Waits
// ended by the context return the context's error, wrapped.
var (
	// ErrInvalid: a malformed request (unknown level or mode, empty name,
	// priority out of range, All mixed with names at one level).
	ErrInvalid = errors.New("invalid lock request")
	// ErrOrder: the owner asked for a level at or below one it holds.
	ErrOrder = errors.New("lock level order violated")
	// ErrBusy: two Acquire calls ran at once on the same owner.
	ErrBusy = errors.New("owner already acquiring")
	// ErrReleased: the owner was released while its Acquire waited.
	ErrReleased = errors.New("owner released while waiting")
)

// misuse builds the error Acquire returns for a caller's bug.
func misuse(sentinel error, format string, args ...any) error {
	return &ecode.Error{
		Kind:  ecode.ProgrammerError,
		Class: ecode.Fault,
		Msg:   fmt.Sprintf("locking: %s: %v", fmt.Sprintf(format, args...), sentinel),
		Err:   sentinel,
	}
}
