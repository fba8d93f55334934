// Command corral-node is the Corral node daemon. It runs as root on every
// node (the master machine included) and obeys only the current master.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/corral/corral/internal/baremetal/provnet"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/failpoint"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/nodeserver"
	"github.com/corral/corral/internal/osapi"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/privsep"
	"github.com/corral/corral/internal/rpc"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "corral-node:", err)
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
	fs := flag.NewFlagSet("corral-node", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: corral-node [flags]
       corral-node join [flags] TOKEN

The Corral node daemon: runs instances, disks and OS scripts for the master
over mutual TLS. It runs as root.

'join TOKEN' makes this node's key, has the master sign its certificate using
a one-time token from 'corral node join-token NAME', and stores it in the
state directory; then start the daemon and run 'corral node add NAME --ip IP'
on the master.

Flags:
`)
		fs.PrintDefaults()
	}
	stateDir := fs.String("state-dir", env("CORRAL_NODE_STATE_DIR", layout.DefaultStateDir+"/node"), "this node daemon's state directory (env CORRAL_NODE_STATE_DIR)")
	runDir := fs.String("run-dir", env("CORRAL_NODE_RUN_DIR", layout.DefaultRunDir+"/node"), "runtime directory for instance sockets; keep it short (env CORRAL_NODE_RUN_DIR)")
	listen := fs.String("listen", "127.0.0.1:1811", "address to serve RPC on (the node's primary IP and the cluster's RPC port)")
	osPath := fs.String("os-path", "", "colon-separated OS definition directories searched before the defaults")
	osOnly := fs.Bool("os-path-only", false, "search only the --os-path directories, not the default ones (Corral's and Ganeti's); for hermetic test clusters")
	hvs := fs.String("hypervisors", "kvm,fake", "hypervisors to enable")
	fakeMem := fs.Int64("fake-memory", 32768, "memory (MiB) the fake hypervisor reports")
	fakeCPUs := fs.Int("fake-cpus", 16, "CPUs the fake hypervisor reports")
	sshDir := fs.String("ssh-dir", env("CORRAL_NODE_SSH_DIR", nodeserver.DefaultSSHDir), "root's SSH directory, where the master keeps this node's key pair and authorized_keys; \"\" leaves SSH alone (env CORRAL_NODE_SSH_DIR)")
	poolFW := fs.String("pool-firewall", env("CORRAL_NODE_POOL_FIREWALL", "none"), "\"nftables\": keep an nftables table inet corral that stops qemu processes under uid-pool uids from opening network connections on this node; \"none\" leaves the firewall alone (env CORRAL_NODE_POOL_FIREWALL)")
	mediaListen := fs.String("machine-media-listen", env("CORRAL_NODE_MACHINE_MEDIA_LISTEN", ""), "address (ip:port) of the HTTP listener bare-metal machines' BMCs download their boot ISOs from; \"\" turns virtual media boot off (env CORRAL_NODE_MACHINE_MEDIA_LISTEN)")
	mediaURL := fs.String("machine-media-url", env("CORRAL_NODE_MACHINE_MEDIA_URL", ""), "base URL the BMCs reach --machine-media-listen at; http://<listen address> by default (env CORRAL_NODE_MACHINE_MEDIA_URL)")
	agentRamdisk := fs.String("agent-ramdisk", env("CORRAL_NODE_AGENT_RAMDISK", ""), "directory with the agent ramdisk's vmlinuz and initrd.img (scripts/build-agent-ramdisk.sh), booted by bare-metal machines (env CORRAL_NODE_AGENT_RAMDISK)")
	bmNets := fs.String("baremetal-networks", env("CORRAL_NODE_BAREMETAL_NETWORKS", ""), "JSON file of the bare-metal provisioning networks this node runs in its own network namespace (bridges, DHCP and iPXE, the API forwarder); machines boot over PXE and move between them; needs --agent-ramdisk (env CORRAL_NODE_BAREMETAL_NETWORKS)")
	bmNetsDir := fs.String("baremetal-state-dir", env("CORRAL_NODE_BAREMETAL_STATE_DIR", ""), "directory of the bare-metal networks' state (dnsmasq's files, prepared boots); dnsmasq reads it as nobody, so every directory above it must be searchable by others; default <state-dir>/provnet (env CORRAL_NODE_BAREMETAL_STATE_DIR)")
	k8sTools := fs.String("k8s-tools", "", "directory of the Kubernetes binaries COE clusters' control planes run (make k8s-tools); default $"+k8sbin.EnvToolsDir+", else "+layout.DefaultK8sToolsDir)
	coeDir := fs.String("coe-dir", env("CORRAL_NODE_COE_DIR", ""), "directory of the COE clusters' control planes, which run as uids of their own: every directory above it must be searchable by others; default <state-dir>-coe, beside the state directory, which is root's alone (env CORRAL_NODE_COE_DIR)")
	coeUIDs := fs.String("coe-uid-pool", env("CORRAL_NODE_COE_UID_POOL", nodeserver.DefaultCOEUIDPool), "uids the COE clusters' control planes run under, one per cluster (env CORRAL_NODE_COE_UID_POOL)")
	mipNetns := fs.String("master-ip-netns", env("CORRAL_NODE_MASTER_IP_NETNS", ""), "network namespace (ip netns) of the master network device this node puts the cluster's master IP on; \"\" is the daemon's own (env CORRAL_NODE_MASTER_IP_NETNS)")
	clusterCmds := fs.Bool("cluster-commands", env("CORRAL_NODE_CLUSTER_COMMANDS", "true") != "false", "take the master's 'cluster command' and 'cluster copyfile' calls, which run a shell command or write a file as root here; false refuses them (env CORRAL_NODE_CLUSTER_COMMANDS)")
	debug := fs.Bool("debug", false, "debug logging")
	if len(args) > 0 && args[0] == "join" {
		return join(args[1:])
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := privsep.Node(privsep.Resolve(os.Geteuid())); err != nil {
		return err
	}
	lvl := slog.LevelInfo
	if *debug {
		lvl = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	fp, err := failpoint.Load(os.Getenv, failpoint.NodePoints()...)
	if err != nil {
		return err
	}
	if fp.Armed() {
		log.Warn("failpoints armed: corral-node kills itself with SIGKILL when one is hit (crash tests only)", "failpoints", fp.String())
	}
	var nets *provnet.Config
	if *bmNets != "" {
		if nets, err = provnet.LoadConfig(*bmNets); err != nil {
			return err
		}
	}
	search := osapi.DefaultSearchPath()
	if *osOnly {
		search = nil
	}
	if *osPath != "" {
		search = append(strings.Split(*osPath, ":"), search...)
	}
	if *coeDir == "" {
		*coeDir = filepath.Clean(*stateDir) + "-coe"
	}
	srv, err := nodeserver.New(nodeserver.Options{
		StateDir: *stateDir, RunDir: *runDir, Listen: *listen, OSSearchPath: search,
		Hypervisors:     strings.Split(*hvs, ","),
		FakeCapacity:    hypervisor.NodeResources{MemoryTotalMiB: *fakeMem, MemoryFreeMiB: *fakeMem, CPUs: *fakeCPUs, Hypervisor: hypervisor.Fake},
		Logger:          log,
		Failpoints:      fp,
		SSHDir:          *sshDir,
		PoolFirewall:    *poolFW,
		MachineMedia:    nodeserver.MachineMediaOptions{Listen: *mediaListen, URL: *mediaURL, AgentRamdisk: *agentRamdisk},
		MachineNetworks: nets, MachineNetworksDir: *bmNetsDir,
		COEDir: *coeDir, K8sToolsDir: *k8sTools, COEUIDPool: *coeUIDs, NoClusterCommands: !*clusterCmds,
		MasterIPNetns: *mipNetns,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return srv.Run(ctx)
}

func join(args []string) error {
	fs := flag.NewFlagSet("corral-node join", flag.ContinueOnError)
	stateDir := fs.String("state-dir", env("CORRAL_NODE_STATE_DIR", layout.DefaultStateDir+"/node"), "this node daemon's state directory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raw := os.Getenv("CORRAL_JOIN_TOKEN")
	if fs.NArg() == 1 {
		raw = fs.Arg(0)
	}
	if raw == "" || fs.NArg() > 1 {
		return fmt.Errorf("usage: corral-node join [--state-dir DIR] TOKEN (or the token in CORRAL_JOIN_TOKEN)")
	}
	tok, err := pki.ParseJoinToken(raw)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*stateDir, 0o700); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cert, _, _, err := rpc.Join(ctx, tok, *stateDir)
	if err != nil {
		return err
	}
	fmt.Printf("Joined as node %s; certificate in %s\n", tok.Node, cert)
	return nil
}
