package rpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
)

// ClientOptions tunes a Client.
type ClientOptions struct {
	Timeout time.Duration // per call when Call is used; default 60s
	Logger  *slog.Logger
}

// DefaultTimeout is the per-call timeout when ClientOptions.Timeout is 0.
const DefaultTimeout = 60 * time.Second

// nodeServerRoles are the roles a node daemon's certificate may carry.
var nodeServerRoles = pki.NodeDaemonRoles()

// epochGrant is a grant and the epoch it is for.
type epochGrant struct {
	epoch int64
	grant string
}

// Client calls node daemons. It keeps one connection pool per (node,
// address), because the TLS configuration verifies the node's name and a
// pooled connection must never serve a call meant for another node.
type Client struct {
	// own is the certificate presented on new connections; SetCertificate
	// swaps it while calls in flight keep their connections.
	own     atomic.Pointer[tls.Certificate]
	epoch   func() int64
	grant   atomic.Pointer[epochGrant]
	timeout time.Duration
	log     *slog.Logger

	mu         sync.Mutex
	caPEM      []byte
	transports map[string]*http.Transport
}

// NewClient makes a client that presents tlsCert and trusts the CA bundle
// caPEM. epoch is read on every call.
func NewClient(tlsCert, tlsKey, caPEM []byte, epoch func() int64, opts ClientOptions) (*Client, error) {
	if epoch == nil {
		return nil, fmt.Errorf("rpc: client needs an epoch source")
	}
	// Build one configuration now so bad credentials fail here, not on
	// the first call.
	if _, err := pki.ClientTLSConfig(tlsCert, tlsKey, caPEM, "check", nodeServerRoles...); err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	c := &Client{
		caPEM:      caPEM,
		epoch:      epoch,
		timeout:    opts.Timeout,
		log:        opts.Logger,
		transports: make(map[string]*http.Transport),
	}
	// A client without a certificate is possible (a node's own checks),
	// it then presents none.
	if tlsCert != nil || tlsKey != nil {
		if err := c.SetCertificate(tlsCert, tlsKey); err != nil {
			return nil, err
		}
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// UpdateCA replaces the trusted CA bundle. Pooled connections are dropped so
// every later call is verified against the new bundle. On error the old
// bundle stays.
func (c *Client) UpdateCA(caPEM []byte) error {
	if _, err := pki.ClientTLSConfig(nil, nil, caPEM, "check", nodeServerRoles...); err != nil {
		return fmt.Errorf("rpc: %w", err)
	}
	c.mu.Lock()
	old := c.transports
	c.caPEM = caPEM
	c.transports = make(map[string]*http.Transport)
	c.mu.Unlock()
	for _, t := range old {
		t.CloseIdleConnections()
	}
	return nil
}

// SetCertificate replaces the certificate the client presents. Connections
// opened from now on present it; calls in flight on older connections
// finish with the old one, so nodes never see a call cut off. Idle pooled
// connections are dropped so the next call to each node uses the new
// certificate. On error the old certificate stays.
func (c *Client) SetCertificate(certPEM, keyPEM []byte) error {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("rpc: client key pair: %w", err)
	}
	c.own.Store(&cert)
	c.Close()
	return nil
}

// SetEpochGrant gives the client the grant (pki.EpochGrant, encoded) of
// epoch: calls made while the epoch source returns that epoch carry it, so
// nodes that have not seen the epoch yet accept it.
func (c *Client) SetEpochGrant(epoch int64, grant string) {
	c.grant.Store(&epochGrant{epoch: epoch, grant: grant})
}

// Certificate is the certificate the client presents on new connections.
func (c *Client) Certificate() *tls.Certificate { return c.own.Load() }

// Close drops idle connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.transports {
		t.CloseIdleConnections()
	}
}

func (c *Client) transport(node, addr string) (*http.Transport, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := node + "\x00" + addr
	if t, ok := c.transports[k]; ok {
		return t, nil
	}
	cfg, err := pki.ClientTLSConfig(nil, nil, c.caPEM, node, nodeServerRoles...)
	if err != nil {
		return nil, err
	}
	// Read at each handshake, so a renewed certificate applies to every
	// node's pool without rebuilding it.
	cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if own := c.own.Load(); own != nil {
			return own, nil
		}
		return &tls.Certificate{}, nil // none: the server decides
	}
	t := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       cfg,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 0, // calls may run long; the caller's deadline bounds them
	}
	c.transports[k] = t
	return t, nil
}

