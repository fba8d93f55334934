package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
)

// Handler runs one RPC method. Its result is sent as JSON; an error is sent
// with its ecode class. A handler called with an operation id runs to the
// end even if the master disconnects, so that its answer can be recorded;
// its ctx ends only when the server shuts down.
type Handler func(ctx context.Context, args json.RawMessage) (any, error)

// StreamHandler serves a byte stream (a console, say) over conn until it
// returns; the connection is closed afterwards.
type StreamHandler func(ctx context.Context, args json.RawMessage, conn io.ReadWriter) error

// ServerOptions configures a node's RPC server.
type ServerOptions struct {
	CertPEM, KeyPEM, CAPEM []byte
	AllowedRoles           []pki.Role // default pki.NodeRPCCallerRoles()
	StateDir               string     // highest seen epoch and operation records (created 0700)
	Logger                 *slog.Logger
	OpRecordTTL            time.Duration // default 24h
}

// Timeouts of the server side. Calls themselves have none: a node operation
// may legitimately take hours, and the master bounds its own wait.
const (
	readHeaderTimeout = 10 * time.Second
	bodyReadTimeout   = 5 * time.Minute
	idleTimeout       = 2 * time.Minute
	shutdownGrace     = 5 * time.Second
	maxHeaderBytes    = 64 << 10
)

// Server is a node's RPC endpoint.
type Server struct {
	log     *slog.Logger
	roles   []pki.Role
	tlsConf atomic.Pointer[tls.Config]
	creds   struct {
		sync.Mutex
		cert, key, ca []byte
	}
	// cas is the trusted CA bundle, parsed: epoch grants must be signed by
	// one of them.
	cas    atomic.Pointer[[]*x509.Certificate]
	epoch  *epochStore
	ops    *opStore
	pruneN time.Duration

	mu       sync.RWMutex
	handlers map[string]Handler
	streams  map[string]StreamHandler
}

type serveCtxKey struct{}

// NewServer checks the credentials and opens the state directory.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.StateDir == "" {
		return nil, errors.New("rpc: server state directory not set")
	}
	s := &Server{
		log:      opts.Logger,
		roles:    slices.Clone(opts.AllowedRoles),
		handlers: make(map[string]Handler),
		streams:  make(map[string]StreamHandler),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if len(s.roles) == 0 {
		s.roles = pki.NodeRPCCallerRoles()
	}
	if err := s.SetCredentials(opts.CertPEM, opts.KeyPEM, opts.CAPEM); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("rpc: state directory: %w", err)
	}
	var err error
	if s.epoch, err = openEpoch(filepath.Join(opts.StateDir, "epoch")); err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	ttl := opts.OpRecordTTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	if s.ops, err = newOpStore(filepath.Join(opts.StateDir, "ops"), ttl); err != nil {
		return nil, fmt.Errorf("rpc: %w", err)
	}
	s.pruneN = min(ttl/4, time.Hour)
	if _, err := s.ops.prune(); err != nil {
		s.log.Warn("pruning operation records failed", "err", err)
	}
	return s, nil
}

// SetCredentials replaces the server certificate, key and trusted CA bundle;
// new connections use them at once (certificate or CA rotation).
func (s *Server) SetCredentials(certPEM, keyPEM, caPEM []byte) error {
	cfg, err := pki.ServerTLSConfig(certPEM, keyPEM, caPEM, s.roles...)
	if err != nil {
		return fmt.Errorf("rpc: %w", err)
	}
	_, cas, err := pki.CAPool(caPEM)
	if err != nil {
		return fmt.Errorf("rpc: %w", err)
	}
	s.cas.Store(&cas)
	s.creds.Lock()
	s.creds.cert, s.creds.key, s.creds.ca = certPEM, keyPEM, caPEM
	s.creds.Unlock()
	s.tlsConf.Store(cfg)
	return nil
}

// UpdateCA replaces only the trusted CA bundle.
func (s *Server) UpdateCA(caPEM []byte) error {
	s.creds.Lock()
	cert, key := s.creds.cert, s.creds.key
	s.creds.Unlock()
	return s.SetCredentials(cert, key, caPEM)
}

