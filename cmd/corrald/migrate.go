package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/storecfg"
	"github.com/corral/corral/internal/storecfg/backend"
)

// runMigrate is `corrald migrate-store`: it moves a stopped cluster's store
// from bbolt to etcd. It lives in corrald because it links the etcd client;
// `corral cluster migrate-store` runs it as corral-master.
func runMigrate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("corrald migrate-store", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: corrald migrate-store --etcd-endpoints URL[,URL...] [flags]

Copy every key of the cluster's bbolt store into an empty etcd prefix, verify
the copy (key count and a SHA-256 over every key and value, on both sides),
then switch <state-dir>/master/store.json to etcd and keep the bbolt file
renamed as a backup. corrald must be stopped (the bbolt file lock tells).
Run it as corral-master; 'corral cluster migrate-store' does.

Flags:
`)
		fs.PrintDefaults()
	}
	stateDir := fs.String("state-dir", env("CORRAL_STATE_DIR", bootstrap.DefaultStateDir), "cluster state directory (env CORRAL_STATE_DIR)")
	endpoints := fs.String("etcd-endpoints", "", "etcd members' client URLs, comma-separated (required)")
	prefix := fs.String("etcd-prefix", "", "key prefix in etcd (default /corral/<cluster-name>/)")
	cert := fs.String("etcd-cert", "", "corrald's etcd client certificate, relative to <state-dir>/master (default "+storecfg.FileEtcdClientCert+" with https endpoints)")
	key := fs.String("etcd-key", "", "its key (default "+storecfg.FileEtcdClientKey+")")
	ca := fs.String("etcd-ca", "", "CA bundle the members' certificates chain to (default the cluster CA, "+storecfg.FileClusterCA+")")
	every := fs.Int("progress-every", 10000, "print a progress line every this many keys")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("migrate-store takes no arguments (got %q)", fs.Args())
	}
	if *endpoints == "" {
		return errors.New("migrate-store: --etcd-endpoints is required")
	}
	if os.Geteuid() == 0 {
		return fmt.Errorf("migrate-store must run as %s, who owns the master state (e.g. runuser -u %s -- corrald migrate-store ...)", bootstrap.MasterUser, bootstrap.MasterUser)
	}
	var eps []string
	for _, e := range strings.Split(*endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l := bootstrap.Layout{StateDir: *stateDir}
	res, err := backend.Migrate(ctx, backend.MigrateOptions{
		MasterDir: l.MasterDir(),
		Target: storecfg.Config{Backend: storecfg.BackendEtcd, Endpoints: eps, Prefix: *prefix,
			CertFile: *cert, KeyFile: *key, CAFile: *ca},
		Out: out, ProgressEvery: *every,
	})
	if err != nil {
		return fmt.Errorf("migrate-store: %w", err)
	}
	fmt.Fprintf(out, "Done: %d keys on etcd under %s; corrald opens etcd from now on.\n", res.Target.Keys, res.Config.Prefix)
	return nil
}
