// Package localcmd holds the CLI commands that act on this machine's files
// and processes rather than through LUXI: cluster init, destroy and backup,
// the dev cluster, and the serial console (which talks to the node daemon
// with the master's certificate).
package localcmd

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/cli"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/kvopts"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/storecfg"
	"github.com/corral/corral/internal/uidpool"
)

// Dirs resolves the global --state-dir and --run-dir flags.
type Dirs struct {
	StateDir func() string
	RunDir   func() string
	Socket   func() string
	Stdout   io.Writer
	Stderr   io.Writer
}

// ClusterCommands are added under "corral cluster".
func ClusterCommands(d Dirs) []*cobra.Command {
	return []*cobra.Command{initCmd(d), destroyCmd(d), backupCmd(d), migrateStoreCmd(d), renewCryptoCmd(d), pairCmd(d)}
}

// RootCommands are added at the top level.
func RootCommands(d Dirs) []*cobra.Command {
	return []*cobra.Command{devCmd(d)}
}

// Extras are ClusterCommands and RootCommands as cli.NewRootFor takes them,
// built only when a command line names their section.
func Extras(d Dirs) cli.Extras {
	return cli.Extras{
		Cluster: func() []*cobra.Command { return ClusterCommands(d) },
		Root:    []cli.Section{{Head: devHead, Fill: func(c *cobra.Command) { addDevCommands(c, d) }}},
	}
}

