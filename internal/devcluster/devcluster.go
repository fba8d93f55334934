// Package devcluster brings up and tears down a complete local cluster on
// one machine: the master's node daemon, corrald and corral-rapi, plus N
// more node daemons on 127.0.0.x addresses, each with its own state and run
// directories. Several dev clusters can run side by side: each picks free
// loopback addresses and ports. It runs every daemon under its real user.
package devcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/storecfg"
)

// Options for Up.
type Options struct {
	StateDir string
	Nodes    int    // extra node daemons besides the master's
	Name     string // cluster name
	BinDir   string // where corrald and corral-node are (default: next to this executable)
	OSDir    string // OS definitions (default: <BinDir>/../os)
	ImageDir string // guest kernel+initrd for kvm (built by scripts/build-guest-image.sh); "" = none
	// Hypervisors to enable; default kvm,fake when qemu is installed, else fake.
	Hypervisors  []string
	FakeMemMiB   int64
	WatcherEvery time.Duration
	CorraldArgs  []string // extra corrald flags, e.g. --max-connections
	NodeArgs     []string // extra corral-node flags, e.g. --agent-ramdisk
	// NodeArgsFor are extra corral-node flags of one node, by node name
	// (e.g. a --master-ip-netns of its own).
	NodeArgsFor map[string][]string
	// ClusterIP, MasterNetdev and MasterNetmask are the cluster's master
	// network parameters at init (see bootstrap.InitOptions).
	ClusterIP     string
	MasterNetdev  string
	MasterNetmask int
	// CandidatesOnNodes names the n-th master candidate "node<n>", after
	// the n-th node, as when every candidate runs on a node of its own
	// (the node whose name a master has holds the cluster IP). It needs
	// Nodes >= Masters-1.
	CandidatesOnNodes bool
	// Store is the store backend: bbolt (default) or etcd. With etcd the
	// dev cluster starts EtcdMembers members (1 or 3, default 1) as the
	// user corral-etcd on the master's address, inits the cluster on bbolt
	// and moves it to etcd with corrald migrate-store before corrald
	// starts: the same path as 'corral cluster init --store etcd'.
	Store       string
	EtcdMembers int
	EtcdBinary  string // default etcdproc.Binary()
	// ManagedEtcd marks the cluster's etcd members as Corral's: promoting
	// a node to master candidate then adds a member run by its node
	// daemon, and demoting it removes that member (etcd store only).
	ManagedEtcd bool
	// Masters is how many corrald processes run as master candidates
	// (default 1; more need the etcd store). They all run on the master's
	// machine with the master's state files, each with its own run
	// directory and LUXI socket, and are recorded as "corrald",
	// "corrald 2", ... (see CorraldName).
	Masters int
	// NoForward keeps the master candidates of an etcd cluster from
	// forwarding: by default each gets a forward address on 127.0.0.1, so
	// a standby's socket relays to the master and any candidate's socket
	// serves the cluster; with NoForward a standby answers every call with
	// an error naming the master.
	NoForward bool
	// GanetiDropin turns on Ganeti drop-in mode (package ganetidropin):
	// Ganeti's own tools then work against the dev cluster with
	// GANETI_ROOTDIR=<GanetiRoot> GANETI_HOSTNAME=node1 (both in the env
	// file). GanetiRoot defaults to <state-dir>/ganeti/node1; "/" is the
	// machine's own /var/lib/ganeti and /var/run/ganeti.
	GanetiDropin bool
	GanetiRoot   string
	// BaremetalPort is the Bare Metal API's port on the master's address
	// (0: a free one; DefaultBaremetalPort falls back to a free one when
	// taken) and BaremetalAuth its authentication: http_basic (default,
	// with a new password for BaremetalDevUser), noauth, or off. The
	// openstack client's settings are written to baremetal.env.
	BaremetalPort int
	BaremetalAuth string
	// COEPort is the Container Infra API's port on the master's address
	// (0: a free one; DefaultCOEPort falls back to a free one when taken)
	// and COEAuth its authentication: http_basic (default, with a new
	// password for COEDevUser), noauth, or off. The openstack client's
	// settings are written to coe.env.
	COEPort int
	COEAuth string
	Log     func(format string, args ...any)
}

// Proc is a daemon the dev cluster started.
type Proc struct {
	Name string   `json:"name"`
	PID  int      `json:"pid"`
	Args []string `json:"args"`
	Log  string   `json:"log"`
	// User the daemon runs as, when not root and not implied by its name
	// (corrald runs as corral-master).
	User string `json:"user,omitempty"`
}

