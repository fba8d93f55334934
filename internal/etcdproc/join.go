package etcdproc

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Names the members' certificates carry. The members Corral runs accept a
// client only with ClientHostname and a peer only with PeerHostname, so that
// no other certificate of the cluster CA (a node daemon's) can talk to etcd.
// They are the names bootstrap issues for the members it starts.
const (
	ClientHostname = "corral-etcd-client"
	PeerHostname   = "corral-etcd-peer"
)

// Ports of a member a node daemon runs for a managed cluster (etcd's own
// defaults).
const (
	DefaultClientPort = 2379
	DefaultPeerPort   = 2380
)

// MemberInfo is one entry of an etcd cluster's member list. A member that
// was added but has not started yet has no name and no client URL.
type MemberInfo struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
}

// InitialCluster is the --initial-cluster flag of a member that joins a
// running cluster: every member's name and peer URLs, the joining member
// (which has no name yet) under name. Members added and not started yet
// keep their empty names, as etcd expects them.
func InitialCluster(members []MemberInfo, joiningID uint64, name string) string {
	var parts []string
	for _, m := range members {
		n := m.Name
		if m.ID == joiningID {
			n = name
		}
		for _, u := range m.PeerURLs {
			parts = append(parts, n+"="+u)
		}
	}
	return strings.Join(parts, ",")
}

// JoinSpec is one member that joins a running cluster, as a learner the
// cluster API has added with PeerURL.
type JoinSpec struct {
	Name      string
	Dir       string // data/, etcd.log and etcd.pid live here
	ClientURL string
	PeerURL   string
	// InitialCluster is the cluster's membership including this member
	// (see InitialCluster).
	InitialCluster string
}

func (j JoinSpec) check() error {
	if j.Name == "" || j.Dir == "" || j.InitialCluster == "" {
		return errors.New("etcdproc: joining member: name, directory and initial cluster are required")
	}
	for _, u := range []string{j.ClientURL, j.PeerURL} {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("etcdproc: joining member %s: bad URL %q", j.Name, u)
		}
	}
	if !strings.Contains(","+j.InitialCluster+",", ","+j.Name+"="+j.PeerURL+",") {
		return fmt.Errorf("etcdproc: joining member %s: the initial cluster does not name it at %s", j.Name, j.PeerURL)
	}
	return nil
}

// Join starts one member of a running cluster and returns once its process
// runs, without waiting for health: a learner serves no client until it is
// promoted, so the caller watches its progress through the cluster API. A
// member whose data directory exists is simply started again on it (etcd
// then ignores the initial-cluster flags). cfg gives the binary, TLS and
// limits; its Dir, Members and Host are not used.
func Join(cfg Config, spec JoinSpec) (*Member, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	cfg.Dir = filepath.Dir(spec.Dir)
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	m := &Member{Name: spec.Name, Dir: spec.Dir, ClientURL: spec.ClientURL, PeerURL: spec.PeerURL, cfg: cfg}
	m.args = joinArgs(&cfg, m, spec.InitialCluster)
	if err := m.spawn(); err != nil {
		return nil, err
	}
	return m, nil
}

// joinArgs are memberArgs for a member that joins an existing cluster.
func joinArgs(cfg *Config, m *Member, initialCluster string) []string {
	args := memberArgs(cfg, m, initialCluster)
	for i, a := range args {
		if a == "--initial-cluster-state=new" {
			args[i] = "--initial-cluster-state=existing"
		}
	}
	return args
}