// Handle registers a call method.
func (s *Server) Handle(method string, h Handler) {
	if !validMethod(method) {
		panic(fmt.Sprintf("rpc: invalid method name %q", method))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[method] = h
}

// HandleStream registers a stream method.
func (s *Server) HandleStream(method string, h StreamHandler) {
	if !validMethod(method) {
		panic(fmt.Sprintf("rpc: invalid method name %q", method))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams[method] = h
}

// Epoch is the highest master epoch seen.
func (s *Server) Epoch() int64 { return s.epoch.get() }

// Handler is the HTTP handler, for tests that bring their own TLS listener.
func (s *Server) Handler() http.Handler { return s }

// Serve accepts TLS connections on ln until ctx ends, then shuts down:
// in-flight calls get a short grace period and their contexts are cancelled.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// An empty map turns HTTP/2 off: streams need HTTP/1.1 upgrades.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(ctx, serveCtxKey{}, ctx)
		},
	}
	tlsLn := tls.NewListener(ln, &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.tlsConf.Load(), nil
		},
	})
	serveDone := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(s.pruneN)
		defer t.Stop()
		for {
			select {
			case <-serveDone:
				return
			case <-ctx.Done():
				sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
				defer cancel()
				if err := hs.Shutdown(sctx); err != nil {
					hs.Close()
				}
				return
			case <-t.C:
				if n, err := s.ops.prune(); err != nil {
					s.log.Warn("pruning operation records failed", "err", err)
				} else if n > 0 {
					s.log.Debug("pruned operation records", "count", n)
				}
			}
		}
	}()
	err := hs.Serve(tlsLn)
	close(serveDone)
	<-stopped // after a shutdown, this waits for in-flight calls
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	hs.Close()
	return fmt.Errorf("rpc: serve: %w", err)
}

// ServeHTTP routes one request. Order matters: identity, then epoch fence,
// then body, then the operation record, then the handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	method, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	if !ok || !validMethod(method) {
		writeFailure(w, http.StatusNotFound, ecode.Errorf(ecode.NoEnt, "no such rpc path %q", truncate(r.URL.Path, 80)))
		return
	}
	log := s.log.With("method", method, "op", r.Header.Get(HeaderOp), "remote", r.RemoteAddr)
	if err := s.checkPeer(r); err != nil {
		log.Warn("rpc refused", "err", err)
		writeFailure(w, http.StatusForbidden, err)
		return
	}
	s.mu.RLock()
	h, isCall := s.handlers[method]
	sh, isStream := s.streams[method]
	s.mu.RUnlock()
	if !isCall && !isStream {
		writeFailure(w, http.StatusNotFound, ecode.Errorf(ecode.NoEnt, "unknown rpc method %q", method))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeFailure(w, http.StatusMethodNotAllowed, ecode.Errorf(ecode.Inval, "rpc needs POST, not %s", r.Method))
		return
	}
	if isStream && !isUpgrade(r) {
		writeFailure(w, http.StatusBadRequest, ecode.Errorf(ecode.Inval, "stream method %q needs Upgrade: %s", method, StreamProtocol))
		return
	}
	epoch, err := parseEpoch(r.Header.Get(HeaderEpoch))
	if err == nil {
		err = s.epoch.admit(epoch, func(cur int64) error { return s.checkGrant(r, epoch, cur, log) })
	}
	if err != nil {
		// The log has both epochs; the caller is told neither.
		log.Warn("rpc refused", "epoch", truncate(r.Header.Get(HeaderEpoch), 32), "current", s.epoch.get(), "err", err)
		writeFailure(w, errorStatus(err), err)
		return
	}
	args, status, err := readBody(w, r)
	if err != nil {
		writeFailure(w, status, err)
		return
	}
	if isStream {
		s.serveStream(w, r, sh, args, log)
		return
	}
	opID := r.Header.Get(HeaderOp)
	if !validOpID(opID) {
		writeFailure(w, http.StatusBadRequest, ecode.Errorf(ecode.Inval, "bad %s header", HeaderOp))
		return
	}
	if opID == "" {
		status, body, _ := s.run(r.Context(), h, args)
		writeRaw(w, status, body)
		log.Debug("rpc done", "status", status, "duration", time.Since(start))
		return
	}
	s.serveOp(w, r, h, method, opID, args, log)
	log.Debug("rpc done", "duration", time.Since(start))
}

