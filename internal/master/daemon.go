// Package master is corrald, the master daemon: it owns the store, the
// configuration, the job queue, the lock manager and the logical units, and
// serves LUXI on a unix socket and the node-join endpoint over TLS. main
// only parses flags and calls Run.
package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/corral/corral/internal/coe"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/corral/corral/internal/baremetal"
	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/election"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/privsep"
	"github.com/corral/corral/internal/query"
	"github.com/corral/corral/internal/reconcile"
	"github.com/corral/corral/internal/rpc"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/storecfg"
)

// Version of the software; nodes must match it.
const Version = cmdlib.Version

// ProtocolVersion is the LUXI protocol version.
const ProtocolVersion = luxi.ProtocolVersion

// Files in the master's state directory.
const (
	FileStore        = storecfg.FileBolt
	FileCA           = layout.MasterCAFile
	FileCAKey        = layout.MasterCAKeyFile
	FileMasterCert   = layout.MasterCertFile
	FileMasterKey    = layout.MasterKeyFile
	FileDomainSecret = layout.DomainSecretFile
	FileLUXISocket   = layout.LUXISocketFile
)

// Options configure corrald.
type Options struct {
	// COESigner signs certificate requests with COE cluster CAs (nil:
	// COESignCSR refuses).
	COESigner   COESigner
	StateDir    string
	RunDir      string
	SocketPath  string // default <RunDir>/luxi.sock
	SocketGroup string // group owning the socket ("" = leave)
	JoinListen  string // default: the cluster's join address
	// MaxConns bounds the LUXI connections served at once (0 = derived
	// from RLIMIT_NOFILE; a larger value than that is clamped to it).
	// AdminConns is the reserve beyond it for root and corrald's own user
	// on the socket (0 = the luxi default, 32; < 0 = none).
	MaxConns   int
	AdminConns int
	// MaxMessageBytes bounds a LUXI request (0 = the luxi default, 16 MiB).
	MaxMessageBytes int
	// LUXIRequestMemory bounds the memory of LUXI requests being received,
	// across connections (0 = the luxi default; < 0 = none).
	LUXIRequestMemory int64
	// LUXIFrameTimeout bounds how long one LUXI request may take to arrive;
	// LUXIIdleTimeout closes a LUXI connection with no call in progress
	// (0 = the luxi defaults, 60 s and 10 min; < 0 = none).
	LUXIFrameTimeout time.Duration
	LUXIIdleTimeout  time.Duration
	// WatcherInterval is how often the watcher runs (0 = 60 s; < 0 = never):
	// the interval of every reconciler without one of its own.
	WatcherInterval time.Duration
	// ReconcilerIntervals are the reconcilers' own intervals, by name
	// (ReconcilerNames); a name that is none of them is refused.
	ReconcilerIntervals map[string]time.Duration
	// PendingImportTimeout is how long an import may wait for data before
	// the watcher removes it (0 = DefaultPendingImportTimeout; < 0 = never).
	PendingImportTimeout time.Duration
	// MachineTimeouts bound the waits for bare-metal agents (zero:
	// Ironic's defaults).
	MachineTimeouts baremetal.Timeouts
	// AgentAPIURL is the Bare Metal API as machines' agents reach it, and
	// AgentAPICert its certificate, which agents pin.
	AgentAPIURL, AgentAPICert string
	// MachineNetworks name the conductors' bare-metal networks.
	MachineNetworks baremetal.Networks
	Logger          *slog.Logger
	// Failpoints, when armed, kill corrald at named points (crash tests).
	Failpoints *failpoint.Set
	// OpenStore opens the store the cluster's store.json names. nil opens
	// the bbolt store in StateDir, and refuses a cluster on another
	// backend: the etcd client is linked by corrald's main, not here.
	OpenStore func(ctx context.Context) (store.Store, error)
	// CandidateName and CandidateAddress identify this corrald in the
	// master election of a cluster on etcd (default: the host name, and
	// the LUXI socket path); ElectionTTL is the election lease's TTL
	// (default election.DefaultTTL). A bbolt cluster has no election.
	CandidateName    string
	CandidateAddress string
	// ForwardAddress (HOST:PORT), when set on a cluster on etcd, is where
	// the elected master serves LUXI over mutual TLS to the standbys, which
	// then relay their own socket's connections to it (see forward.go).
	// It is also the address the election record publishes, unless
	// CandidateAddress overrides it. "" = no forwarding: standbys answer
	// with an error naming the master.
	ForwardAddress string
	ElectionTTL    time.Duration
	// ElectionReclaim lets a restarted corrald take back at once the
	// election key its previous run left behind (after a crash), instead of
	// waiting for the lease to expire. Only for unique candidate names.
	ElectionReclaim bool
}

