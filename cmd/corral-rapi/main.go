// Command corral-rapi is the public front of Corral's HTTP APIs: it serves
// Ganeti's Remote API v2 over HTTPS (and every other API registered in
// apis, each on its own listener). It runs as an unprivileged user in the
// corral-admin group and reaches corrald only through LUXI sockets.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/baremetalapi"
	coeapi "github.com/corral/corral/internal/coe/api"
	"github.com/corral/corral/internal/privsep"
	"github.com/corral/corral/internal/rapi"
)

// apis are the APIs the front serves; adding one is its package and a line
// here. An API whose builder returns no service (its port left at 0) is
// off.
var apis = []apifront.Registration{rapi.Registration, baremetalapi.Registration, coeapi.Registration}

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
	var sockets []string
	fs.Func("luxi-socket", "corrald's LUXI socket; repeat it with other master candidates' sockets to have them tried in turn when the one in use is gone",
		func(s string) error {
			if s == "" {
				return errors.New("empty socket path")
			}
			sockets = append(sockets, s)
			return nil
		})
	allowRoot := fs.Bool("allow-root", false, "allow running as root (not recommended)")
	debug := fs.Bool("debug", false, "debug logging")
	listens := make([]*apifront.Listen, len(apis))
	builds := make([]func(apifront.Env) (*apifront.Service, error), len(apis))
	for i, a := range apis {
		listens[i], builds[i] = a.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(sockets) == 0 {
		return errors.New("--luxi-socket is required")
	}
	for i, l := range listens {
		if apis[i].OffAtPortZero && l.Port == 0 {
			continue // the API is off
		}
		if err := privsep.RAPI(privsep.Resolve(os.Geteuid()), privsep.RAPIFacts(l.KeyFile, *allowRoot)); err != nil {
			return err
		}
	}
	lvl := slog.LevelInfo
	if *debug {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	pool := apifront.NewLuxiPool(sockets, apifront.PoolOptions{Log: log})
	defer pool.Close()
	env := apifront.Env{LUXI: pool, Log: log}
	var services []*apifront.Service
	for _, build := range builds {
		s, err := build(env)
		if err != nil {
			return err
		}
		if s != nil {
			services = append(services, s)
		}
	}
	front, err := apifront.Open(log, services...)
	if err != nil {
		return err
	}

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
				front.Reload()
			}
		}
	}()
	if len(sockets) > 1 {
		log.Info("LUXI sockets, in order of preference", "sockets", strings.Join(sockets, ","))
	}
	return front.Serve(ctx)
}
