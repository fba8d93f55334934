package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/corral/corral/bench/harness"
)

// transfer moves the file src to a new file dst over loopback. setup
// runs before the clock starts (listening sockets, listener processes);
// the returned function is the timed part and must return only when dst
// is complete.
type transfer func(ctx context.Context, src, dst string) (timed func() error, cleanup func(), err error)

// env is what every transfer shares: the two ends' identities.
type env struct {
	recv, send *harness.TLSEndpoint
}

// rawTLS is the baseline: Go's crypto/tls, TLS 1.3 only, mutual
// authentication against the pinned peer certificates, and a plain
// io.Copy at each end.
func (e *env) rawTLS(ctx context.Context, src, dst string) (func() error, func(), error) {
	srvCfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{e.recv.Cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    e.send.Pool(),
	}
	cliCfg := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{e.send.Cert},
		RootCAs:      e.recv.Pool(),
		ServerName:   e.recv.Name,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() { ln.Close() }
	timed := func() error {
		recvErr := make(chan error, 1)
		go func() { recvErr <- receiveFile(ln, dst) }()
		sendErr := sendFile(ctx, cliCfg, ln.Addr().String(), src)
		if sendErr != nil {
			// Unblock a receiver still waiting for its connection.
			ln.Close()
		}
		return errors.Join(sendErr, <-recvErr)
	}
	return timed, cleanup, nil
}

func receiveFile(ln net.Listener, dst string) error {
	c, err := ln.Accept()
	if err != nil {
		return fmt.Errorf("accepting: %w", err)
	}
	defer c.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, c); err != nil {
		f.Close()
		return fmt.Errorf("receiving: %w", err)
	}
	return f.Close()
}

func sendFile(ctx context.Context, cfg *tls.Config, addr, src string) error {
	d := tls.Dialer{Config: cfg}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dialing: %w", err)
	}
	f, err := os.Open(src)
	if err != nil {
		c.Close()
		return err
	}
	defer f.Close()
	if _, err := io.Copy(c, f); err != nil {
		c.Close()
		return fmt.Errorf("sending: %w", err)
	}
	// Close sends TLS close_notify: the receiver's io.Copy ends cleanly.
	return c.Close()
}

// socat is Ganeti's transport (see harness.Socat), with a compressor
// ("gzip" or "zstd") or none.
func (e *env) socat(compressor string) transfer {
	return func(ctx context.Context, src, dst string) (func() error, func(), error) {
		return harness.Socat{Recv: e.recv, Send: e.send, Compressor: compressor}.Start(ctx, src, dst)
	}
}
