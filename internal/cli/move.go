package cli

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/move"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/rapiclient"
	"github.com/corral/corral/internal/secret"
)

// defaultRAPIPort is Ganeti's DEFAULT_RAPI_PORT.
const defaultRAPIPort = 5080

// moveSideFlags are one cluster's connection flags.
type moveSideFlags struct {
	port                   int
	caFile, user, passFile string
}

// moveFlags are the flags of instance move, named as move-instance's.
type moveFlags struct {
	src, dest                                          moveSideFlags
	destName, pnode, snode, template, compress, ialloc string
	be, hv, osp                                        string
	nets                                               []string
	parallel, oppTries, oppDelay                       int
	keepSource, dryRun                                 bool
}

func (a *app) instanceMoveCmd() *cobra.Command { return newMoveCmd(runMove) }

// runMove moves the requests, or only checks them with dryRun.
func runMove(cmd *cobra.Command, m *move.Mover, reqs []move.Request, dryRun bool) error {
	m.Out = cmd.OutOrStdout()
	if dryRun {
		cl := m.Preflight(cmd.Context(), reqs)
		if err := cl.Write(cmd.OutOrStdout()); err != nil {
			return err
		}
		if cl.Failed() {
			return &exitError{code: ExitError, msg: "Failure: the preflight found problems; nothing was moved"}
		}
		return nil
	}
	return moveFailure(m.MoveAll(cmd.Context(), reqs), len(reqs))
}

// newMoveCmd builds the command; run gets what the flags ask for.
func newMoveCmd(run func(cmd *cobra.Command, m *move.Mover, reqs []move.Request, dryRun bool) error) *cobra.Command {
	var f moveFlags
	cmd := &cobra.Command{
		Use:   "move [flags] SRC-CLUSTER DEST-CLUSTER INSTANCE...",
		Short: "Move instances to another cluster",
		Long: `Move instances from one cluster to another through both clusters' RAPI
servers, as Ganeti's move-instance does. The source cluster prepares the
export, the destination creates each instance in remote-import mode and the
source sends the disks straight to it over TLS; this command only carries the
handshake, certificates and addresses between them. The clusters must share
the cluster domain secret, and the RAPI users need the write option.

SRC-CLUSTER and DEST-CLUSTER are host names (https://HOST:PORT with
--src-rapi-port/--dest-rapi-port) or https:// URLs. Each cluster's RAPI
certificate is verified with --src-ca-file/--dest-ca-file; the destination's
CA, user name and password default to the source's. Password files are read
up to their first line break.

The instance is shut down on the source while its disks are copied and
removed from it afterwards unless --keep-source-instance is given; on the
destination it is started if it was running. -B, -H and -O change backend,
hypervisor and OS parameters (key=value,...), --net N:key=value,... changes
NIC N. With --opportunistic-tries N the first N creation attempts only take
nodes nobody else holds and are retried after --opportunistic-delay seconds
(varied by 15%) when those are busy.

--dry-run moves no data and changes nothing: it checks that both clusters
answer, that the credentials may write and that each instance exists, has the
source sign a handshake (prepare-export in dry-run mode, which makes no
transfer certificate) and asks the destination to check the creation
(dry-run=1). That answer proves the domain secret is shared, the name free
and the room, hypervisor and disk template available. A checklist of
ok/FAILED lines is printed; any failure exits non-zero.

When a move fails after the source prepared it, the source's unused transfer
key is destroyed (DELETE prepare-export); a failed import removes what it
created.`,
		Example: `  corral instance move --src-ca-file src-ca.pem --dest-ca-file dst-ca.pem \
      --src-username mover --src-password-file pw cluster1 cluster2 web1
  corral instance move --dry-run --src-ca-file ca.pem --src-username mover \
      --src-password-file pw https://c1:5080 https://c2:5080 web1 web2
  corral instance move -p 2 --compress zstd --dest-instance-name web1-new ... c1 c2 web1`,
		Args: minArgs(3, "the source cluster, the destination cluster and at least one instance"),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, reqs, err := f.build(cmd, args)
			if err != nil {
				return err
			}
			return run(cmd, m, reqs, f.dryRun)
		},
	}
	fs := cmd.Flags()
	for _, s := range []struct {
		side, what string
		fl         *moveSideFlags
	}{{"src", "source", &f.src}, {"dest", "destination", &f.dest}} {
		fs.IntVar(&s.fl.port, s.side+"-rapi-port", defaultRAPIPort, s.what+" cluster's RAPI port (for a host name)")
		fs.StringVar(&s.fl.caFile, s.side+"-ca-file", "", s.what+" cluster's RAPI CA certificate (PEM)")
		fs.StringVar(&s.fl.user, s.side+"-username", "", s.what+" cluster's RAPI user name")
		fs.StringVar(&s.fl.passFile, s.side+"-password-file", "", "file whose first line is the "+s.what+" cluster's RAPI password")
	}
	fs.StringVar(&f.destName, "dest-instance-name", "", "instance name on the destination (only when moving one instance)")
	fs.StringVar(&f.pnode, "dest-primary-node", "", "primary node on the destination (only when moving one instance)")
	fs.StringVar(&f.snode, "dest-secondary-node", "", "secondary node on the destination (only when moving one instance)")
	fs.StringVar(&f.template, "dest-disk-template", "", "disk template on the destination (default: the source's)")
	fs.StringVar(&f.compress, "compress", "none", "transfer compression, supported by both clusters: "+strings.Join(opcodes.Compressions, ", "))
	fs.StringVarP(&f.ialloc, "iallocator", "I", "", "instance allocator placing the instances on the destination")
	fs.StringVarP(&f.be, "backend-parameters", "B", "", "backend parameters to change (key=value,...)")
	fs.StringVarP(&f.hv, "hypervisor-parameters", "H", "", "hypervisor parameters to change (key=value,...)")
	fs.StringVarP(&f.osp, "os-parameters", "O", "", "OS parameters to change (key=value,...)")
	fs.StringArrayVar(&f.nets, "net", nil, "NIC changes N:key=value,... (mac, ip, mode, link, vlan, network, name; no new NICs)")
	fs.IntVarP(&f.parallel, "parallel", "p", 1, "number of instances moved at once")
	fs.IntVar(&f.oppTries, "opportunistic-tries", 0, "opportunistic creation attempts before an ordinary one")
	fs.IntVar(&f.oppDelay, "opportunistic-delay", int(move.DefaultOpportunisticDelay/time.Second), "seconds between creation attempts")
	fs.BoolVar(&f.keepSource, "keep-source-instance", false, "keep the (shut down) instance on the source cluster")
	fs.BoolVar(&f.dryRun, "dry-run", false, "only check that the move could be done (see above)")
	return cmd
}