func initCmd(d Dirs) *cobra.Command {
	var o bootstrap.InitOptions
	var hvs, templates string
	var hvParams []string
	var storeName, uidPool string
	var e etcdFlags
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Create a new cluster on this machine (the first master)",
		Long: `Create a new cluster: the cluster CA and master certificate, the cluster
domain secret (40 hex characters, mode 0400), the embedded store with the
default node group and this machine as master node, the users corral-master
and corral-qemu and the group corral-admin. Refuses to run twice.

Then start corral-node (as root) and corrald (as corral-master), or use the
service units.

With --store etcd the cluster is created on bbolt as above and its store is
then moved to etcd, exactly as 'corral cluster migrate-store' does; if that
step fails, the cluster stays on bbolt and the step can be run again with
that command.

` + storeHelp,
		Example: "  corral cluster init --master-ip 192.0.2.10 cluster1.example.com\n  corral cluster init --master-ip 192.0.2.10 --store etcd cluster1.example.com\n  corral cluster init --store etcd --etcd-endpoints https://192.0.2.10:2379,https://192.0.2.11:2379,https://192.0.2.12:2379 cluster1.example.com",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			o.Layout = bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			o.EnabledHypervisors = splitList(hvs)
			o.EnabledDiskTemplates = splitList(templates)
			o.SetOwners = os.Geteuid() == 0
			if !o.SetOwners {
				return fmt.Errorf("cluster init needs root (it creates system users and root-owned node state)")
			}
			switch storeName {
			case storecfg.BackendBolt:
				if e != (etcdFlags{}) {
					return ecode.Errorf(ecode.Inval, "the --etcd-* flags need --store etcd")
				}
			case storecfg.BackendEtcd:
				if err := e.check(); err != nil {
					return err
				}
			default:
				return ecode.Errorf(ecode.Inval, "--store %q: want bbolt or etcd", storeName)
			}
			o.HVParams = map[string]config.Params{}
			for _, h := range hvParams {
				ident, kv, err := kvopts.ParseIdentKV(h)
				if err != nil {
					return fmt.Errorf("-H %s: %w", h, err)
				}
				p := config.Params{}
				for k, v := range kv {
					p[k] = v
				}
				o.HVParams[ident] = p
			}
			pool, err := uidpool.Parse(uidPool)
			if err != nil {
				return fmt.Errorf("--uid-pool: %w", err)
			}
			o.UIDPool = pool.Arrays()
			if err := bootstrap.Init(cmd.Context(), o); err != nil {
				return err
			}
			if storeName == storecfg.BackendEtcd {
				if err := moveToEtcd(cmd.Context(), d, o.Layout, e, o.MasterIP); err != nil {
					return fmt.Errorf("cluster %s was initialised on bbolt, but %w (retry with 'corral cluster migrate-store')", o.Name, err)
				}
			}
			fmt.Fprintf(d.Stdout, "Cluster %s initialised in %s.\nStart the daemons:\n  corral-node --state-dir %s --run-dir %s --listen %s:%d &\n  runuser -u %s -- corrald --state-dir %s --run-dir %s &\n",
				o.Name, d.StateDir(), o.Layout.NodeDir(""), o.Layout.NodeRunDir(""), o.MasterIP, o.RPCPort,
				bootstrap.MasterUser, d.StateDir(), d.RunDir())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.MasterName, "master-name", "", "node name of this machine (default: the hostname)")
	f.StringVar(&o.MasterIP, "master-ip", "127.0.0.1", "primary IP of this machine; node daemons listen on their primary IP")
	f.StringVar(&o.ClusterIP, "cluster-ip", "", "the cluster's floating address (Ganeti's master IP), held by the node the master runs on; needs --master-netdev; default none")
	f.StringVar(&o.MasterNetdev, "master-netdev", "", "network device the cluster IP is put on")
	f.IntVar(&o.MasterNetmask, "master-netmask", 0, "prefix length of the cluster IP (default 32, 128 for an IPv6 address)")
	f.IntVar(&o.RPCPort, "rpc-port", config.DefaultRPCPort, "TCP port of the node daemons")
	f.IntVar(&o.JoinPort, "join-port", config.DefaultRPCPort+1, "TCP port of the master's node-join listener")
	f.StringVar(&hvs, "enabled-hypervisors", "kvm,fake", "hypervisors to enable; the first is the default")
	f.StringVar(&templates, "enabled-disk-templates", "file,diskless", "disk templates to enable")
	f.StringVar(&o.MACPrefix, "mac-prefix", config.DefaultMACPrefix, "prefix of generated MAC addresses")
	f.StringArrayVarP(&hvParams, "hypervisor-parameters", "H", nil, "hypervisor defaults, HV:key=val,... (repeatable)")
	f.StringVar(&storeName, "store", storecfg.BackendBolt, "where the configuration and job queue live: bbolt (one file on this machine) or etcd")
	f.BoolVar(&o.GanetiDropin, "ganeti-dropin", false, "Ganeti drop-in mode: corrald also serves LUXI on Ganeti's sockets (/var/run/ganeti/socket/ganeti-query and\nganeti-master) and keeps Ganeti's ssconf files in /var/lib/ganeti, so Ganeti's gnt-* tools work unchanged (see docs/GANETI.md)")
	f.StringVar(&o.GanetiRoot, "ganeti-root", "", "with --ganeti-dropin: root prefix of Ganeti's paths, for tests (default /)")
	f.StringVar(&uidPool, "uid-pool", "", `uid ranges for confined qemu, e.g. "2000-2099"; kvm instances then default to security_model pool with use_chroot`)
	e.register(f)
	return cmd
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func destroyCmd(d Dirs) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "destroy --yes-do-it",
		Short: "Destroy the cluster on this machine (no instances or other nodes may remain)",
		Long: `Destroy the cluster: corrald checks (OP_CLUSTER_DESTROY) that no instance
and no node besides the master remain; then the daemons of this machine are
stopped and the cluster state directory is removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				return fmt.Errorf("destroying a cluster removes all of its state: pass --yes-do-it")
			}
			ctx := cmd.Context()
			c, err := luxi.Dial(ctx, d.Socket())
			if err != nil {
				return fmt.Errorf("cannot reach corrald: %w", err)
			}
			id, err := c.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_CLUSTER_DESTROY"}})
			if err != nil {
				c.Close()
				return err
			}
			_, _, err = luxi.WaitForJob(ctx, c, id, nil)
			c.Close()
			if err != nil {
				return fmt.Errorf("cluster destroy refused: %w", err)
			}
			l := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			scfg, _ := storecfg.Load(l.MasterDir())
			_, err = os.Stat(l.EtcdDir())
			localEtcd := err == nil
			stopByStateDir(l.StateDir, 10*time.Second)
			for _, p := range []string{l.MasterDir(), l.NodeDir(""), l.MasterRunDir(), l.NodeRunDir(""), l.EtcdDir()} {
				if err := os.RemoveAll(p); err != nil {
					return err
				}
			}
			fmt.Fprintln(d.Stdout, "Cluster destroyed.")
			if scfg.Backend == storecfg.BackendEtcd && !localEtcd {
				fmt.Fprintf(d.Stdout, "Its keys remain in your etcd (%s) under %s: remove them with etcdctl del --prefix %s\n",
					strings.Join(scfg.Endpoints, ","), scfg.Prefix, scfg.Prefix)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&yes, "yes-do-it", false, "confirm the destruction")
	return cmd
}

// stopByStateDir stops this state directory's daemons and etcd members
// (SIGTERM) and waits, bounded, until they are gone, so that their
// directories can be removed.
func stopByStateDir(stateDir string, grace time.Duration) {
	pids := procsByStateDir(stateDir, "corrald", "corral-node", "etcd")
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// alive reports whether pid runs: a zombie has finished (its parent, or
// init for an orphan, has yet to reap it).
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

func backupCmd(d Dirs) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the cluster store to FILE",
		Long: `Write a consistent copy of the cluster store (configuration and job queue)