// luxiOptions are the LUXI server options every socket corrald serves
// shares: its limits and timeouts.
func (o Options) luxiOptions() luxi.ServerOptions {
	return luxi.ServerOptions{
		MaxConns: o.MaxConns, AdminConns: o.AdminConns, MaxMessageBytes: o.MaxMessageBytes,
		FrameMemory: o.LUXIRequestMemory, FrameTimeout: o.LUXIFrameTimeout, IdleTimeout: o.LUXIIdleTimeout,
		Logger: o.Logger,
	}
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SocketPath == "" {
		o.SocketPath = filepath.Join(o.RunDir, FileLUXISocket)
	}
	if o.WatcherInterval == 0 {
		o.WatcherInterval = time.Minute
	}
	return o
}

// Daemon is a running corrald.
type Daemon struct {
	// ssconfRewrites carries redist-conf's requests to keepSsconf.
	ssconfRewrites chan chan error
	// machines is the bare-metal conductor's state shared by its units
	// and the agent's LUXI methods.
	machines *baremetal.Deps
	// coe is the state the COE units and reconcilers share.
	coe    *coe.Deps
	opts   Options
	log    *slog.Logger
	st     store.Store
	cfg    *confdb.DB
	queue  *jobqueue.Queue
	locks  *locking.Manager
	rpc    *nodeRPC
	proc   *cmdlib.Processor // what Ganeti's units share
	engine *engine.Processor // runs every registered unit for the job queue
	ca     *pki.CA
	qInst  *query.Resource[*query.InstanceRow]
	qNode  *query.Resource[*query.NodeRow]
	qGroup *query.Resource[*query.GroupRow]
	// reconcilers are corrald's periodic reconcilers (reconcilers.go).
	reconcilers *reconcile.Registry
	// metrics is served through QueryMetrics (see metrics.go).
	metrics *daemonMetrics
	// term is the master term this corrald holds (nil on bbolt: no
	// election).
	term *election.Term
}

// Run starts corrald and blocks until ctx ends. On an etcd store corrald
// is a master candidate: it stands by until elected, and returns an error
// matching ErrTermEnded when its term as master ends.
func Run(ctx context.Context, opts Options) error {
	// The store, the CA key and the domain secret are readable by their
	// owner only: refuse root and any user but the state's owner.
	if err := privsep.Master(privsep.Resolve(os.Geteuid()), privsep.MasterFacts(opts.StateDir)); err != nil {
		return err
	}
	if opts.OpenStore != nil {
		// Without a custom opener only bbolt can be opened: no election.
		el, err := elected(opts)
		if err != nil {
			return err
		}
		if el {
			return runCandidate(ctx, opts)
		}
	}
	d, err := Open(ctx, opts)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Serve(ctx)
}

// Open loads the state and recovers the job queue, without serving yet.
func Open(ctx context.Context, opts Options) (*Daemon, error) {
	opts = opts.withDefaults()
	st, err := openStore(ctx, opts)
	if err != nil {
		return nil, err
	}
	d, err := openOn(ctx, opts, st, nil)
	if err != nil {
		st.Close()
		return nil, err
	}
	return d, nil
}

