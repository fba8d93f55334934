// Package etcdproc starts and stops etcd members as processes of their own:
// Debian's /usr/bin/etcd, run beside Corral's daemons and never inside them.
// Tests use it for real one- and three-member clusters on loopback; the dev
// cluster uses it to run the members of its control plane.
//
// A member runs in a session of its own (Setsid), so neither a signal to the
// starter's process group nor the starter's exit takes it along: losing
// corrald must never mean losing an etcd member. Tests that must not leave
// members behind when the test binary crashes ask for Config.ExitWithParent,
// which ties the member to the starting process through a watcher process
// rather than through the kernel's parent-death signal (that one fires when
// the starting OS thread exits, which in Go can be at any time).
package etcdproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/store"
)

// Where Debian's etcd-server and etcd-client packages install the binaries.
const (
	DefaultBinary  = "/usr/bin/etcd"
	DefaultEtcdctl = "/usr/bin/etcdctl"
)

// Limits passed to every member. A transaction the store accepts must always
// fit: MaxRequestBytes leaves room for the protobuf framing and for the key
// prefix a store puts in front of every key, MaxTxnOps for compares a store
// adds to a caller's transaction (fencing, emulated compares).
const (
	RequestOverheadBytes = 512 * 1024
	MaxRequestBytes      = store.MaxTxnBytes + RequestOverheadBytes
	MaxTxnOps            = store.MaxOpsPerTxn + 16
)

// Defaults for a control plane: the configuration and the job queue are
// small, so etcd's own 2 GiB quota is ample, and an hour of history is
// enough for any watcher to resume after a failover.
const (
	DefaultQuotaBackendBytes   = 2 << 30
	DefaultSnapshotCount       = 10000 // etcd 3.6's default; 3.4 keeps 100000 entries in memory
	DefaultCompactionRetention = "1h"
	DefaultClusterToken        = "corral-etcd"
	DefaultReadyTimeout        = 30 * time.Second
	DefaultStopTimeout         = 10 * time.Second
)

// TLSFiles names the PEM files of one TLS endpoint: the member's certificate
// and key, and the CA bundle its peers' certificates must chain to.
type TLSFiles struct {
	CertFile string
	KeyFile  string
	CAFile   string
}

func (f *TLSFiles) check(what string) error {
	if f == nil {
		return nil
	}
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return fmt.Errorf("etcdproc: %s TLS: certificate, key and CA files are all required", what)
	}
	for _, p := range []string{f.CertFile, f.KeyFile, f.CAFile} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("etcdproc: %s TLS: %w", what, err)
		}
	}
	return nil
}

// Config describes a cluster to start. Dir is required; the zero value of
// every other field is a sensible default.
type Config struct {
	// Binary is the etcd executable; "" means Binary().
	Binary string
	// Etcdctl is the etcdctl executable, needed only to restore a
	// snapshot; "" means etcdctl from PATH, else DefaultEtcdctl.
	Etcdctl string
	// Dir holds one directory per member (Dir/<name>) with its data
	// directory, log and pid file.
	Dir string
	// Members is the cluster size (default 1). Use an odd number.
	Members int
	// Host is the address every member listens on (default 127.0.0.1);
	// ports are picked free.
	Host string
	// ClientTLS, when set, makes members serve clients over TLS and demand
	// client certificates that chain to CAFile (mTLS).
	ClientTLS *TLSFiles
	// PeerTLS, when set, does the same for traffic between members.
	PeerTLS *TLSFiles
	// ClusterToken tells clusters on one network apart (default
	// DefaultClusterToken).
	ClusterToken string
	// QuotaBackendBytes caps the database (default
	// DefaultQuotaBackendBytes); writes fail with "no space" above it.
	QuotaBackendBytes int64
	// SnapshotCount is how many raft entries trigger a snapshot (default
	// DefaultSnapshotCount).
	SnapshotCount int
	// CompactionRetention is how much history periodic auto-compaction
	// keeps, e.g. "1h" (default DefaultCompactionRetention).
	CompactionRetention string
	// HeartbeatInterval and ElectionTimeout tune raft; zero keeps etcd's
	// defaults (100 ms and 1 s).
	HeartbeatInterval time.Duration
	ElectionTimeout   time.Duration
	// ReadyTimeout bounds the wait for a started member to report healthy
	// (default DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// StopTimeout is how long Stop waits after SIGTERM before SIGKILL
	// (default DefaultStopTimeout).
	StopTimeout time.Duration
	// ExitWithParent kills the members when the starting process exits,
	// however it exits. For tests: a production member must outlive its
	// starter.
	ExitWithParent bool
	// Logger receives start and stop messages; nil discards them. The
	// members' own logs go to their log files.
	Logger *slog.Logger
}