// build checks the flags and makes the mover and its requests.
func (f *moveFlags) build(cmd *cobra.Command, args []string) (*move.Mover, []move.Request, error) {
	insts := args[2:]
	if len(insts) > 1 {
		for _, fl := range []string{"dest-instance-name", "dest-primary-node", "dest-secondary-node"} {
			if cmd.Flags().Changed(fl) {
				return nil, nil, usagef("--%s can only be used when moving exactly one instance", fl)
			}
		}
	}
	for i, n := range insts {
		if n == "" || slices.Contains(insts[:i], n) {
			return nil, nil, usagef("instance %q is empty or given twice", n)
		}
	}
	switch {
	case f.ialloc != "" && f.pnode != "":
		return nil, nil, usagef("--iallocator and --dest-primary-node exclude each other")
	case f.snode != "" && f.pnode == "":
		return nil, nil, usagef("--dest-secondary-node needs --dest-primary-node")
	case !slices.Contains(opcodes.Compressions, f.compress):
		return nil, nil, paramErr("--compress: %q is not one of %s", f.compress, strings.Join(opcodes.Compressions, ", "))
	case f.parallel < 1:
		return nil, nil, paramErr("--parallel must be at least 1")
	case f.oppTries < 0 || f.oppDelay < 0:
		return nil, nil, paramErr("--opportunistic-tries and --opportunistic-delay must not be negative")
	}
	o := move.Overrides{DestName: f.destName, PrimaryNode: f.pnode, SecondNode: f.snode, IAllocator: f.ialloc,
		DiskTemplate: f.template, Compress: f.compress, KeepSource: f.keepSource}
	var err error
	if f.be != "" {
		if o.BEParams, err = parseBEParams("-B", f.be, false); err != nil {
			return nil, nil, err
		}
	}
	if f.hv != "" {
		if o.HVParams, err = parseParams("-H", f.hv, false); err != nil {
			return nil, nil, err
		}
	}
	if f.osp != "" {
		if o.OSParams, err = parseParams("-O", f.osp, false); err != nil {
			return nil, nil, err
		}
	}
	if len(f.nets) > 0 {
		nics, err := parseIndexed("--net", "NIC", f.nets)
		if err != nil {
			return nil, nil, err
		}
		for _, n := range nics {
			m := make(map[string]any, len(n))
			for k, v := range n {
				m[k] = v
			}
			o.NICs = append(o.NICs, m)
		}
	}

	// The destination defaults to the source's port, CA and credentials.
	dest := f.dest
	if !cmd.Flags().Changed("dest-rapi-port") {
		dest.port = f.src.port
	}
	if dest.caFile == "" {
		dest.caFile = f.src.caFile
	}
	if !cmd.Flags().Changed("dest-username") {
		dest.user = f.src.user
	}
	if dest.passFile == "" {
		dest.passFile = f.src.passFile
	}
	src, err := moveCluster("source", "src", args[0], f.src)
	if err != nil {
		return nil, nil, err
	}
	dst, err := moveCluster("destination", "dest", args[1], dest)
	if err != nil {
		return nil, nil, err
	}
	m := &move.Mover{Src: src, Dest: dst, Parallel: f.parallel, OpportunisticTries: f.oppTries,
		OpportunisticDelay: time.Duration(f.oppDelay) * time.Second}
	reqs := make([]move.Request, 0, len(insts))
	for _, n := range insts {
		reqs = append(reqs, move.Request{Instance: n, Overrides: o})
	}
	return m, reqs, nil
}