// openOn is Open on an opened store (fenced by term when there is an
// election); on error the caller still owns st.
func openOn(ctx context.Context, opts Options, st store.Store, term *election.Term) (*Daemon, error) {
	opts = opts.withDefaults()
	d := &Daemon{opts: opts, log: opts.Logger, locks: locking.New(), term: term,
		qInst: query.Instances(), qNode: query.Nodes(), qGroup: query.Groups()}
	d.st = st
	d.metrics = newDaemonMetrics(func() *jobqueue.Queue { return d.queue })
	ok := false
	defer func() {
		if !ok && d.queue != nil {
			d.queue.Stop()
		}
	}()
	var err error
	if d.cfg, err = confdb.Open(ctx, st, nil); err != nil {
		return nil, err
	}
	// A new epoch fences any older master process: nodes refuse its RPCs.
	// An elected master's epoch is at least its term's token, which grows
	// from term to term whoever wins.
	c := d.cfg.Cluster()
	c.Epoch++
	if term != nil {
		c.Epoch = max(c.Epoch, term.Token)
		// The configuration names the node the elected master runs on,
		// so getmaster, ssconf and the checks that spare the master
		// follow a failover. Candidates are named after their node; one
		// that is not (a test's) leaves the record as it is.
		if n, ok := d.cfg.Node(term.Name); ok && c.MasterNode != n.UUID {
			d.log.Info("recording the new master node", "node", n.Name, "was", c.MasterNode)
			c.MasterNode = n.UUID
		}
	}
	if dropped := pruneHVParams(c); len(dropped) > 0 {
		d.log.Info("dropping hypervisor parameters their hypervisor does not have", "params", dropped)
	}
	tx := d.cfg.Begin()
	tx.PutCluster(c)
	if err := d.cfg.Commit(ctx, tx); err != nil {
		return nil, fmt.Errorf("recording the master epoch: %w", err)
	}
	if d.ca, err = pki.LoadCA(d.file(FileCA), d.file(FileCAKey)); err != nil {
		return nil, err
	}
	// A renewal of master.pem stopped half-way is finished first.
	if _, err := pki.RecoverKeyPairSwitch(d.file(FileMasterCert), d.file(FileMasterKey)); err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(d.file(FileMasterCert))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(d.file(FileMasterKey))
	if err != nil {
		return nil, err
	}
	client, err := rpc.NewClient(certPEM, keyPEM, d.ca.CertPEM(), func() int64 { return d.cfg.Cluster().Epoch }, rpc.ClientOptions{Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	// Nodes raise their epoch only for a grant the CA signed: this master
	// signs one now that its fenced write of the epoch has succeeded.
	if err := d.grantEpoch(client, c.Epoch); err != nil {
		return nil, err
	}
	units := engine.NewRegistry(opcodes.Default())
	d.rpc = &nodeRPC{client: client, cfg: d.cfg, term: term, metrics: d.metrics, timeouts: units}
	d.proc = cmdlib.NewProcessor(d.cfg, d.rpc, opts.Logger)
	if term != nil {
		// Candidates are named after the node they run on (their host
		// name by default): that node holds the cluster IP.
		d.proc.SelfNode = term.Name
	}
	d.ssconfRewrites = make(chan chan error)
	d.proc.RewriteSsconf = d.rewriteSsconf
	d.machines = &baremetal.Deps{Cfg: d.cfg, RPC: d.rpc, Timeouts: opts.MachineTimeouts,
		AgentAPIURL: opts.AgentAPIURL, AgentAPICert: opts.AgentAPICert, Networks: opts.MachineNetworks,
		Notify: func(event string) error { return d.engine.Notify(event) }}
	coeSeal, err := coeKeys(d.ca)
	if err != nil {
		return nil, err
	}
	if d.opts.COESigner == nil {
		d.opts.COESigner = coeSigner{keys: coeSeal}
	}
	d.coe = &coe.Deps{Cfg: d.cfg, Drivers: coeDrivers(coeSeal)}
	registerUnits(units, d.proc, d.machines, d.coe)
	if err := units.Check(); err != nil {
		return nil, fmt.Errorf("registering the logical units: %w", err)
	}
	secrets := domainSecrets{dir: opts.StateDir, st: st, ca: d.ca}
	secrets.sync(ctx, d.log)
	d.proc.Secrets = secrets
	d.proc.Certs = &masterCerts{ca: d.ca, client: client, certPath: d.file(FileMasterCert), keyPath: d.file(FileMasterKey)}
	d.engine = engine.NewProcessor(d.cfg, d.locks, d.rpc, units, opts.Logger)
	d.engine.Failpoints = opts.Failpoints
	tab := units.Table()
	var runner jobqueue.OpRunner = d.engine
	if term != nil {
		runner = termRunner{OpRunner: d.engine, term: term}
	}
	d.queue, err = jobqueue.New(jobqueue.Options{
		Store:   st,
		Runner:  runner,
		Summary: tab.Summary,
		// An op's secrets leave its record in the write of its end.
		Scrub: func(in json.RawMessage) json.RawMessage { return tab.Redact(in, opcodes.Secret) },
		Validate: func(id string, in json.RawMessage) error {
			if _, ok := tab.Lookup(id); !ok {
				_, err := tab.Decode(in)
				return err
			}
			return nil
		},
		MaxRunning: func() int { return d.cfg.Cluster().MaxRunningJobs },
		QueueSize:  func() int { return d.cfg.Cluster().JobQueueSize },
		Logger:     opts.Logger,
		Finalized:  d.metrics.jobFinalized,
	})
	if err != nil {
		return nil, err
	}
	d.engine.Wake = d.queue.Notify
	if term != nil {
		// Tell every node the new epoch before any job resumes: a node that
		// has seen it refuses the deposed master's calls, so the window
		// where an old master could still act on a node closes here for
		// every reachable node, not when this master first needs it.
		d.announceEpoch(ctx)
	}
	if err := d.queue.Start(ctx); err != nil {
		return nil, fmt.Errorf("recovering the job queue: %w", err)
	}
	if d.reconcilers, err = d.newReconcilers(); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// openStore opens the cluster's store: through opts.OpenStore when given,
// else the bbolt file, after checking store.json does not name another
// backend.
func openStore(ctx context.Context, opts Options) (store.Store, error) {
	if opts.OpenStore != nil {
		return opts.OpenStore(ctx)
	}
	cfg, err := storecfg.Load(opts.StateDir)
	if err != nil {
		return nil, err
	}
	if cfg.Backend != storecfg.BackendBolt {
		return nil, fmt.Errorf("the cluster's store is on %s (%s), which this program cannot open", cfg.Backend, storecfg.Path(opts.StateDir))
	}
	path := filepath.Join(opts.StateDir, FileStore)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("no cluster store at %s (run 'corral cluster init' first): %w", path, err)
	}
	st, err := boltstore.Open(path, boltstore.Options{Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	return st, nil
}

func (d *Daemon) file(name string) string { return filepath.Join(d.opts.StateDir, name) }

// Serve runs the LUXI server, the join listener and the watcher.
func (d *Daemon) Serve(ctx context.Context) error {
	// Close must not close the store under a LUXI call or the watcher:
	// Serve returns only after both have stopped (cancel runs first).
	var bg sync.WaitGroup
	defer bg.Wait()
	outer := ctx
	// The server and the watcher stop when outer ends, except that a
	// master that resigned on request first lets its reply go out.
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	errc := make(chan error, 4)
	lo := d.opts.luxiOptions()
	lo.Path, lo.Mode, lo.Group, lo.Logger = d.opts.SocketPath, 0o660, d.opts.SocketGroup, d.log
	srv := luxi.NewServer(&luxiHandler{d}, lo)
	bg.Add(1)
	go func() {
		defer bg.Done()
		errc <- srv.Serve(ctx)
	}()
	d.serveGanetiDropin(ctx, &bg, srv)
	if d.opts.ForwardAddress != "" && d.term != nil {
		cfg, _, err := forwardTLS(d.opts.StateDir)
		if err != nil {
			return err
		}
		// The forward listener's connections count against the same
		// descriptors and request memory as the socket's.
		fo := d.opts.luxiOptions()
		fo.Logger, fo.ShareLimits = d.log, srv
		fsrv := luxi.NewServer(&luxiHandler{d}, fo)
		err = d.bindLater(ctx, &bg, "forward listener", d.opts.ForwardAddress, func(ln net.Listener) {
			errc <- fsrv.ServeListener(ctx, tlsListener{Listener: ln, cfg: cfg, log: d.log})
		})
		if err != nil {
			return err
		}
	}

	joinAddr := d.opts.JoinListen
	if joinAddr == "" {
		joinAddr = d.cfg.Cluster().JoinAddress
	}
	var joinSrv *http.Server
	if joinAddr != "" {
		certPEM, _ := os.ReadFile(d.file(FileMasterCert))
		keyPEM, _ := os.ReadFile(d.file(FileMasterKey))
		tlsCfg, err := pki.ServerTLSConfig(certPEM, keyPEM, d.ca.CertPEM())
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/join/", rpc.JoinHandler(d.ca, d.validateJoin, d.log))
		joinSrv = &http.Server{Handler: mux, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
		err = d.bindLater(ctx, &bg, "join listener", joinAddr, func(ln net.Listener) {
			if err := joinSrv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		})
		if err != nil {
			return err
		}
	}
	// Reconcilers without an interval (--watcher-interval 0) do not run.
	bg.Add(1)
	go func() {
		defer bg.Done()
		d.reconcilers.Run(ctx)
	}()
	// The master's node takes the cluster IP and the others let it go,
	// as Ganeti's master start and master-failover do.
	bg.Add(1)
	go func() {
		defer bg.Done()
		if err := d.proc.ClaimMasterIP(ctx); err != nil {
			d.log.Error("could not activate the master IP; 'corral cluster activate-master-ip' retries", "err", err)
		}
	}()
	maxConns, adminConns := srv.MaxConns()
	d.log.Info("corrald serving", "luxi", d.opts.SocketPath, "max_connections", maxConns, "admin_connections", adminConns, "join", joinAddr, "forward", d.opts.ForwardAddress, "epoch", d.cfg.Cluster().Epoch, "pid", os.Getpid())
	var err error
	select {
	case <-outer.Done():
		if errors.Is(context.Cause(outer), election.ErrResigned) {
			// The next master may share the join address (candidates on
			// one machine): free it first.
			if joinSrv != nil {
				_ = joinSrv.Close()
			}
			t := time.NewTimer(replyGrace)
			select {
			case <-t.C:
			case err = <-errc:
			}
			t.Stop()
		}
	case err = <-errc:
	}
	if joinSrv != nil {
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		_ = joinSrv.Shutdown(sctx)
		c()
	}
	cancel()
	return err
}

// bindRetry is how often an elected master tries again to listen on an
// address still in use; bindWarnEvery how often it says so.
const (
	bindRetry     = 250 * time.Millisecond
	bindWarnEvery = 30 * time.Second
)

// bindLater listens on addr and runs serve with the listener in a goroutine
// of wg. When an elected master finds the address in use, which a frozen
// or slow predecessor on the same machine can hold, it does not give up
// its term for that: it serves everything else and keeps trying in the
// background until the address is free or ctx ends. Any other failure,
// and any failure of a master without election, is returned.
func (d *Daemon) bindLater(ctx context.Context, wg *sync.WaitGroup, what, addr string, serve func(net.Listener)) error {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		wg.Go(func() { serve(ln) })
		return nil
	}
	if d.term == nil || !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s on %s: %w", what, addr, err)
	}
	d.log.Warn(what+": address in use, perhaps still held by the previous master; serving without it and retrying", "addr", addr)
	wg.Go(func() {
		t := time.NewTicker(bindRetry)
		defer t.Stop()
		warned := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			ln, err := net.Listen("tcp", addr)
			if err == nil {
				d.log.Info(what+": listening now", "addr", addr, "after", time.Since(warned).Round(time.Millisecond))
				serve(ln)
				return
			}
			if time.Since(warned) >= bindWarnEvery {
				d.log.Warn(what+": address still unavailable", "addr", addr, "err", err)
				warned = time.Now()
			}
		}
	})
	return nil
}

// Close stops the queue and closes the store. Running jobs keep their last
// committed step and resume at the next start.
func (d *Daemon) Close() {
	if d.queue != nil {
		d.queue.Stop()
	}
	if d.st != nil {
		d.st.Close()
	}
}

// grantEpoch signs the grant of epoch (pki.EpochGrant) with the cluster CA
// and hands it to client. It must run only after epoch is durable in the
// store under this master's term.
func (d *Daemon) grantEpoch(client *rpc.Client, epoch int64) error {
	g := pki.EpochGrant{Epoch: epoch, Issued: time.Now().Unix()}
	if d.term != nil {
		g.Master, g.Token = d.term.Name, d.term.Token
	} else if n, ok := d.cfg.Node(d.cfg.Cluster().MasterNode); ok {
		g.Master = n.Name
	}
	grant, err := d.ca.SignEpochGrant(g)
	if err != nil {
		return fmt.Errorf("granting the master epoch: %w", err)
	}
	client.SetEpochGrant(epoch, grant)
	return nil
}

// announceTimeout bounds the epoch announcement to one node.
const announceTimeout = 3 * time.Second

// announceEpoch calls every online node once (a read-only call carries the
// epoch, which the node records durably before answering), in parallel and
// best effort: an unreachable node learns the epoch from the first call it
// gets, as before.
func (d *Daemon) announceEpoch(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range d.cfg.Nodes() {
		if n.Offline {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, announceTimeout)
			defer cancel()
			var v any
			if err := d.rpc.Call(actx, n, nodeapi.Version, "", nil, &v); err != nil {
				d.log.Warn("could not announce the master epoch to a node; it learns it with the next call", "node", n.Name, "err", err)
			}
		}()
	}
	wg.Wait()
	d.log.Info("master epoch announced to the nodes", "epoch", d.cfg.Cluster().Epoch)
}

// Queue exposes the job queue (for in-process tests and benchmarks).
func (d *Daemon) Queue() *jobqueue.Queue { return d.queue }

// nodeRPC adapts the RPC client to cmdlib.NodeRPC: a node is reached at its
// primary IP on the cluster's RPC port and must present a certificate with
// its own name.
type nodeRPC struct {
	client *rpc.Client
	cfg    *confdb.DB
	term   *election.Term // nil: no election
	// metrics records each call's latency (nil: not recorded).
	metrics *daemonMetrics
	// timeouts holds the timeouts of calls that wait on purpose (nil:
	// every call gets the RPC client's default).
	timeouts *engine.Registry
}

func (r *nodeRPC) Call(ctx context.Context, n *config.Node, method, opID string, args, reply any) error {
	if r.term != nil {
		// A call made for a master whose term is over must not reach a node.
		if err := r.term.Err(); err != nil {
			return fmt.Errorf("no longer the master: %w", err)
		}
		var cancel context.CancelFunc
		ctx, cancel = withTerm(ctx, r.term)
		defer cancel()
	}
	addr := net.JoinHostPort(n.PrimaryIP, strconv.Itoa(r.cfg.Cluster().RPCPort))
	start := time.Now()
	err := r.client.CallTimeout(ctx, r.callTimeout(args), n.Name, addr, method, opID, args, reply)
	r.metrics.nodeRPC(method, start, err)
	return err
}

// callTimeout is the registered timeout of a node call (calls that wait
// on purpose), else the RPC client's default.
func (r *nodeRPC) callTimeout(args any) time.Duration {
	if r.timeouts != nil {
		if t, ok := r.timeouts.CallTimeout(args); ok {
			return t
		}
	}
	return rpc.DefaultTimeout
}