to FILE (mode 0600). While corrald runs, it takes the copy from the live store
in one read transaction; with corrald stopped the store file is opened
directly. Needs read access to the master's state directory (root).`,
		Example: "  corral cluster backup /root/corral-$(date +%F).db",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			dst := args[0]
			if c, err := luxi.Dial(ctx, d.Socket()); err == nil {
				var tmp string
				err := c.Call(ctx, "BackupStore", []any{}, &tmp)
				c.Close()
				if err != nil {
					return err
				}
				defer os.Remove(tmp)
				if err := copyFile(tmp, dst); err != nil {
					return err
				}
				fmt.Fprintf(d.Stdout, "Store copied to %s (taken by corrald)\n", dst)
				return nil
			}
			l := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			if scfg, err := storecfg.Load(l.MasterDir()); err == nil && scfg.Backend != storecfg.BackendBolt {
				return fmt.Errorf("corrald is not reachable and the store is on %s (%s, prefix %s): start corrald, or take a snapshot with etcdctl snapshot save",
					scfg.Backend, strings.Join(scfg.Endpoints, ","), scfg.Prefix)
			}
			path := filepath.Join(l.MasterDir(), storecfg.FileBolt)
			st, err := boltstore.Open(path, boltstore.Options{OpenTimeout: 2 * time.Second})
			if err != nil {
				return fmt.Errorf("corrald is not reachable and %s cannot be opened: %w", path, err)
			}
			defer st.Close()
			if err := st.Backup(ctx, dst); err != nil {
				return err
			}
			fmt.Fprintf(d.Stdout, "Store copied to %s\n", dst)
			return nil
		},
	}
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("reading the backup (run as root): %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func devCmd(d Dirs) *cobra.Command {
	cmd := devHead()
	addDevCommands(cmd, d)
	return cmd
}

// devHead is "corral dev" as the root's help lists it.
func devHead() *cobra.Command {
	return &cobra.Command{Use: "dev", Short: "Run a complete local cluster for development and tests"}
}

