// Package apifront is the public front of Corral's HTTP APIs: each API is
// a package of its own that registers with the front (Registration) and
// gets its own HTTPS listener with a certificate picked up on renewal, an
// authentication provider, request limits and metrics, and a pooled,
// persistent LUXI backend that follows a master failover. corral-rapi runs
// the front with the APIs registered in it.
package apifront

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Listen is where an API listens and the key pair it serves.
type Listen struct {
	Bind     string // address to listen on; empty: all
	Port     int
	CertFile string // PEM, may include the chain
	KeyFile  string
}

// Addr is the host:port to listen on.
func (l Listen) Addr() string { return net.JoinHostPort(l.Bind, strconv.Itoa(l.Port)) }

// ListenFlags declares the listener flags of one API on fs, each name
// prefixed with prefix ("" for the binary's main API, so corral-rapi keeps
// its --bind, --port, --cert and --key), with def's values as defaults. The
// returned Listen is filled when fs is parsed.
func ListenFlags(fs *flag.FlagSet, prefix, what string, def Listen) *Listen {
	l := &Listen{}
	fs.StringVar(&l.Bind, prefix+"bind", def.Bind, what+": address to listen on (empty: all)")
	fs.IntVar(&l.Port, prefix+"port", def.Port, what+": TCP port")
	fs.StringVar(&l.CertFile, prefix+"cert", def.CertFile, what+": TLS certificate (PEM, may include the chain)")
	fs.StringVar(&l.KeyFile, prefix+"key", def.KeyFile, what+": TLS private key (PEM)")
	return l
}

// Env is what the front hands every API it builds.
type Env struct {
	// LUXI is the pool of connections to corrald, shared by the APIs.
	LUXI *LuxiPool
	Log  *slog.Logger
}

// Service is one API ready to serve.
type Service struct {
	Name    string // in logs
	Handler http.Handler
	Listen  Listen
	// WriteTimeout bounds the writing of one answer; 0: DefaultWriteTimeout.
	// An API with long polls sets it above the longest poll.
	WriteTimeout time.Duration
	// Reload re-reads what the API reads from files (SIGHUP); nil: nothing.
	Reload func() error
	// Started is logged with the address when the API starts serving.
	Started []any
}

// Registration is how an API joins the front: a name and the flags it
// declares. Flags returns where the API will listen (filled when the flags
// are parsed, so the binary can check its key before anything is read) and
// the function that builds the service from the parsed flags.
//
// An API that is OffAtPortZero is off when its port is 0 (rather than on
// an ephemeral port): its key is not checked and its builder returns a nil
// Service, which the binary skips.
type Registration struct {
	Name          string
	Flags         func(fs *flag.FlagSet) (*Listen, func(Env) (*Service, error))
	OffAtPortZero bool
}

// Timeouts of every listener.
const (
	ReadHeaderTimeout   = 10 * time.Second
	ReadTimeout         = 60 * time.Second
	DefaultWriteTimeout = 60 * time.Second
	IdleTimeout         = 120 * time.Second
	shutdownGrace       = 5 * time.Second
)

// Front serves a set of APIs, each on its own listener.
type Front struct {
	log      *slog.Logger
	services []*Service
	servers  []*http.Server
	lns      []net.Listener
}

// Open opens every service's listener and loads its key pair, so a
// wrong address or a missing key fails before anything is served.
func Open(log *slog.Logger, services ...*Service) (*Front, error) {
	f := &Front{log: log}
	for _, s := range services {
		srv, ln, err := listen(log, s)
		if err != nil {
			f.closeListeners()
			return nil, fmt.Errorf("%s: %w", s.Name, err)
		}
		f.services = append(f.services, s)
		f.servers = append(f.servers, srv)
		f.lns = append(f.lns, ln)
	}
	return f, nil
}

func listen(log *slog.Logger, s *Service) (*http.Server, net.Listener, error) {
	// The certificate is re-read on a handshake when its files changed,
	// so a renewed certificate takes effect without a restart.
	certs := &certLoader{cert: s.Listen.CertFile, key: s.Listen.KeyFile}
	if _, err := certs.get(nil); err != nil {
		return nil, nil, err
	}
	wt := s.WriteTimeout
	if wt == 0 {
		wt = DefaultWriteTimeout
	}
	srv := &http.Server{
		Handler:           s.Handler,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get},
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      wt,
		IdleTimeout:       IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", s.Listen.Addr())
	if err != nil {
		return nil, nil, err
	}
	return srv, ln, nil
}

func (f *Front) closeListeners() {
	for _, ln := range f.lns {
		ln.Close()
	}
}

// Addr returns where the named service listens, or "".
func (f *Front) Addr(name string) string {
	for i, s := range f.services {
		if s.Name == name {
			return f.lns[i].Addr().String()
		}
	}
	return ""
}

// Reload reloads every service that has something to reload, logging
// each failure; the service keeps what it had then.
func (f *Front) Reload() {
	for _, s := range f.services {
		if s.Reload == nil {
			continue
		}
		if err := s.Reload(); err != nil {
			f.log.Error("reload failed", "api", s.Name, "err", err)
		}
	}
}

// Serve serves every API until ctx ends, then shuts them down, giving
// requests in progress a few seconds. If one listener fails, the others
// are shut down too and its error is returned.
func (f *Front) Serve(ctx context.Context) error {
	errc := make(chan error, len(f.servers))
	for i, srv := range f.servers {
		s, ln := f.services[i], f.lns[i]
		f.log.Info("serving "+s.Name, append([]any{"addr", ln.Addr().String()}, s.Started...)...)
		go func() {
			err := srv.ServeTLS(ln, "", "")
			if errors.Is(err, http.ErrServerClosed) {
				err = nil
			} else {
				err = fmt.Errorf("%s: %w", s.Name, err)
			}
			errc <- err
		}()
	}
	var first error
	select {
	case first = <-errc:
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	var errs []error
	for _, srv := range f.servers {
		if err := srv.Shutdown(sctx); err != nil {
			errs = append(errs, err)
		}
	}
	if first != nil {
		return first
	}
	return errors.Join(errs...)
}