// EtcdMemberName is the process name of the n-th etcd member (from 1).
func EtcdMemberName(n int) string { return fmt.Sprintf("etcd member %d", n) }

// State is written to <state-dir>/dev.json so down and tests can find
// everything.
type State struct {
	StateDir string   `json:"state_dir"`
	RunDir   string   `json:"run_dir"`
	Socket   string   `json:"socket"`
	Master   string   `json:"master"`
	Nodes    []string `json:"nodes"`
	IPs      []string `json:"ips"`
	RPCPort  int      `json:"rpc_port"`
	Procs    []Proc   `json:"procs"`
	// Store is the store backend ("" = bbolt) and EtcdEndpoints the etcd
	// members' client URLs.
	Store         string   `json:"store,omitempty"`
	EtcdEndpoints []string `json:"etcd_endpoints,omitempty"`
	// RAPIURL is where corral-rapi listens; its credentials are in
	// rapi.env, which only root reads (this file is world-readable).
	RAPIURL string `json:"rapi_url,omitempty"`
	// BaremetalURL is the Bare Metal API's endpoint; the openstack
	// client's settings are in baremetal.env (root only).
	BaremetalURL string `json:"baremetal_url,omitempty"`
	// COEURL is the Container Infra API's endpoint (ending in /v1); the
	// openstack client's settings are in coe.env (root only).
	COEURL string `json:"coe_url,omitempty"`
	// Created is true when Up created the state directory, so purge may
	// remove it whole; otherwise purge removes only what Up put there.
	Created bool `json:"created"`
	// GanetiRoot is the root prefix of Ganeti drop-in mode, when on ("/"
	// for the machine's own paths).
	GanetiRoot string `json:"ganeti_root,omitempty"`
}

// GanetiEnv is the environment Ganeti's tools need to find a dev cluster
// in drop-in mode ("NAME=value" entries; none for the machine's own root
// or without drop-in mode).
func (st *State) GanetiEnv() []string {
	if st.GanetiRoot == "" || st.GanetiRoot == "/" {
		return nil
	}
	return []string{"GANETI_ROOTDIR=" + st.GanetiRoot, "GANETI_HOSTNAME=" + st.Master}
}

// RunDirFor derives a short run directory from the state directory, so unix
// socket paths stay far below 108 bytes however deep the state lives.
func RunDirFor(stateDir string) string {
	abs, _ := filepath.Abs(stateDir)
	h := sha256.Sum256([]byte(abs))
	return "/run/crl-" + hex.EncodeToString(h[:4])
}