// addDevCommands completes "corral dev" with its subcommands.
func addDevCommands(cmd *cobra.Command, d Dirs) {
	var o devcluster.Options
	var hvs string
	up := &cobra.Command{
		Use:   "up",
		Short: "Bring up a local cluster: master and N node daemons on 127.0.0.x",
		Long: `Bring up a complete cluster on this machine, in the background: the master's
node daemon and corrald (as corral-master), plus --nodes more node daemons,
each on its own 127.0.0.x address with its own state and run directories.
Free addresses and ports are picked, so several dev clusters can run side
by side. Needs root. Prints how to reach the cluster.`,
		Example: "  corral dev up --nodes 2 --state-dir /tmp/dev1\n  . /tmp/dev1/env && corral node list",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.StateDir = d.StateDir()
			o.Hypervisors = splitList(hvs)
			o.Log = func(f string, a ...any) { fmt.Fprintf(d.Stdout, f+"\n", a...) }
			st, err := devcluster.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(d.Stdout, "\nDev cluster up: master node1, nodes %s.\nTo use it:\n  . %s/env\n  corral node list\nStop it with: corral dev down --state-dir %s\n",
				strings.Join(st.Nodes, ", "), st.StateDir, st.StateDir)
			if st.BaremetalURL != "" {
				fmt.Fprintf(d.Stdout, "Bare Metal API at %s, for the openstack client:\n  . %s/%s && openstack baremetal node list\n",
					st.BaremetalURL, st.StateDir, devcluster.BaremetalEnvFile)
			}
			if st.GanetiRoot != "" {
				fmt.Fprintf(d.Stdout, "Ganeti drop-in mode (root %s): Ganeti's own tools work too, e.g.\n  . %s/env && gnt-cluster info\n", st.GanetiRoot, st.StateDir)
			}
			return nil
		},
	}
	up.Flags().IntVar(&o.Nodes, "nodes", 0, "node daemons to add besides the master's")
	up.Flags().StringVar(&o.Name, "name", "dev.corral", "cluster name")
	up.Flags().StringVar(&o.ImageDir, "image-dir", "", "directory with vmlinuz and initrd.img for kvm instances (scripts/build-guest-image.sh)")
	up.Flags().StringVar(&o.OSDir, "os-dir", "", "OS definitions directory (default: ../os next to the binaries)")
	up.Flags().StringVar(&hvs, "hypervisors", "", "hypervisors to enable (default kvm,fake when qemu is installed)")
	up.Flags().DurationVar(&o.WatcherEvery, "watcher-interval", time.Minute, "how often the watcher runs")
	up.Flags().StringVar(&o.Store, "store", storecfg.BackendBolt, "store backend: bbolt, or etcd on members the dev cluster starts")
	up.Flags().IntVar(&o.EtcdMembers, "etcd-members", 1, "with --store etcd: how many etcd members to run (1 or 3)")
	up.Flags().BoolVar(&o.ManagedEtcd, "managed-etcd", false, "with --store etcd: let Corral manage the etcd members, so promoting a node to master candidate adds a member its node daemon runs and demoting removes it")
	up.Flags().BoolVar(&o.GanetiDropin, "ganeti-dropin", false, "Ganeti drop-in mode: corrald also serves Ganeti's LUXI sockets and ssconf files, so Ganeti's gnt-* tools work\nwith GANETI_ROOTDIR and GANETI_HOSTNAME from the env file (see docs/GANETI.md)")
	up.Flags().StringVar(&o.GanetiRoot, "ganeti-root", "", "with --ganeti-dropin: root prefix of Ganeti's paths (default <state-dir>/ganeti/node1; \"/\" for the machine's own)")
	up.Flags().IntVar(&o.BaremetalPort, "baremetal-port", devcluster.DefaultBaremetalPort, "port of the Bare Metal API (corral-rapi) on the master's address; when the default is taken, a free one (0: always a free one)")
	up.Flags().StringVar(&o.BaremetalAuth, "baremetal-auth", devcluster.BaremetalHTTPBasic, "Bare Metal API authentication: http_basic (user admin, a new password in <state-dir>/baremetal.env), noauth, or off (no Bare Metal API)")
	up.Flags().IntVar(&o.COEPort, "coe-port", devcluster.DefaultCOEPort, "port of the Container Infra API (corral-rapi) on the master's address; when the default is taken, a free one (0: always a free one)")
	up.Flags().StringVar(&o.COEAuth, "coe-auth", devcluster.COEHTTPBasic, "Container Infra API authentication: http_basic (user admin of project admin, a new password in <state-dir>/coe.env), noauth, or off (no Container Infra API)")
	up.Flags().IntVar(&o.Masters, "masters", 1, "with --store etcd: corrald master candidates to run (one is elected; the others stand by)")
	var purge bool
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop everything a dev cluster started, qemu processes included",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := devcluster.Down(cmd.Context(), d.StateDir(), purge, func(f string, a ...any) { fmt.Fprintf(d.Stdout, f+"\n", a...) }); err != nil {
				return err
			}
			return nil
		},
	}
	down.Flags().BoolVar(&purge, "purge", false, "also remove the state directory")
	cmd.AddCommand(up, down)
}