// clusterURL turns a cluster argument into its RAPI URL: https URLs are
// kept, a host name (or host:port) gets https:// and the port.
func clusterURL(arg string, port int) (string, error) {
	if strings.Contains(arg, "://") {
		u, err := url.Parse(arg)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return "", fmt.Errorf("%q is not a host name or an https://HOST:PORT URL", arg)
		}
		return strings.TrimRight(arg, "/"), nil
	}
	if port < 1 || port > 65535 {
		return "", fmt.Errorf("RAPI port %d is out of range", port)
	}
	if h, p, err := net.SplitHostPort(arg); err == nil {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || h == "" || !validHost(h) {
			return "", fmt.Errorf("%q is not a valid HOST:PORT", arg)
		}
		return "https://" + net.JoinHostPort(h, p), nil
	}
	h := strings.TrimSuffix(strings.TrimPrefix(arg, "["), "]")
	if !validHost(h) {
		return "", fmt.Errorf("%q is not a host name or an https://HOST:PORT URL", arg)
	}
	return "https://" + net.JoinHostPort(h, strconv.Itoa(port)), nil
}

// validHost accepts a host name or an IP address (IPv6 without brackets).
func validHost(h string) bool {
	if strings.Contains(h, ":") {
		return net.ParseIP(h) != nil
	}
	if h == "" {
		return false
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return false
		}
	}
	return true
}

// moveCluster builds one side's RAPI client from its flags.
func moveCluster(what, flag, arg string, s moveSideFlags) (*move.Cluster, error) {
	u, err := clusterURL(arg, s.port)
	if err != nil {
		return nil, usagef("%s cluster: %v", what, err)
	}
	cfg := rapiclient.Config{URL: u, User: s.user}
	if s.passFile != "" {
		b, err := os.ReadFile(s.passFile)
		if err != nil {
			return nil, ecode.Errorf(ecode.Environ, "%s cluster: reading the password: %v", what, err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		cfg.Password = secret.Secret(strings.TrimSuffix(line, "\r"))
	}
	if cfg.User != "" && cfg.Password.Empty() {
		return nil, usagef("%s cluster: no password for user %q: give --%s-password-file", what, cfg.User, flag)
	}
	if s.caFile == "" {
		return nil, usagef("%s cluster: no CA certificate to verify its RAPI server with: give --%s-ca-file", what, flag)
	}
	if cfg.CAPEM, err = os.ReadFile(s.caFile); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "%s cluster: reading the CA certificate: %v", what, err)
	}
	c, err := rapiclient.New(cfg)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "%s cluster: %v", what, err)
	}
	return &move.Cluster{Name: u, User: s.user, Client: c}, nil
}

// moveFailure sums up the failed moves (already reported line by line)
// with the exit status of the first failure's class.
func moveFailure(errs []error, total int) error {
	if len(errs) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Failure: %d of %d instance move(s) failed:", len(errs), total)
	for _, err := range errs {
		fmt.Fprintf(&b, "\n  %v", err)
	}
	code := ExitError
	if e, ok := ecode.As(errors.Join(errs...)); ok && e.Class != "" {
		code = ecode.ExitCode(e.Class)
	}
	return &exitError{code: code, msg: b.String()}
}
