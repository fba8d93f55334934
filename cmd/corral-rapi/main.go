// Command corral-rapi serves Ganeti's Remote API v2 over HTTPS. It runs as an
// unprivileged user in the corral-admin group and reaches corrald only
// through the LUXI socket.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corral/corral/internal/privsep"
	"github.com/corral/corral/internal/rapi"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "corral-rapi:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("corral-rapi", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: corral-rapi [flags]\n\nServes Ganeti's RAPI v2 over HTTPS for corrald.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	bind := fs.String("bind", "", "address to listen on (empty: all)")
	port := fs.Int("port", 5080, "TCP port")
	certFile := fs.String("cert", "/var/lib/corral/rapi/rapi.crt", "TLS certificate (PEM, may include the chain)")
	keyFile := fs.String("key", "/var/lib/corral/rapi/rapi.key", "TLS private key (PEM)")
	socket := fs.String("luxi-socket", "", "corrald's LUXI socket")
	usersFile := fs.String("users", "/var/lib/corral/rapi/users", "users file (Ganeti's format); re-read on SIGHUP")
	requireAuth := fs.Bool("require-authentication", false, "require credentials on every request, GETs included")
	maxClients := fs.Int("max-clients", 20, "requests served at once; more get 503")
	allowRoot := fs.Bool("allow-root", false, "allow running as root (not recommended)")
	debug := fs.Bool("debug", false, "debug logging")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" {
		return errors.New("--luxi-socket is required")
	}
	if *maxClients < 1 {
		return errors.New("--max-clients must be at least 1")
	}
	if err := privsep.RAPI(privsep.Resolve(os.Geteuid()), privsep.RAPIFacts(*keyFile, *allowRoot)); err != nil {
		return err
	}
	lvl := slog.LevelInfo
	if *debug {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	// The certificate is re-read on each handshake only when its file
	// changes, so a renewed certificate takes effect without a restart.
	certs := &certLoader{cert: *certFile, key: *keyFile}
	if _, err := certs.get(nil); err != nil {
		return err
	}
	users, err := rapi.LoadUsers(*usersFile)
	if err != nil {
		return err
	}
	h := rapi.NewHandler(rapi.Config{
		Backend: &rapi.LuxiBackend{Socket: *socket}, Users: users,
		RequireAuth: *requireAuth, MaxClients: *maxClients, Log: log,
	})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				u, err := rapi.LoadUsers(*usersFile)
				if err != nil {
					log.Error("reloading users file", "err", err)
					continue
				}
				h.SetUsers(u)
				log.Info("users file reloaded", "users", u.Len())
			}
		}
	}()

	addr := net.JoinHostPort(*bind, fmt.Sprint(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		// Longer than one /2/jobs/[id]/wait.
		WriteTimeout: 120 * time.Second,
		IdleTimeout:  120 * time.Second,
		ErrorLog:     slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving RAPI", "addr", ln.Addr().String(), "users", users.Len(), "require_authentication", *requireAuth)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}
