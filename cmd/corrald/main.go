// Command corrald is the Corral master daemon. It runs as corral-master and
// never as root.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/baremetal"
	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/master"
	"github.com/corral/corral/internal/reconcile"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/storecfg/backend"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "corrald:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(args []string) error {
	if len(args) > 0 && args[0] == "migrate-store" {
		return runMigrate(args[1:], os.Stdout)
	}
	fs := flag.NewFlagSet("corrald", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: corrald [flags]\n       corrald migrate-store [flags]   (see corrald migrate-store -h)\n\nThe Corral master daemon: job queue, configuration, LUXI socket, node joins.\nIt must run as the corral-master user (never root). The store it opens is\nnamed by <state-dir>/master/store.json (the bbolt file when there is none).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	stateDir := fs.String("state-dir", env("CORRAL_STATE_DIR", bootstrap.DefaultStateDir), "cluster state directory (env CORRAL_STATE_DIR); corrald uses <state-dir>/master")
	runDir := fs.String("run-dir", env("CORRAL_RUN_DIR", bootstrap.DefaultRunDir), "runtime directory for sockets (env CORRAL_RUN_DIR); the LUXI socket is <run-dir>/master/luxi.sock")
	group := fs.String("socket-group", bootstrap.AdminGroup, "group that may use the LUXI socket (\"\" keeps the default group)")
	join := fs.String("join-listen", "", "address of the node-join TLS listener (default: the cluster's join address)")
	maxConns := fs.Int("max-connections", 0, "maximum concurrent LUXI connections (0: derived from the descriptor limit, RLIMIT_NOFILE,\nless max(256, 10%) for the store, etcd, node RPC and listeners; a larger value is lowered to that, with a warning)")
	adminConns := fs.Int("admin-connections", luxi.DefaultAdminConns, "LUXI connections beyond --max-connections kept for root and corrald's own user, so that an operator gets in\nwhen other clients hold every slot (0: none)")
	maxMsg := fs.Int("max-message-bytes", luxi.DefaultMaxMessageBytes, "largest LUXI request accepted; a larger one gets an error reply and its connection is closed")
	reqMem := fs.Int64("request-memory", 0, "memory all LUXI connections together may hold in requests being received; a request that would exceed it\ngets an error reply and its connection is closed (0: max(256 MiB, 4 x --max-message-bytes))")
	frameTimeout := fs.Duration("frame-timeout", luxi.DefaultFrameTimeout, "a LUXI request must arrive within this long of its first byte, else the client gets an error and is disconnected (0: no limit)")
	idleTimeout := fs.Duration("idle-timeout", luxi.DefaultIdleTimeout, "a LUXI connection with no call in progress is closed after this long (0: never); a call such as WaitForJobChange is not idleness")
	watch := fs.Duration("watcher-interval", time.Minute, "how often the watcher checks instances: the interval of every reconciler without one of its own (0 disables those)")
	intervals := map[string]time.Duration{}
	fs.Func("reconciler-interval", "NAME=DURATION: run that reconciler at this interval instead of --watcher-interval (repeatable);\nthe reconcilers: "+strings.Join(master.ReconcilerNames(), ", "), func(spec string) error {
		name, every, err := reconcile.ParseInterval(spec)
		if err != nil {
			return err
		}
		if err := reconcile.CheckNames("", []string{name}, master.ReconcilerNames()); err != nil {
			return err
		}
		intervals[name] = every
		return nil
	})
	pendingImport := fs.Duration("pending-import-timeout", master.DefaultPendingImportTimeout, "the watcher removes an import (of an export or a move) that has received nothing for this long (0 never)")
	candName := fs.String("candidate-name", env("CORRAL_CANDIDATE_NAME", ""), "this corrald's name in the master election of a cluster on etcd (env CORRAL_CANDIDATE_NAME; default: the host name, i.e. the node name)")
	candAddr := fs.String("candidate-address", env("CORRAL_CANDIDATE_ADDRESS", ""), "where this corrald serves when it is master, published in the election record (env CORRAL_CANDIDATE_ADDRESS; default: the forward address, else its LUXI socket)")
	fwdAddr := fs.String("forward-address", env("CORRAL_FORWARD_ADDRESS", ""), "HOST:PORT where this corrald, when master, serves LUXI over mutual TLS to the standbys, which then relay their own\nsocket to the master (env CORRAL_FORWARD_ADDRESS; default: none, standbys refuse calls naming the master; etcd clusters only)")
	electTTL := fs.Duration("election-ttl", 0, "lease TTL of the master election (default 5s): a dead master is replaced about this long after it stops")
	reclaim := fs.Bool("election-reclaim", true, "after a crash, take back at once the election key held under this candidate's name instead of waiting for its lease to expire (candidate names must be unique)")
	bmURL := fs.String("baremetal-api-url", "", "the Bare Metal API as bare-metal machines' agents reach it (their ipa-api-url), e.g. https://10.0.0.1:6385; agent-driven deploy, clean and rescue need it")
	bmCert := fs.String("baremetal-api-cert", "", "PEM certificate of the Bare Metal API (or of a CA in its chain): agents pin its SHA-256 fingerprint")
	rescueTimeout := fs.Duration("rescue-callback-timeout", baremetal.DefaultTimeouts.RescueCallback, "a rescue fails if the machine's agent has not called back within this long (Ironic's rescue_callback_timeout)")
	deployTimeout := fs.Duration("deploy-callback-timeout", baremetal.DefaultTimeouts.DeployCallback, "a deploy fails if the machine's agent has not called back within this long (Ironic's deploy_callback_timeout)")
	cleanTimeout := fs.Duration("clean-callback-timeout", baremetal.DefaultTimeouts.CleanCallback, "a clean fails if the machine's agent has not called back within this long (Ironic's clean_callback_timeout)")
	bmNets := baremetal.DefaultNetworks
	fs.StringVar(&bmNets.Provisioning, "baremetal-provisioning-network", bmNets.Provisioning, "conductor network machines with the bridged network interface deploy and clean on")
	fs.StringVar(&bmNets.Rescue, "baremetal-rescue-network", bmNets.Rescue, "conductor network such machines boot the rescue ramdisk on")
	fs.StringVar(&bmNets.Tenant, "baremetal-tenant-network", bmNets.Tenant, "conductor network such machines run on once deployed or rescued")
	debug := fs.Bool("debug", false, "debug logging")
	pprofOn := fs.Bool("pprof", env("CORRAL_PPROF", "") != "", "serve Go profiles (net/http/pprof) on <run-dir>/master/pprof.sock, mode 0600 (env CORRAL_PPROF=1);\nfetch one with: curl --unix-socket SOCK -o cpu.prof 'http://corrald/debug/pprof/profile?seconds=30'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lvl := slog.LevelInfo
	if *debug {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	fp, err := failpoint.Load(os.Getenv, failpoint.MasterPoints()...)
	if err != nil {
		return err
	}
	if fp.Armed() {
		log.Warn("failpoints armed: corrald kills itself with SIGKILL when one is hit (crash tests only)", "failpoints", fp.String())
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l := bootstrap.Layout{StateDir: *stateDir, RunDir: *runDir}
	if *pprofOn {
		path := filepath.Join(l.MasterRunDir(), "pprof.sock")
		if err := servePprof(path, log); err != nil {
			return err
		}
		log.Info("serving profiles", "socket", path)
	}
	w := *watch
	if w == 0 {
		w = -1
	}
	pi := *pendingImport
	if pi == 0 {
		pi = -1
	}
	admin := *adminConns
	if admin == 0 {
		admin = -1
	}
	return master.Run(ctx, master.Options{
		StateDir: l.MasterDir(), RunDir: l.MasterRunDir(), SocketPath: filepath.Join(l.MasterRunDir(), master.FileLUXISocket),
		SocketGroup: *group, JoinListen: *join, MaxConns: *maxConns, AdminConns: admin, MaxMessageBytes: *maxMsg,
		LUXIRequestMemory: *reqMem, LUXIFrameTimeout: disabledIfZero(*frameTimeout), LUXIIdleTimeout: disabledIfZero(*idleTimeout), WatcherInterval: w, ReconcilerIntervals: intervals, PendingImportTimeout: pi, Logger: log,
		MachineTimeouts: baremetal.Timeouts{RescueCallback: *rescueTimeout, DeployCallback: *deployTimeout, CleanCallback: *cleanTimeout},
		AgentAPIURL:     *bmURL, AgentAPICert: *bmCert, MachineNetworks: bmNets,
		Failpoints: fp, CandidateName: *candName, CandidateAddress: *candAddr, ForwardAddress: *fwdAddr, ElectionTTL: *electTTL, ElectionReclaim: *reclaim,
		OpenStore: func(ctx context.Context) (store.Store, error) {
			st, cfg, err := backend.Open(ctx, l.MasterDir(), backend.Options{Logger: log})
			if err == nil {
				log.Info("store opened", "backend", cfg.Backend, "endpoints", cfg.Endpoints, "prefix", cfg.Prefix)
			}
			return st, err
		},
	})
}

// disabledIfZero maps a flag's 0 ("no limit") to the negative duration
// that means none in master.Options, where 0 takes the default.
func disabledIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// servePprof serves the runtime profiles on a unix socket only the daemon's
// user (and root) can open: profiles show memory contents such as keys.
func servePprof(path string, log *slog.Logger) error {
	_ = os.Remove(path)
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return fmt.Errorf("pprof socket: %w", err)
	}
	// Contention shows in the mutex and block profiles only when sampled.
	runtime.SetMutexProfileFraction(100)
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Warn("pprof server stopped", "err", err)
		}
	}()
	return nil
}