// Call posts method to the node daemon of node at addr (host:port) with the
// default timeout. opID identifies the operation (e.g. "job/12/op/0/step/3")
// and is empty for read-only calls. reply may be nil.
func (c *Client) Call(ctx context.Context, node, addr, method, opID string, args, reply any) error {
	return c.CallTimeout(ctx, c.timeout, node, addr, method, opID, args, reply)
}

// CallTimeout is Call with an explicit timeout.
func (c *Client) CallTimeout(ctx context.Context, timeout time.Duration, node, addr, method, opID string, args, reply any) error {
	start := time.Now()
	req, t, cancel, err := c.newRequest(ctx, timeout, node, addr, method, opID, args)
	if err != nil {
		return err
	}
	defer cancel()
	resp, err := t.RoundTrip(req)
	if err != nil {
		return c.transportError(ctx, node, addr, method, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return c.transportError(ctx, node, addr, method, err)
	}
	if len(body) > MaxBodyBytes {
		return protocolError("answer of %s from node %s exceeds %d bytes", method, node, MaxBodyBytes)
	}
	err = decodeResponse(resp.StatusCode, body, reply)
	c.log.Debug("rpc call", "node", node, "method", method, "op", opID, "status", resp.StatusCode,
		"replayed", resp.Header.Get(HeaderReplayed) != "", "duration", time.Since(start), "class", classOrEmpty(err))
	return err
}

func (c *Client) newRequest(ctx context.Context, timeout time.Duration, node, addr, method, opID string, args any) (*http.Request, *http.Transport, context.CancelFunc, error) {
	if !validMethod(method) {
		return nil, nil, nil, ecode.New(ecode.ProgrammerError, ecode.Inval, fmt.Sprintf("invalid rpc method name %q", method))
	}
	if !validOpID(opID) {
		return nil, nil, nil, ecode.New(ecode.ProgrammerError, ecode.Inval, fmt.Sprintf("invalid operation id %q", truncate(opID, 64)))
	}
	body, err := json.Marshal(args)
	if err != nil {
		return nil, nil, nil, ecode.New(ecode.ProgrammerError, ecode.Fault, fmt.Sprintf("encode arguments of %s: %v", method, err))
	}
	if len(body) > MaxBodyBytes {
		return nil, nil, nil, ecode.Errorf(ecode.Inval, "arguments of %s exceed %d bytes", method, MaxBodyBytes)
	}
	t, err := c.transport(node, addr)
	if err != nil {
		return nil, nil, nil, &ecode.Error{Kind: ecode.RemoteError, Class: ecode.Inval, Msg: fmt.Sprintf("rpc to node %s: %v", node, err), Err: err}
	}
	if timeout <= 0 {
		timeout = c.timeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, "https://"+addr+PathPrefix+method, bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, nil, nil, ecode.Errorf(ecode.Inval, "rpc to node %s: bad address %q", node, addr)
	}
	req.Header.Set("Content-Type", "application/json")
	epoch := c.epoch()
	req.Header.Set(HeaderEpoch, strconv.FormatInt(epoch, 10))
	if g := c.grant.Load(); g != nil && g.epoch == epoch {
		req.Header.Set(HeaderEpochGrant, g.grant)
	}
	if opID != "" {
		req.Header.Set(HeaderOp, opID)
	}
	// Every call may be sent twice: read-only calls change nothing, and a
	// node answers a repeated operation id from its record. Marked so, a
	// call that meets a pooled connection the node closed (a restarted
	// node daemon) is sent again on a new one instead of failing. A nil
	// value marks the request without sending the header.
	req.Header["Idempotency-Key"] = nil
	return req, t, cancel, nil
}

// transportError classifies a failure to get a complete answer. A caller's
// own cancellation is reported as such; anything else (including our own
// timeout) means the node did not answer.
func (c *Client) transportError(ctx context.Context, node, addr, method string, err error) error {
	if ctx.Err() != nil {
		return &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Environ,
			Msg: fmt.Sprintf("rpc %s to node %s (%s) abandoned: %v", method, node, addr, ctx.Err()), Err: ctx.Err()}
	}
	c.log.Warn("node unreachable", "node", node, "addr", addr, "method", method, "err", err)
	return &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Environ,
		Msg: fmt.Sprintf("node %s (%s) unreachable for rpc %s: %v", node, addr, method, err),
		Err: fmt.Errorf("%w: %w", ErrUnreachable, err)}
}

func classOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return string(ecode.ClassOf(err))
}
