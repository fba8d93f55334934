package localcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/layout"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/storecfg"
)

// etcdFlags are the flags that point a cluster at etcd, shared by cluster
// init and cluster migrate-store.
type etcdFlags struct {
	endpoints string
	prefix    string
	ca        string
	cert      string
	key       string
}

func (e *etcdFlags) register(f *pflag.FlagSet) {
	f.StringVar(&e.endpoints, "etcd-endpoints", "", "client URLs of running etcd members, comma-separated (default: start one local member managed by Corral)")
	f.StringVar(&e.prefix, "etcd-prefix", "", "key prefix of this cluster in etcd (default /corral/<cluster-name>/)")
	f.StringVar(&e.ca, "etcd-ca", "", "with --etcd-endpoints: CA bundle of your etcd's PKI (default: the members present certificates of the cluster CA)")
	f.StringVar(&e.cert, "etcd-cert", "", "with --etcd-ca: corrald's client certificate of that PKI")
	f.StringVar(&e.key, "etcd-key", "", "with --etcd-ca: the certificate's key")
}

func (e *etcdFlags) check() error {
	if e.endpoints == "" && (e.ca != "" || e.cert != "" || e.key != "") {
		return ecode.Errorf(ecode.Inval, "--etcd-ca, --etcd-cert and --etcd-key need --etcd-endpoints: a local member uses the cluster CA")
	}
	for _, ep := range splitList(e.endpoints) {
		if _, err := storecfg.CheckEndpoint(ep); err != nil {
			return ecode.Errorf(ecode.Inval, "--etcd-endpoints: %v", err)
		}
	}
	if e.prefix != "" {
		if err := storecfg.CheckPrefix(e.prefix); err != nil {
			return ecode.Errorf(ecode.Inval, "--etcd-prefix: %v", err)
		}
	}
	return nil
}

const storeHelp = `The store moves to etcd in one code path, shared by 'cluster init --store
etcd' and 'cluster migrate-store': 'corrald migrate-store' (run as
corral-master) copies every key of the bbolt store into an empty etcd
prefix, verifies the copy (key count and a SHA-256 over every key and value,
on both sides, printed), switches <state-dir>/master/store.json to etcd and
keeps the bbolt file renamed as config.db.pre-etcd-<time>.

With --etcd-endpoints, the members are yours: they must serve TLS with
certificates of the cluster CA (or of the PKI given by --etcd-ca, --etcd-cert
and --etcd-key) and accept corrald's client certificate. Without it, Corral
starts one local etcd member on the master IP, as the user corral-etcd, with
its data under <state-dir>/etcd, client and peer mutual TLS on certificates
of the cluster CA, and writes a systemd unit, <state-dir>/etcd/` + bootstrap.EtcdUnitName + `,
that starts it at boot once enabled.`

func migrateStoreCmd(d Dirs) *cobra.Command {
	var e etcdFlags
	cmd := &cobra.Command{
		Use:   "migrate-store",
		Short: "Move the stopped cluster's store from bbolt to etcd",
		Long: `Move this cluster's store (configuration and job queue) from the embedded
bbolt file to etcd. The cluster must be stopped: corrald must not run (the
command checks the LUXI socket, the processes and the store's file lock).
Start corrald again afterwards; it reads store.json and opens etcd.

` + storeHelp,
		Example: "  corral cluster migrate-store --etcd-endpoints https://192.0.2.10:2379,https://192.0.2.11:2379,https://192.0.2.12:2379\n  corral cluster migrate-store    # one local member managed by Corral",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if os.Geteuid() != 0 {
				return fmt.Errorf("cluster migrate-store needs root (it runs corrald as %s and may create the %s user)", bootstrap.MasterUser, bootstrap.EtcdUser)
			}
			if err := e.check(); err != nil {
				return err
			}
			ctx := cmd.Context()
			l := bootstrap.Layout{StateDir: d.StateDir(), RunDir: d.RunDir()}
			cfg, err := storecfg.Load(l.MasterDir())
			if err != nil {
				return err
			}
			if cfg.Backend != storecfg.BackendBolt {
				return ecode.Errorf(ecode.State, "the cluster in %s is on %s already (%s)", l.StateDir, cfg.Backend, storecfg.Path(l.MasterDir()))
			}
			if _, err := os.Stat(filepath.Join(l.MasterDir(), storecfg.FileBolt)); err != nil {
				return ecode.Errorf(ecode.NoEnt, "no cluster store in %s: %v", l.MasterDir(), err)
			}
			if err := checkStopped(ctx, d, l); err != nil {
				return err
			}
			if err := moveToEtcd(ctx, d, l, e, masterIP(l)); err != nil {
				return err
			}
			fmt.Fprintf(d.Stdout, "The cluster's store is on etcd now. Start corrald again.\n")
			return nil
		},
	}
	e.register(cmd.Flags())
	return cmd
}