// serveOp runs a call that carries an operation id at most once.
func (s *Server) serveOp(w http.ResponseWriter, r *http.Request, h Handler, method, opID string, args json.RawMessage, log *slog.Logger) {
	key := opKey(method, opID)
	rec, done, err := s.ops.begin(r.Context(), key)
	if err != nil {
		if r.Context().Err() != nil {
			return // the master gave up waiting for the duplicate; nobody reads an answer
		}
		log.Error("operation record unreadable", "err", err)
		writeFailure(w, http.StatusInternalServerError, &ecode.Error{Kind: ecode.RemoteError, Class: ecode.Fault, Msg: err.Error(), Err: err})
		return
	}
	if rec != nil {
		log.Info("rpc answered from operation record", "recorded", rec.Time)
		w.Header().Set(HeaderReplayed, "1")
		writeRaw(w, rec.Status, rec.Body)
		return
	}
	defer done()
	// Detached from the request: the answer must be recorded even if the
	// master goes away mid-call. Server shutdown still cancels it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	if serveCtx, ok := r.Context().Value(serveCtxKey{}).(context.Context); ok {
		defer context.AfterFunc(serveCtx, cancel)()
	}
	status, body, recordable := s.run(ctx, h, args)
	if !recordable || (status != http.StatusOK && ctx.Err() != nil) {
		// A panic, or a failure caused by shutdown, says nothing about the
		// operation; the retry must run it again.
		writeRaw(w, status, body)
		return
	}
	err = s.ops.save(key, opRecord{Method: method, Op: opID, Time: time.Now(), Status: status, Body: body})
	if err != nil {
		log.Error("cannot record operation result", "err", err)
		writeFailure(w, http.StatusInternalServerError, &ecode.Error{Kind: ecode.RemoteError, Class: ecode.Environ, Msg: "cannot record operation result: " + err.Error(), Err: err})
		return
	}
	writeRaw(w, status, body)
}

// run calls h and encodes its answer. recordable is false after a panic.
func (s *Server) run(ctx context.Context, h Handler, args json.RawMessage) (status int, body []byte, recordable bool) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("rpc handler panicked", "panic", p)
			err := ecode.New(ecode.RemoteError, ecode.Fault, fmt.Sprintf("rpc handler panicked: %v", p))
			status, body, recordable = http.StatusInternalServerError, encodeFailure(err), false
		}
	}()
	result, err := h(ctx, args)
	if err != nil {
		return errorStatus(err), encodeFailure(err), true
	}
	b, err := encodeSuccess(result)
	if err != nil {
		err = ecode.New(ecode.RemoteError, ecode.Fault, err.Error())
		return http.StatusInternalServerError, encodeFailure(err), true
	}
	return http.StatusOK, b, true
}

// errNoGrant refuses a higher epoch that comes without a valid grant.
var errNoGrant = ecode.New(ecode.PermissionDenied, ecode.Inval,
	"a new master epoch needs a grant signed by the cluster CA ("+HeaderEpochGrant+")")

// checkGrant runs when a call carries an epoch above the node's: the
// caller must prove it won that epoch with a grant the cluster CA signed
// for exactly that epoch (pki.EpochGrant).
func (s *Server) checkGrant(r *http.Request, epoch, cur int64, log *slog.Logger) error {
	g, err := pki.VerifyEpochGrant(*s.cas.Load(), r.Header.Get(HeaderEpochGrant))
	if err != nil {
		log.Warn("master epoch not raised", "epoch", epoch, "current", cur, "err", err)
		return errNoGrant
	}
	if g.Epoch != epoch {
		log.Warn("master epoch not raised: the grant is for another epoch", "epoch", epoch, "grant_epoch", g.Epoch, "current", cur)
		return errNoGrant
	}
	log.Info("master epoch raised", "epoch", epoch, "previous", cur, "master", g.Master, "token", g.Token)
	return nil
}

// checkPeer requires a verified client certificate with an allowed role. The
// TLS layer enforces this already; checking again keeps Handler safe behind
// a listener configured by someone else.
func (s *Server) checkPeer(r *http.Request) error {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return ecode.New(ecode.PermissionDenied, ecode.Inval, "rpc needs a verified client certificate")
	}
	leaf := r.TLS.VerifiedChains[0][0]
	role, ok := pki.RoleOf(leaf)
	if !ok || !slices.Contains(s.roles, role) {
		return ecode.New(ecode.PermissionDenied, ecode.Inval, fmt.Sprintf("certificate %q (role %q) may not call rpc", leaf.Subject.CommonName, role))
	}
	return nil
}

// readBody reads the request body under a size limit and a deadline, then
// lifts the deadline so a long call is not cut off by it.
func readBody(w http.ResponseWriter, r *http.Request) (json.RawMessage, int, error) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(bodyReadTimeout))
	defer rc.SetReadDeadline(time.Time{})
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, http.StatusRequestEntityTooLarge, ecode.Errorf(ecode.Inval, "rpc body exceeds %d bytes", MaxBodyBytes)
	case err != nil:
		return nil, http.StatusBadRequest, ecode.Errorf(ecode.Inval, "reading rpc body: %v", err)
	}
	if len(b) == 0 {
		b = []byte("null")
	}
	if !json.Valid(b) {
		return nil, http.StatusBadRequest, ecode.Errorf(ecode.Inval, "rpc body is not JSON")
	}
	return b, 0, nil
}

func writeFailure(w http.ResponseWriter, status int, err error) {
	writeRaw(w, status, encodeFailure(err))
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}