func (o *Options) fill() error {
	if o.StateDir == "" {
		o.StateDir = "/var/lib/corral-dev"
	}
	abs, err := filepath.Abs(o.StateDir)
	if err != nil {
		return err
	}
	o.StateDir = abs
	if o.Name == "" {
		o.Name = "dev.corral"
	}
	if o.BinDir == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		o.BinDir = filepath.Dir(exe)
	}
	if o.OSDir == "" {
		o.OSDir = filepath.Join(o.BinDir, "..", "os")
	}
	if o.FakeMemMiB == 0 {
		o.FakeMemMiB = 32768
	}
	if len(o.Hypervisors) == 0 {
		o.Hypervisors = []string{"fake"}
		if _, err := exec.LookPath("qemu-system-x86_64"); err == nil {
			o.Hypervisors = []string{"kvm", "fake"}
		}
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	switch o.Store {
	case "", storecfg.BackendBolt:
		o.Store = storecfg.BackendBolt
		if o.EtcdMembers > 1 {
			return fmt.Errorf("%d etcd members asked for a cluster on bbolt: add --store etcd", o.EtcdMembers)
		}
	case storecfg.BackendEtcd:
		if o.EtcdMembers == 0 {
			o.EtcdMembers = 1
		}
		if o.EtcdMembers != 1 && o.EtcdMembers != 3 {
			return fmt.Errorf("%d etcd members: a dev cluster runs 1 or 3", o.EtcdMembers)
		}
	default:
		return fmt.Errorf("store %q: want bbolt or etcd", o.Store)
	}
	if o.Masters == 0 {
		o.Masters = 1
	}
	if o.GanetiRoot != "" && !o.GanetiDropin {
		return errors.New("a Ganeti root is only used with Ganeti drop-in mode: add --ganeti-dropin")
	}
	if o.GanetiDropin && o.GanetiRoot == "" {
		// Ganeti's tools require GANETI_ROOTDIR's last component to be
		// the node name they run as: the master, node1.
		o.GanetiRoot = filepath.Join(o.StateDir, "ganeti", "node1")
	}
	switch o.BaremetalAuth {
	case "":
		o.BaremetalAuth = BaremetalHTTPBasic
	case BaremetalHTTPBasic, BaremetalNoAuth, BaremetalOff:
	default:
		return fmt.Errorf("Bare Metal API auth %q: want %s, %s or %s", o.BaremetalAuth, BaremetalHTTPBasic, BaremetalNoAuth, BaremetalOff)
	}
	switch o.COEAuth {
	case "":
		o.COEAuth = COEHTTPBasic
	case COEHTTPBasic, COENoAuth, COEOff:
	default:
		return fmt.Errorf("Container Infra API auth %q: want %s, %s or %s", o.COEAuth, COEHTTPBasic, COENoAuth, COEOff)
	}
	if o.COEPort < 0 || o.COEPort > 65535 {
		return fmt.Errorf("Container Infra API port %d is out of range", o.COEPort)
	}
	if o.BaremetalPort < 0 || o.BaremetalPort > 65535 {
		return fmt.Errorf("Bare Metal API port %d is out of range", o.BaremetalPort)
	}
	if o.Masters < 1 || o.Masters > maxMasters {
		return fmt.Errorf("%d masters: a dev cluster runs 1 to %d master candidates", o.Masters, maxMasters)
	}
	if o.ManagedEtcd && o.Store != storecfg.BackendEtcd {
		return errors.New("managed etcd members asked for a cluster on bbolt: add --store etcd")
	}
	if o.CandidatesOnNodes && o.Nodes < o.Masters-1 {
		return fmt.Errorf("%d masters named after nodes need at least %d nodes besides the master's, not %d", o.Masters, o.Masters-1, o.Nodes)
	}
	if o.Masters > 1 && o.Store != storecfg.BackendEtcd {
		return fmt.Errorf("%d masters asked for a cluster on bbolt: master candidates need --store etcd", o.Masters)
	}
	return nil
}

// PickAddresses finds n consecutive loopback addresses 127.0.0.x on which
// port is free, and a free port for the join listener.
func PickAddresses(n int) (ips []string, rpcPort, joinPort int, err error) {
	for attempt := 0; attempt < 50; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, 0, 0, err
		}
		rpcPort = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		base := 2 + (rpcPort*7+attempt*31)%(250-n)
		ips = ips[:0]
		ok := true
		var held []net.Listener
		for i := 0; i < n; i++ {
			ip := fmt.Sprintf("127.0.0.%d", base+i)
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(rpcPort)))
			if err != nil {
				ok = false
				break
			}
			held = append(held, l)
			ips = append(ips, ip)
		}
		var jl net.Listener
		if ok {
			jl, err = net.Listen("tcp", net.JoinHostPort(ips[0], "0"))
			if err != nil {
				ok = false
			} else {
				joinPort = jl.Addr().(*net.TCPAddr).Port
				held = append(held, jl)
			}
		}
		for _, l := range held {
			l.Close()
		}
		if ok {
			return ips, rpcPort, joinPort, nil
		}
	}
	return nil, 0, 0, errors.New("no free loopback addresses and port found")
}