// checkStopped refuses while corrald runs for this state directory: it
// answers on the LUXI socket, or a corrald process names the directory.
// (corrald migrate-store checks the store's file lock besides.)
func checkStopped(ctx context.Context, d Dirs, l bootstrap.Layout) error {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if c, err := luxi.Dial(dctx, d.Socket()); err == nil {
		c.Close()
		return ecode.Errorf(ecode.State, "corrald answers on %s: stop the cluster first", d.Socket())
	}
	if pids := procsByStateDir(l.StateDir, "corrald"); len(pids) > 0 {
		return ecode.Errorf(ecode.State, "corrald runs for %s (pid %v): stop the cluster first", l.StateDir, pids)
	}
	return nil
}

// moveToEtcd moves a stopped cluster's store into etcd: into the members at
// e.endpoints, or into one local member started here on host.
func moveToEtcd(ctx context.Context, d Dirs, l bootstrap.Layout, e etcdFlags, host string) error {
	endpoints := splitList(e.endpoints)
	var started []bootstrap.EtcdMember
	if len(endpoints) == 0 {
		fmt.Fprintf(d.Stdout, "Starting a local etcd member (user %s, data in %s) on %s\n", bootstrap.EtcdUser, l.EtcdDir(), host)
		ms, err := bootstrap.StartEtcd(ctx, bootstrap.EtcdOptions{Layout: l, Members: 1, Host: host, SetOwners: true})
		if err != nil {
			return fmt.Errorf("starting a local etcd member: %w", err)
		}
		started = ms
		endpoints = []string{ms[0].ClientURL}
	}
	cmd, err := bootstrap.MigrateCommand(ctx, bootstrap.MigrateOptions{
		Layout: l, Endpoints: endpoints, Prefix: e.prefix, CAFile: e.ca, CertFile: e.cert, KeyFile: e.key, SetOwners: true,
	})
	if err == nil {
		cmd.Stdout, cmd.Stderr = d.Stdout, d.Stderr
		err = cmd.Run()
	}
	if err != nil {
		if len(started) > 0 {
			// Nothing refers to the new member yet: take it away, so that
			// running the command again starts afresh.
			bootstrap.StopEtcd(started, 10*time.Second)
			_ = os.RemoveAll(l.EtcdDir())
		}
		return fmt.Errorf("moving the store to etcd failed; the cluster stays on bbolt: %w", err)
	}
	if len(started) > 0 {
		unit := filepath.Join(l.EtcdDir(), bootstrap.EtcdUnitName)
		if err := bootstrap.WriteEtcdUnit(unit, started[0], bootstrap.EtcdUser); err != nil {
			return err
		}
		fmt.Fprintf(d.Stdout, "The local etcd member runs now (pid %d, %s). To start it at boot:\n  ln -s %s /etc/systemd/system/ && systemctl enable %s\n",
			started[0].PID, started[0].ClientURL, unit, bootstrap.EtcdUnitName)
	}
	return nil
}

// masterIP is the address in the master's certificate, where a local etcd
// member listens so that other machines can reach it later.
func masterIP(l bootstrap.Layout) string {
	b, err := os.ReadFile(filepath.Join(l.MasterDir(), layout.MasterCertFile))
	if err != nil {
		return "127.0.0.1"
	}
	certs, err := pki.ParseCertificatesPEM(b)
	if err != nil || len(certs[0].IPAddresses) == 0 {
		return "127.0.0.1"
	}
	return certs[0].IPAddresses[0].String()
}

// procsByStateDir lists the processes running one of the binaries names
// whose command line names stateDir or a path below it.
func procsByStateDir(stateDir string, names ...string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		base := filepath.Base(args[0])
		found := false
		for _, n := range names {
			found = found || base == n
		}
		if found && namesDir(args[1:], stateDir) {
			out = append(out, pid)
		}
	}
	return out
}

// namesDir reports whether an argument (or a --flag=value's value) is dir or
// a path below it.
func namesDir(args []string, dir string) bool {
	dir = filepath.Clean(dir)
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			if _, v, ok := strings.Cut(a, "="); ok {
				a = v
			}
		}
		if a == dir || strings.HasPrefix(a, dir+"/") {
			return true
		}
	}
	return false
}
