package luxi

import (
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of the limits that keep idle or hostile clients from exhausting
// a server: see ServerOptions.
const (
	// DefaultAdminConns is the reserve of connections, beyond MaxConns,
	// for root and the server's own user on a unix socket.
	DefaultAdminConns = 32
	// DefaultFrameTimeout bounds how long one request may take to arrive.
	DefaultFrameTimeout = 60 * time.Second
	// DefaultIdleTimeout closes a connection with no call in progress.
	DefaultIdleTimeout = 10 * time.Minute
	// DefaultFrameMemory is the least memory all connections together may
	// hold in requests being received or waiting their turn (see
	// ServerOptions.FrameMemory).
	DefaultFrameMemory = 256 << 20
	// minFDHeadroom is the least number of descriptors the connection limit
	// leaves for everything else a daemon opens: its store, the etcd
	// client, node RPC, listeners, log and job files.
	minFDHeadroom = 256
	// maxDerivedConns caps the derived limit when RLIMIT_NOFILE is
	// unlimited or huge (Linux's default nr_open is 1<<20).
	maxDerivedConns = 1 << 20
)

// ConnLimit splits nofile descriptors into a normal connection limit and an
// admin reserve, after leaving max(256, 10%) of them (but at most half) for
// everything else; normal plus admin never exceeds nofile. perConn is how
// many descriptors each connection holds (a standby relaying connections
// to the master holds two).
func ConnLimit(nofile uint64, perConn int) (normal, admin int) {
	n := int64(min(nofile, maxDerivedConns))
	headroom := max(minFDHeadroom, n/10)
	headroom = min(headroom, n/2)
	conns := (n - headroom) / int64(max(perConn, 1))
	reserve := min(DefaultAdminConns, conns/8)
	return int(conns - reserve), int(reserve)
}

// DescriptorLimit is the process's soft RLIMIT_NOFILE. Go programs raise the
// soft limit to the hard one when they start, so on Linux this is the hard
// limit the service manager set (LimitNOFILE=).
func DescriptorLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("luxi: reading RLIMIT_NOFILE: %w", err)
	}
	return rl.Cur, nil
}

// limits are the connection slots and the request memory budget of one
// server, or of several servers sharing them (ServerOptions.ShareLimits).
type limits struct {
	maxConns   int64 // normal connections
	adminConns int64 // reserve beyond maxConns for admin peers
	conns      atomic.Int64
	frames     frameBudget
	nofile     uint64 // RLIMIT_NOFILE the limit was checked against (0: unknown)
}

// resolveLimits derives the limits of opts from the descriptor limit: a
// MaxConns of 0 takes the derived limit, a larger one than the derived
// limit is clamped to it (clamped reports the value asked for).
func resolveLimits(opts ServerOptions) (l *limits, clamped int) {
	normal, admin := fallbackMaxConns, DefaultAdminConns
	nofile, err := DescriptorLimit()
	if err == nil && nofile > 0 {
		normal, admin = ConnLimit(nofile, opts.DescriptorsPerConn)
	} else {
		nofile = 0
	}
	l = &limits{maxConns: int64(opts.MaxConns), adminConns: int64(opts.AdminConns), nofile: nofile}
	switch {
	case l.maxConns <= 0:
		l.maxConns = int64(normal)
	case l.maxConns > int64(normal):
		clamped, l.maxConns = opts.MaxConns, int64(normal)
	}
	switch {
	case l.adminConns == 0:
		l.adminConns = int64(admin)
	case l.adminConns < 0:
		l.adminConns = 0
	}
	// The reserve too must fit in what the descriptor limit leaves.
	l.adminConns = max(0, min(l.adminConns, int64(normal+admin)-l.maxConns))
	switch {
	case opts.FrameMemory > 0:
		l.frames.limit = opts.FrameMemory
	case opts.FrameMemory == 0:
		l.frames.limit = max(DefaultFrameMemory, 4*int64(opts.MaxMessageBytes))
	}
	return l, clamped
}

// fallbackMaxConns is the connection limit when RLIMIT_NOFILE cannot be
// read: Linux's usual default soft limit less the headroom.
const fallbackMaxConns = 1024 - minFDHeadroom - DefaultAdminConns

// admit takes a connection slot: a normal one, or one of the reserve for a
// peer isAdmin accepts (asked only when the normal slots are taken). It
// reports false, taking nothing, when the peer must be rejected.
func (l *limits) admit(isAdmin func() bool) bool {
	if l.conns.Add(1) <= l.maxConns {
		return true
	}
	if l.conns.Load() <= l.maxConns+l.adminConns && isAdmin() {
		return true
	}
	l.conns.Add(-1)
	return false
}

func (l *limits) leave() { l.conns.Add(-1) }

// adminPeer reports whether nc is a unix socket connection from root or
// from the server's own user (SO_PEERCRED: the credentials the peer
// connected with).
func adminPeer(nc net.Conn) bool {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return false
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return false
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return false
	}
	return cred.Uid == 0 || cred.Uid == uint32(os.Geteuid())
}

// frameBudget bounds the memory of requests being received, and of long
// requests received but not yet run, across connections. limit 0 means
// no bound.
type frameBudget struct {
	limit int64
	used  atomic.Int64
}

// take reserves n bytes, or reports false (reserving nothing) if that
// would exceed the limit.
func (b *frameBudget) take(n int64) bool {
	if b == nil || b.limit <= 0 || n <= 0 {
		return true
	}
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// give returns n bytes taken earlier.
func (b *frameBudget) give(n int64) {
	if b != nil && b.limit > 0 && n > 0 {
		b.used.Add(-n)
	}
}