// Up initialises and starts a dev cluster.
func Up(ctx context.Context, o Options) (*State, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("corral dev up needs root: it creates users and starts corral-node as root and corrald as corral-master")
	}
	if err := o.fill(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(o.StateDir, "dev.json")); err == nil {
		return nil, fmt.Errorf("a dev cluster already exists in %s: run 'corral dev down --state-dir %s' first (add --purge to remove its state)", o.StateDir, o.StateDir)
	}
	created := false
	if ents, err := os.ReadDir(o.StateDir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("state directory %s exists and is not empty: give a new or empty directory", o.StateDir)
	} else if os.IsNotExist(err) {
		if err := os.MkdirAll(o.StateDir, 0o755); err != nil {
			return nil, err
		}
		// Ours: its mode is ours to set, whatever the umask made of it.
		if err := os.Chmod(o.StateDir, 0o755); err != nil {
			return nil, err
		}
		created = true
	}
	// Before anything starts: a daemon that cannot reach its directory
	// would only show as a timeout.
	if err := bootstrap.CheckTraversable(o.StateDir); err != nil {
		return nil, err
	}
	for _, b := range []string{"corrald", "corral-node", "corral-rapi"} {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (run 'make build')", b, o.BinDir)
		}
	}
	ips, rpcPort, joinPort, err := PickAddresses(o.Nodes + 1)
	if err != nil {
		return nil, err
	}
	runDir := RunDirFor(o.StateDir)
	l := bootstrap.Layout{StateDir: o.StateDir, RunDir: runDir}
	st := &State{StateDir: o.StateDir, RunDir: runDir, Socket: l.Socket(), Master: "node1", IPs: ips, RPCPort: rpcPort, Created: created, GanetiRoot: o.GanetiRoot}
	hvp := map[string]config.Params{}
	if o.ImageDir != "" {
		hvp["kvm"] = config.Params{
			"kernel_path": filepath.Join(o.ImageDir, "vmlinuz"), "initrd_path": filepath.Join(o.ImageDir, "initrd.img"),
			"kernel_args": "root=/dev/vda ro panic=-1", "serial_console": true, "kvm_flag": "disabled",
		}
	}
	o.Log("Initialising cluster %s in %s (master node1 at %s)", o.Name, o.StateDir, ips[0])
	if err := bootstrap.Init(ctx, bootstrap.InitOptions{
		Name: o.Name, Layout: l, MasterName: "node1", MasterIP: ips[0], RPCPort: rpcPort, JoinPort: joinPort,
		EnabledHypervisors: o.Hypervisors, HVParams: hvp, SetOwners: true, NodeDirName: "node1",
		GanetiDropin: o.GanetiDropin, GanetiRoot: o.GanetiRoot,
		ClusterIP: o.ClusterIP, MasterNetdev: o.MasterNetdev, MasterNetmask: o.MasterNetmask,
	}); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.StateDir, "logs"), 0o755); err != nil {
		return nil, err
	}
	save := func() error {
		b, _ := json.MarshalIndent(st, "", "  ")
		return os.WriteFile(filepath.Join(o.StateDir, "dev.json"), b, 0o644)
	}
	startNode := func(name, ip string) error {
		args := []string{"--state-dir", l.NodeDir(name), "--run-dir", l.NodeRunDir(name),
			"--listen", net.JoinHostPort(ip, strconv.Itoa(rpcPort)), "--os-path", o.OSDir, "--os-path-only",
			"--hypervisors", joinComma(o.Hypervisors), "--fake-memory", strconv.FormatInt(o.FakeMemMiB, 10),
			"--ssh-dir", filepath.Join(l.NodeDir(name), "ssh")} // never the machine's own /root/.ssh
		// The COE control planes run as uids of their own, which must
		// enter every directory above theirs: the node's state
		// directory is root's alone, the dev cluster's is searchable.
		args = append(args, "--coe-dir", filepath.Join(o.StateDir, "coe", name))
		args = append(args, o.NodeArgs...)
		args = append(args, o.NodeArgsFor[name]...)
		p, err := start(filepath.Join(o.BinDir, "corral-node"), args, filepath.Join(o.StateDir, "logs", name+".log"), nil, nil)
		if err != nil {
			return err
		}
		p.Name = "corral-node " + name
		st.Procs = append(st.Procs, p)
		return save()
	}
	if err := startNode("node1", ips[0]); err != nil {
		return st, err
	}
	if o.Store == storecfg.BackendEtcd {
		if err := upEtcd(ctx, o, l, st, ips[0], save); err != nil {
			return st, err
		}
	}
	cred, err := bootstrap.MasterCredential()
	if err != nil {
		return st, err
	}
	watch := o.WatcherEvery
	if watch == 0 {
		watch = time.Minute
	}
	startCorrald := func(n int) error {
		args := []string{"--state-dir", o.StateDir, "--run-dir", candidateRunDir(runDir, n), "--watcher-interval", watch.String()}
		if o.BaremetalAuth != BaremetalOff {
			// Machines' agents pin the Bare Metal API's certificate, the
			// RAPI's, which corrald reads from a public copy: the RAPI's
			// directory is corral-rapi's alone.
			pub := filepath.Join(o.StateDir, "baremetal-api.crt")
			if err := copyPublic(l.RAPICert(), pub); err != nil {
				return fmt.Errorf("publishing the Bare Metal API's certificate: %w", err)
			}
			args = append(args, "--baremetal-api-cert", pub)
		}
		if o.Store == storecfg.BackendEtcd {
			cargs, err := candidateArgs(runDir, n, o.candidateName(n), !o.NoForward)
			if err != nil {
				return err
			}
			args = append(args, cargs...)
		}
		p, err := start(filepath.Join(o.BinDir, "corrald"), append(args, o.CorraldArgs...), filepath.Join(o.StateDir, "logs", corraldLog(n)), cred, nil)
		if err != nil {
			return err
		}
		p.Name = CorraldName(n)
		st.Procs = append(st.Procs, p)
		return save()
	}
	if err := startCorrald(1); err != nil {
		return st, err
	}
	c, err := waitLUXI(ctx, l.Socket(), 30*time.Second)
	if err != nil {
		return st, fmt.Errorf("corrald did not come up (see %s): %w", filepath.Join(o.StateDir, "logs", "corrald.log"), err)
	}
	defer c.Close()
	for i := 1; i <= o.Nodes; i++ {
		name := fmt.Sprintf("node%d", i+1)
		ip := ips[i]
		o.Log("Joining %s at %s", name, ip)
		var token string
		if err := c.Call(ctx, "CreateJoinToken", []any{name, 600}, &token); err != nil {
			return st, fmt.Errorf("join token for %s: %w", name, err)
		}
		// The token goes through the environment, not the command line
		// other users can read in ps.
		join := exec.CommandContext(ctx, filepath.Join(o.BinDir, "corral-node"), "join", "--state-dir", l.NodeDir(name))
		join.Env = append(os.Environ(), "CORRAL_JOIN_TOKEN="+token)
		out, err := join.CombinedOutput()
		if err != nil {
			return st, fmt.Errorf("joining %s: %v: %s", name, err, out)
		}
		if err := startNode(name, ip); err != nil {
			return st, err
		}
		if err := addNode(ctx, c, name, ip); err != nil {
			return st, err
		}
		st.Nodes = append(st.Nodes, name)
		if err := save(); err != nil {
			return st, err
		}
	}
	st.Nodes = append([]string{"node1"}, st.Nodes...)
	if err := save(); err != nil {
		return st, err
	}
	// The other candidates start once the first is master, so they come
	// up as standbys.
	for n := 2; n <= o.Masters; n++ {
		o.Log("Starting master candidate %s (standby, socket %s)", o.candidateName(n), CandidateSocket(runDir, n))
		if err := prepareCandidateRunDir(l.MasterRunDir(), filepath.Dir(CandidateSocket(runDir, n))); err != nil {
			return st, err
		}
		if err := startCorrald(n); err != nil {
			return st, err
		}
		if err := waitStandby(ctx, CandidateSocket(runDir, n), 30*time.Second); err != nil {
			return st, fmt.Errorf("%s did not come up (see %s): %w", CorraldName(n), filepath.Join(o.StateDir, "logs", corraldLog(n)), err)
		}
	}
	// One corral-rapi, on every candidate's socket (see upRAPI).
	if err := upRAPI(ctx, o, l, st, ips[0], save); err != nil {
		return st, err
	}
	if err := upCOETemplate(ctx, o, c); err != nil {
		return st, err
	}
	return st, writeEnv(st)
}