// Binary returns the etcd executable: etcd from PATH, else DefaultBinary.
func Binary() (string, error) { return lookBinary("etcd", DefaultBinary, "etcd-server") }

// Etcdctl returns the etcdctl executable: etcdctl from PATH, else
// DefaultEtcdctl.
func Etcdctl() (string, error) { return lookBinary("etcdctl", DefaultEtcdctl, "etcd-client") }

func lookBinary(name, fallback, pkg string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	if _, err := os.Stat(fallback); err != nil {
		return "", fmt.Errorf("etcdproc: %s not found in PATH nor at %s (install Debian's %s): %w", name, fallback, pkg, err)
	}
	return fallback, nil
}

func (c *Config) setDefaults() error {
	if c.Dir == "" {
		return errors.New("etcdproc: Config.Dir is required")
	}
	if c.Binary == "" {
		bin, err := Binary()
		if err != nil {
			return err
		}
		c.Binary = bin
	}
	if c.Members == 0 {
		c.Members = 1
	}
	if c.Members < 1 || c.Members > 9 {
		return fmt.Errorf("etcdproc: %d members (want 1 to 9)", c.Members)
	}
	if c.Host == "" {
		c.Host = "127.0.0.1"
	}
	if net.ParseIP(c.Host) == nil {
		return fmt.Errorf("etcdproc: host %q is not an IP address", c.Host)
	}
	if err := c.ClientTLS.check("client"); err != nil {
		return err
	}
	if err := c.PeerTLS.check("peer"); err != nil {
		return err
	}
	if c.ClusterToken == "" {
		c.ClusterToken = DefaultClusterToken
	}
	if c.QuotaBackendBytes == 0 {
		c.QuotaBackendBytes = DefaultQuotaBackendBytes
	}
	if c.SnapshotCount == 0 {
		c.SnapshotCount = DefaultSnapshotCount
	}
	if c.CompactionRetention == "" {
		c.CompactionRetention = DefaultCompactionRetention
	}
	if c.ReadyTimeout <= 0 {
		c.ReadyTimeout = DefaultReadyTimeout
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Cluster is a set of members started together.
type Cluster struct {
	Members []*Member
}

// Start starts cfg.Members members as one new cluster and waits until every
// member reports healthy. On failure the members it started are stopped
// again and the error quotes the end of the failing member's log. A member
// directory must not hold data yet: a stopped member is restarted with
// Member.Start, which keeps its ports.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	return start(ctx, cfg, "")
}

// StartFromSnapshot is Start with every member's data directory first
// restored (by etcdctl) from snapshot, a file written by etcd's snapshot
// API such as a store backup. The keyspace keeps its revision; the
// membership is the new cluster's.
func StartFromSnapshot(ctx context.Context, cfg Config, snapshot string) (*Cluster, error) {
	if _, err := os.Stat(snapshot); err != nil {
		return nil, fmt.Errorf("etcdproc: snapshot: %w", err)
	}
	return start(ctx, cfg, snapshot)
}

func start(ctx context.Context, cfg Config, snapshot string) (*Cluster, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	// Hold every port until all are chosen, so no two members get the same
	// one; they are released just before the members bind them.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	port := func() (string, error) {
		l, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, "0"))
		if err != nil {
			return "", fmt.Errorf("etcdproc: picking a port: %w", err)
		}
		held = append(held, l)
		return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
	}
	clientScheme, peerScheme := "http", "http"
	if cfg.ClientTLS != nil {
		clientScheme = "https"
	}
	if cfg.PeerTLS != nil {
		peerScheme = "https"
	}
	c := &Cluster{}
	var initial []string
	for i := range cfg.Members {
		cp, err := port()
		if err != nil {
			return nil, err
		}
		pp, err := port()
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("m%d", i)
		m := &Member{
			Name:      name,
			Dir:       filepath.Join(cfg.Dir, name),
			ClientURL: clientScheme + "://" + net.JoinHostPort(cfg.Host, cp),
			PeerURL:   peerScheme + "://" + net.JoinHostPort(cfg.Host, pp),
			cfg:       cfg,
		}
		c.Members = append(c.Members, m)
		initial = append(initial, name+"="+m.PeerURL)
	}
	for _, m := range c.Members {
		m.args = memberArgs(&cfg, m, strings.Join(initial, ","))
		if _, err := os.Stat(m.DataDir()); err == nil {
			return nil, fmt.Errorf("etcdproc: %s already holds a member's data", m.DataDir())
		}
		if err := os.MkdirAll(m.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("etcdproc: %w", err)
		}
	}
	if snapshot != "" {
		for _, m := range c.Members {
			if err := restore(ctx, &cfg, m, snapshot, strings.Join(initial, ",")); err != nil {
				return nil, err
			}
		}
	}
	for _, l := range held {
		l.Close()
	}
	held = nil
	for _, m := range c.Members {
		if err := m.spawn(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	// Members of a new cluster become healthy together, once a quorum is
	// up, so all are started before the first wait.
	for _, m := range c.Members {
		if err := m.WaitReady(ctx); err != nil {
			c.Stop()
			return nil, err
		}
	}
	cfg.Logger.Info("etcd cluster started", "members", len(c.Members), "endpoints", c.Endpoints())
	return c, nil
}

// memberArgs are the command-line flags of m. A restart reuses them: etcd
// ignores the initial-cluster flags once its data directory exists.
func memberArgs(cfg *Config, m *Member, initialCluster string) []string {
	args := []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir(),
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + cfg.ClusterToken,
		"--max-txn-ops=" + strconv.Itoa(MaxTxnOps),
		"--max-request-bytes=" + strconv.Itoa(MaxRequestBytes),
		"--quota-backend-bytes=" + strconv.FormatInt(cfg.QuotaBackendBytes, 10),
		"--snapshot-count=" + strconv.Itoa(cfg.SnapshotCount),
		"--auto-compaction-mode=periodic",
		"--auto-compaction-retention=" + cfg.CompactionRetention,
		// Pre-vote keeps a member that was cut off from disrupting the
		// leader when it comes back (etcd 3.5 turns it on by default).
		"--pre-vote=true",
		"--logger=zap",
		"--log-outputs=stderr",
	}
	if cfg.HeartbeatInterval > 0 {
		args = append(args, "--heartbeat-interval="+strconv.FormatInt(cfg.HeartbeatInterval.Milliseconds(), 10))
	}
	if cfg.ElectionTimeout > 0 {
		args = append(args, "--election-timeout="+strconv.FormatInt(cfg.ElectionTimeout.Milliseconds(), 10))
	}
	if t := cfg.ClientTLS; t != nil {
		args = append(args, "--cert-file="+t.CertFile, "--key-file="+t.KeyFile,
			"--trusted-ca-file="+t.CAFile, "--client-cert-auth=true")
	}
	if t := cfg.PeerTLS; t != nil {
		args = append(args, "--peer-cert-file="+t.CertFile, "--peer-key-file="+t.KeyFile,
			"--peer-trusted-ca-file="+t.CAFile, "--peer-client-cert-auth=true")
	}
	return args
}

// restore builds m's data directory from snapshot.
func restore(ctx context.Context, cfg *Config, m *Member, snapshot, initialCluster string) error {
	bin := cfg.Etcdctl
	if bin == "" {
		var err error
		if bin, err = Etcdctl(); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, bin, "snapshot", "restore", snapshot,
		"--name="+m.Name,
		"--data-dir="+m.DataDir(),
		"--initial-cluster="+initialCluster,
		"--initial-advertise-peer-urls="+m.PeerURL,
		"--initial-cluster-token="+cfg.ClusterToken)
	cmd.Dir = m.Dir
	cmd.Env = append(environ(), "ETCDCTL_API=3")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("etcdproc: restoring %s for member %s: %w: %s", snapshot, m.Name, err, truncate(bytes.TrimSpace(out), 2000))
	}
	return nil
}

// Endpoints returns the members' client URLs.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL
	}
	return out
}

// Member returns the member called name, or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Stop stops every running member (SIGTERM, then SIGKILL after the stop
// timeout).
func (c *Cluster) Stop() error {
	var errs []error
	for _, m := range c.Members {
		if err := m.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
