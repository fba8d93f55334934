package luxi

import (
	"context"
	"net"
	"syscall"
)

// peerKey carries a call's peer credentials in its context.
type peerKey struct{}

// PeerCred is who is at the other end of a LUXI connection: the uid the
// peer connected with (SO_PEERCRED), known only on unix sockets.
type PeerCred struct {
	UID   uint32
	Known bool
}

// Peer returns the credentials of the connection a call came on; Known is
// false off a unix socket (a forwarded call, a test's pipe).
func Peer(ctx context.Context) PeerCred {
	p, _ := ctx.Value(peerKey{}).(PeerCred)
	return p
}

// WithPeer returns ctx carrying p, for servers of forwarded calls and
// tests.
func WithPeer(ctx context.Context, p PeerCred) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// peerOf reads a connection's peer credentials.
func peerOf(nc net.Conn) PeerCred {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return PeerCred{}
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return PeerCred{}
	}
	var cred *syscall.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return PeerCred{}
	}
	return PeerCred{UID: cred.Uid, Known: true}
}