func joinComma(l []string) string {
	s := ""
	for i, e := range l {
		if i > 0 {
			s += ","
		}
		s += e
	}
	return s
}

// upEtcd starts the etcd members, records them, and moves the new cluster's
// store to them.
func upEtcd(ctx context.Context, o Options, l bootstrap.Layout, st *State, host string, save func() error) error {
	o.Log("Starting %d etcd member(s) on %s as %s", o.EtcdMembers, host, bootstrap.EtcdUser)
	ms, err := bootstrap.StartEtcd(ctx, bootstrap.EtcdOptions{Layout: l, Members: o.EtcdMembers, Host: host, Binary: o.EtcdBinary, SetOwners: true})
	if err != nil {
		return err
	}
	st.Store = storecfg.BackendEtcd
	for i, m := range ms {
		st.Procs = append(st.Procs, Proc{Name: EtcdMemberName(i + 1), PID: m.PID, Args: m.Args, Log: m.Log, User: bootstrap.EtcdUser})
		st.EtcdEndpoints = append(st.EtcdEndpoints, m.ClientURL)
	}
	if err := save(); err != nil {
		return err
	}
	o.Log("Moving the store to etcd (%s)", joinComma(st.EtcdEndpoints))
	cmd, err := bootstrap.MigrateCommand(ctx, bootstrap.MigrateOptions{
		Layout: l, CorraldBin: filepath.Join(o.BinDir, "corrald"), Endpoints: st.EtcdEndpoints, SetOwners: true,
	})
	if err != nil {
		return err
	}
	logPath := filepath.Join(o.StateDir, "logs", "migrate-store.log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("corrald migrate-store failed (see %s): %w", logPath, err)
	}
	if o.ManagedEtcd {
		return markManaged(l)
	}
	return nil
}

// start launches a daemon detached from our session, logging to a file. A
// nil env inherits ours.
func start(bin string, args []string, logPath string, cred *syscall.Credential, env []string) (Proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return Proc{}, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		return Proc{}, fmt.Errorf("starting %s: %w", bin, err)
	}
	go cmd.Wait() // reap it if it dies while we are still running
	return Proc{PID: cmd.Process.Pid, Args: append([]string{bin}, args...), Log: logPath}, nil
}

func waitLUXI(ctx context.Context, sock string, limit time.Duration) (*luxi.Client, error) {
	deadline := time.Now().Add(limit)
	for {
		c, err := luxi.Dial(ctx, sock)
		if err == nil {
			var v []any
			if err = c.Call(ctx, "QueryConfigValues", []any{[]string{"cluster_name"}}, &v); err == nil {
				return c, nil
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func addNode(ctx context.Context, c *luxi.Client, name, ip string) error {
	op := map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": name, "primary_ip": ip}
	var id int64
	// The node daemon may need a moment to listen: retry the add a few times.
	for try := 0; ; try++ {
		var err error
		id, err = c.SubmitJob(ctx, []any{op})
		if err != nil {
			return err
		}
		status, res, err := luxi.WaitForJob(ctx, c, id, nil)
		if err != nil && status == "" {
			return err
		}
		if status == "success" {
			return nil
		}
		if try >= 40 {
			return fmt.Errorf("adding node %s failed (job %d): %v", name, id, err)
		}
		_ = res
		time.Sleep(250 * time.Millisecond)
	}
}

func writeEnv(st *State) error {
	env := fmt.Sprintf("export CORRAL_STATE_DIR=%s\nexport CORRAL_RUN_DIR=%s\nexport CORRAL_SOCKET=%s\n", st.StateDir, st.RunDir, st.Socket)
	for _, kv := range st.GanetiEnv() {
		env += "export " + kv + "\n"
	}
	return os.WriteFile(filepath.Join(st.StateDir, "env"), []byte(env), 0o644)
}

// Load reads a dev cluster's state.
func Load(stateDir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, "dev.json"))
	if err != nil {
		return nil, fmt.Errorf("no dev cluster in %s: %w", stateDir, err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Restart starts a stopped daemon of the dev cluster again with its original
// arguments and user, and records its new pid.
func Restart(st *State, name string) (Proc, error) { return RestartWith(st, name, nil) }

// RestartWith is Restart with extra environment entries ("NAME=value") for
// this start only, e.g. CORRAL_FAILPOINTS.
func RestartWith(st *State, name string, env []string) (Proc, error) {
	for i, p := range st.Procs {
		if p.Name != name {
			continue
		}
		if alive(p) {
			// A second copy would fail on the first one's store lock or
			// ports while the first one goes on answering: no restart.
			return Proc{}, fmt.Errorf("restarting %s: it still runs (pid %d); stop it first", name, p.PID)
		}
		var cred *syscall.Credential
		var err error
		full := append(os.Environ(), env...)
		switch {
		case name == "corrald" || strings.HasPrefix(name, "corrald "):
			cred, err = bootstrap.MasterCredential()
		case p.User == bootstrap.RAPIUser:
			cred, err = bootstrap.RAPICredential()
		case p.User == bootstrap.EtcdUser:
			cred, err = bootstrap.EtcdCredential()
			// etcd reads ETCD_* variables as flags: only its recorded
			// flags may count.
			full = slices.DeleteFunc(full, func(kv string) bool { return strings.HasPrefix(kv, "ETCD_") })
		case p.User != "":
			err = fmt.Errorf("%s runs as %s, which this program does not know how to restart", name, p.User)
		}
		if err != nil {
			return Proc{}, err
		}
		np, err := start(p.Args[0], p.Args[1:], p.Log, cred, full)
		if err != nil {
			return Proc{}, err
		}
		np.Name, np.User = p.Name, p.User
		st.Procs[i] = np
		b, _ := json.MarshalIndent(st, "", "  ")
		return np, os.WriteFile(filepath.Join(st.StateDir, "dev.json"), b, 0o644)
	}
	return Proc{}, fmt.Errorf("no daemon %q in this dev cluster", name)
}

// copyPublic copies a public file (a certificate) to dst, mode 0644.
func copyPublic(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
