package cmdlib

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/etcdproc"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/storecfg"
)

// On a cluster whose etcd members Corral manages, the members follow the
// master candidates: promoting a node adds a member named after it, run by
// its node daemon; demoting it removes that member. Each change goes
// through etcd's cluster API one safe step at a time (a learner first,
// which never counts towards the quorum, promoted to a voter only once it
// has caught up; a removal only when the members left keep a quorum), and
// every step finds out from the member list what an interrupted run of it
// did, so a resumed op neither adds a second member nor stops a voter.

// EtcdMemberAPI is the membership API of the etcd cluster the store runs on
// (etcdstore.Store implements it; this package must not link etcd's client).
type EtcdMemberAPI interface {
	Members(ctx context.Context) ([]etcdproc.MemberInfo, error)
	AddLearner(ctx context.Context, peerURL string) (uint64, error)
	PromoteMember(ctx context.Context, id uint64) error
	RemoveMember(ctx context.Context, id uint64) error
}

// EtcdMembership is what the processor needs to change the members of a
// cluster on etcd.
type EtcdMembership struct {
	API EtcdMemberAPI
	// Managed is nil when the operator runs the members: promotions and
	// demotions then leave them alone.
	Managed *storecfg.ManagedMembers
	// CA issues each member's certificate.
	CA *pki.CA
}

// Bounds of the waits of a membership change. etcd refuses a change for a
// few seconds after the previous one (until it knows the members are
// connected), and a learner needs time to receive the log.
const (
	etcdReconfigWait = 30 * time.Second
	etcdCatchUpWait  = 2 * time.Minute
	etcdPoll         = 300 * time.Millisecond
)

// Actions of an etcd plan.
const (
	etcdAdd    = "add"
	etcdRemove = "remove"
)

// etcdPlan is the membership change of a node modification, saved with the
// op's plan.
type etcdPlan struct {
	Action    string `json:"action"`
	Name      string `json:"name"`
	NodeUUID  string `json:"node_uuid"`
	PeerURL   string `json:"peer_url"`
	ClientURL string `json:"client_url"`
	// SkipStop leaves the member's process alone on removal: the node is
	// being marked offline and cannot be asked.
	SkipStop bool `json:"skip_stop,omitempty"`
	// StopOnly: the cluster lists no member for the node, but a removal
	// that stopped half way may have left its process and data there;
	// they are cleaned up if the node answers.
	StopOnly bool `json:"stop_only,omitempty"`
}

// changesEtcdMembers reports whether op may change a managed cluster's
// members: it names the candidate role or a flag that demotes.
func changesEtcdMembers(p *Processor, op *opcodes.Op) bool {
	if p.Etcd == nil || p.Etcd.Managed == nil {
		return false
	}
	for _, f := range []string{"master_candidate", "offline", "drained", "master_capable"} {
		if op.Params[f] != nil {
			return true
		}
	}
	return false
}

// memberURLs are the URLs of the member a managed cluster runs on node.
func memberURLs(m *storecfg.ManagedMembers, n *config.Node) (peer, client string) {
	host := n.PrimaryIP
	return "https://" + net.JoinHostPort(host, strconv.Itoa(m.PeerPort)), "https://" + net.JoinHostPort(host, strconv.Itoa(m.ClientPort))
}

// findMember returns the member named name or, for one added and not yet
// started (it has no name then), the member at peerURL.
func findMember(ms []etcdproc.MemberInfo, name, peerURL string) *etcdproc.MemberInfo {
	for i := range ms {
		if ms[i].Name == name && name != "" {
			return &ms[i]
		}
	}
	for i := range ms {
		for _, u := range ms[i].PeerURLs {
			if u == peerURL && peerURL != "" {
				return &ms[i]
			}
		}
	}
	return nil
}

// checkRemoval refuses a removal that would leave no voter, or leave the
// voters left without a healthy majority. healthy tells which members
// answered (by name); nil means unknown and is refused as well, because a
// removal cannot be undone.
func checkRemoval(ms []etcdproc.MemberInfo, target *etcdproc.MemberInfo, healthy map[string]bool) error {
	if target.Learner {
		return nil // a learner is no part of any quorum
	}
	voters, up := 0, 0
	for _, m := range ms {
		if m.Learner || m.ID == target.ID {
			continue
		}
		voters++
		if healthy[m.Name] {
			up++
		}
	}
	if voters == 0 {
		return ecode.Errorf(ecode.State, "etcd member %s is the store's last voting member; it cannot be removed", target.Name)
	}
	if up < voters/2+1 {
		return ecode.Errorf(ecode.State, "removing etcd member %s would leave %d voting member(s) of which only %d healthy: no quorum; bring the other members back first",
			target.Name, voters, up)
	}
	return nil
}

// planEtcd decides the membership change of a node modification: want is
// the node's candidate role once the op is done, asked whether the op
// names master_candidate at all (so that repeating a promotion or demotion
// finishes one that stopped half way). It returns nil when the members
// stay as they are, and a note for the job log when Corral leaves them to
// the operator.
func planEtcd(ctx context.Context, p *Processor, n *config.Node, want, changed, asked, offline bool) (*etcdPlan, string, error) {
	e := p.Etcd
	if e == nil || (!changed && !asked) {
		return nil, "", nil
	}
	if e.Managed == nil {
		if !changed {
			return nil, "", nil
		}
		return nil, fmt.Sprintf("The etcd members of this cluster are run by its operator: add or remove one for %s by hand if needed", n.Name), nil
	}
	ms, err := e.API.Members(ctx)
	if err != nil {
		return nil, "", ecode.Errorf(ecode.Environ, "Cannot list the etcd members: %v", err)
	}
	peer, client := memberURLs(e.Managed, n)
	m := findMember(ms, n.Name, peer)
	plan := &etcdPlan{Name: n.Name, NodeUUID: n.UUID, PeerURL: peer, ClientURL: client}
	if want {
		if m != nil && !m.Learner && m.Name != "" {
			return nil, "", nil // a voting member already
		}
		if n.UUID == p.Cfg.Cluster().MasterNode {
			return nil, "", nil // the master's members are the bootstrap's
		}
		plan.Action = etcdAdd
		return plan, "", nil
	}
	if m == nil {
		if n.UUID == p.Cfg.Cluster().MasterNode || offline {
			return nil, "", nil
		}
		plan.Action, plan.StopOnly = etcdRemove, true
		return plan, "", nil
	}
	var healthy map[string]bool
	if p.StoreHealth != nil {
		if hs, err := p.StoreHealth(ctx); err == nil {
			healthy = map[string]bool{}
			for _, h := range hs {
				healthy[h.Name] = h.Healthy
			}
		}
	}
	if err := checkRemoval(ms, m, healthy); err != nil {
		return nil, "", err
	}
	plan.Action, plan.SkipStop = etcdRemove, offline
	return plan, "", nil
}

// etcdAddSteps add the node's member after the configuration says it is a
// candidate.
func (lu *nodeSetParamsLU) etcdAddSteps() []Step {
	return []Step{
		{"etcd-add-learner", lu.etcdAddLearner},
		{"etcd-start-member", lu.etcdStartMember},
		{"etcd-promote-member", lu.etcdPromote},
	}
}

// etcdRemoveSteps remove the node's member before the configuration stops
// calling it a candidate.
func (lu *nodeSetParamsLU) etcdRemoveSteps() []Step {
	return []Step{
		{"etcd-remove-member", lu.etcdRemoveMember},
		{"etcd-stop-member", lu.etcdStopMember},
	}
}

func etcdOf(s *StepCtx) (*EtcdMembership, error) {
	if s.p.Etcd == nil || s.p.Etcd.Managed == nil {
		return nil, ecode.Errorf(ecode.State, "this master does not manage the cluster's etcd members (restarted with another store record?)")
	}
	return s.p.Etcd, nil
}

// etcdMembers lists the etcd members, with the plan's own member among them
// (nil when it is not one).
func (lu *nodeSetParamsLU) etcdMembers(ctx context.Context, e *EtcdMembership) ([]etcdproc.MemberInfo, *etcdproc.MemberInfo, error) {
	ms, err := e.API.Members(ctx)
	if err != nil {
		return nil, nil, ecode.Errorf(ecode.Environ, "Cannot list the etcd members: %v", err)
	}
	return ms, findMember(ms, lu.Etcd.Name, lu.Etcd.PeerURL), nil
}

// retryReconfig runs f until etcd stops refusing it as unsafe for now.
func retryReconfig(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(etcdReconfigWait)
	for {
		err := f()
		if !errors.Is(err, store.ErrReconfigUnsafe) || time.Now().After(deadline) {
			return err
		}
		if err := sleepCtx(ctx, etcdPoll); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (lu *nodeSetParamsLU) etcdAddLearner(ctx context.Context, s *StepCtx) error {
	e, err := etcdOf(s)
	if err != nil {
		return err
	}
	pl := lu.Etcd
	_, m, err := lu.etcdMembers(ctx, e)
	if err != nil {
		return err
	}
	if m != nil {
		s.Logf(ctx, "etcd member %s (%s) is already in the cluster", pl.Name, pl.PeerURL)
		return nil
	}
	var id uint64
	err = retryReconfig(ctx, func() error {
		var err error
		id, err = e.API.AddLearner(ctx, pl.PeerURL)
		return err
	})
	if err != nil {
		return ecode.Errorf(ecode.Environ, "Cannot add etcd member %s: %v", pl.Name, err)
	}
	s.Logf(ctx, "Added etcd member %s (%x) at %s as a learner", pl.Name, id, pl.PeerURL)
	return nil
}

func (lu *nodeSetParamsLU) etcdStartMember(ctx context.Context, s *StepCtx) error {
	e, err := etcdOf(s)
	if err != nil {
		return err
	}
	pl := lu.Etcd
	node, ok := s.Cfg().Node(pl.NodeUUID)
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "Node %s disappeared", pl.Name)
	}
	ms, m, err := lu.etcdMembers(ctx, e)
	if err != nil {
		return err
	}
	if m == nil {
		return ecode.Errorf(ecode.State, "etcd member %s is no longer in the cluster: repeat the promotion", pl.Name)
	}
	certPEM, keyPEM, err := issueMemberCert(e.CA, pl)
	if err != nil {
		return err
	}
	var reply nodeapi.EtcdMemberStartReply
	args := nodeapi.EtcdMemberStartArgs{Name: pl.Name, ClientURL: pl.ClientURL, PeerURL: pl.PeerURL,
		InitialCluster: etcdproc.InitialCluster(ms, m.ID, pl.Name),
		CertPEM:        string(certPEM), KeyPEM: string(keyPEM), CAPEM: string(e.CA.CertPEM())}
	if err := s.RPC(ctx, node, nodeapi.EtcdMemberStart, args, &reply); err != nil {
		return ecode.Errorf(ecode.Environ, "Node %s cannot start etcd member %s: %v", pl.Name, pl.Name, err)
	}
	s.Logf(ctx, "Started etcd member %s on %s (pid %d, data in %s)", pl.Name, pl.Name, reply.PID, reply.DataDir)
	return nil
}

// issueMemberCert issues the member's certificate: valid for its node's
// address and loopback (etcd checks a peer's certificate against the
// address it connects from), and carrying the names the members admit
// clients and peers by.
func issueMemberCert(ca *pki.CA, pl *etcdPlan) (certPEM, keyPEM []byte, err error) {
	u, err := url.Parse(pl.PeerURL)
	if err != nil {
		return nil, nil, err
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil {
		return nil, nil, ecode.Errorf(ecode.Inval, "etcd member %s: %q is not an IP address", pl.Name, u.Hostname())
	}
	ips := []net.IP{ip}
	if lo := net.IPv4(127, 0, 0, 1); !ip.Equal(lo) {
		ips = append(ips, lo)
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = ca.Issue(pki.IssueRequest{CommonName: "corral-etcd " + pl.Name, Role: pki.RoleEtcdMember,
		DNSNames: []string{etcdproc.ClientHostname, etcdproc.PeerHostname}, IPs: ips, PublicKey: key.Public()})
	if err != nil {
		return nil, nil, fmt.Errorf("issuing the certificate of etcd member %s: %w", pl.Name, err)
	}
	return certPEM, keyPEM, nil
}

func (lu *nodeSetParamsLU) etcdPromote(ctx context.Context, s *StepCtx) error {
	e, err := etcdOf(s)
	if err != nil {
		return err
	}
	pl := lu.Etcd
	deadline := time.Now().Add(etcdCatchUpWait)
	logged := false
	for {
		_, m, err := lu.etcdMembers(ctx, e)
		if err != nil {
			return err
		}
		if m == nil {
			return ecode.Errorf(ecode.State, "etcd member %s is no longer in the cluster: repeat the promotion", pl.Name)
		}
		if !m.Learner {
			s.Logf(ctx, "etcd member %s is a voting member", pl.Name)
			return nil
		}
		err = e.API.PromoteMember(ctx, m.ID)
		switch {
		case err == nil:
			continue // read the list again: the promotion shows there
		case !errors.Is(err, store.ErrLearnerNotReady) && !errors.Is(err, store.ErrReconfigUnsafe):
			return ecode.Errorf(ecode.Environ, "Cannot promote etcd member %s: %v", pl.Name, err)
		case time.Now().After(deadline):
			return ecode.Errorf(ecode.Environ, "etcd member %s did not catch up within %v (it stays a learner, which costs no quorum; see its log on %s, then repeat the promotion): %v",
				pl.Name, etcdCatchUpWait, pl.Name, err)
		}
		if !logged {
			s.Logf(ctx, "Waiting for etcd member %s to catch up with the leader", pl.Name)
			logged = true
		}
		if err := sleepCtx(ctx, etcdPoll); err != nil {
			return err
		}
	}
}

func (lu *nodeSetParamsLU) etcdRemoveMember(ctx context.Context, s *StepCtx) error {
	if lu.Etcd.StopOnly {
		return nil
	}
	e, err := etcdOf(s)
	if err != nil {
		return err
	}
	pl := lu.Etcd
	_, m, err := lu.etcdMembers(ctx, e)
	if err != nil {
		return err
	}
	if m == nil {
		s.Logf(ctx, "etcd member %s is not in the cluster", pl.Name)
		return nil
	}
	err = retryReconfig(ctx, func() error { return e.API.RemoveMember(ctx, m.ID) })
	if err != nil && !errors.Is(err, store.ErrMemberNotFound) {
		return ecode.Errorf(ecode.Environ, "Cannot remove etcd member %s: %v", pl.Name, err)
	}
	s.Logf(ctx, "Removed etcd member %s (%x) from the cluster", pl.Name, m.ID)
	return nil
}

func (lu *nodeSetParamsLU) etcdStopMember(ctx context.Context, s *StepCtx) error {
	pl := lu.Etcd
	if pl.SkipStop {
		s.Logf(ctx, "Node %s is going offline: stop its etcd member and delete its data by hand once it is back", pl.Name)
		return nil
	}
	node, ok := s.Cfg().Node(pl.NodeUUID)
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "Node %s disappeared", pl.Name)
	}
	if err := s.RPC(ctx, node, nodeapi.EtcdMemberStop, nodeapi.EtcdMemberStopArgs{Name: pl.Name}, nil); err != nil {
		if pl.StopOnly {
			s.Logf(ctx, "Warning: could not check node %s for a leftover etcd member: %v", pl.Name, err)
			return nil
		}
		return ecode.Errorf(ecode.Environ, "Node %s cannot stop etcd member %s (it is out of the cluster already): %v", pl.Name, pl.Name, err)
	}
	if !pl.StopOnly {
		s.Logf(ctx, "Stopped etcd member %s and deleted its data", pl.Name)
	}
	return nil
}

// etcdMismatches compares a managed cluster's members with its master
// candidates, for cluster verify: errors for members half added or left
// behind, warnings for candidates without a member. Members named after no
// node (those bootstrap started on the master) are not Corral's to judge.
func etcdMismatches(ms []etcdproc.MemberInfo, nodes []*config.Node, master string) (errs, warns []string) {
	byName := map[string]*config.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	have := map[string]bool{}
	for _, m := range ms {
		switch n := byName[m.Name]; {
		case m.Name == "":
			errs = append(errs, fmt.Sprintf("store: etcd member %x at %v was added but never started: repeat the promotion of its node", m.ID, m.PeerURLs))
		case n == nil:
		case !n.MasterCandidate:
			errs = append(errs, fmt.Sprintf("store: etcd member %s runs on %s, which is not a master candidate: repeat its demotion ('corral node modify --master-candidate=no %s')", m.Name, n.Name, n.Name))
		case m.Learner:
			errs = append(errs, fmt.Sprintf("store: etcd member %s is still a learner: repeat the promotion ('corral node modify --master-candidate=yes %s')", m.Name, n.Name))
		default:
			have[m.Name] = true
		}
	}
	for _, n := range nodes {
		if n.MasterCandidate && n.UUID != master && !have[n.Name] {
			warns = append(warns, fmt.Sprintf("store: master candidate %s runs no etcd member: promote it again to add one ('corral node modify --master-candidate=yes %s')", n.Name, n.Name))
		}
	}
	return errs, warns
}

// verifyEtcdMembers reports where a managed cluster's members and its
// master candidates disagree.
func (lu *clusterVerifyLU) verifyEtcdMembers(ctx context.Context, p *Processor) {
	if p.Etcd == nil || p.Etcd.Managed == nil {
		return
	}
	ms, err := p.Etcd.API.Members(ctx)
	if err != nil {
		lu.errf("store: cannot list the etcd members: %v", err)
		return
	}
	errs, warns := etcdMismatches(ms, p.Cfg.Nodes(), p.Cfg.Cluster().MasterNode)
	for _, e := range errs {
		lu.errf("%s", e)
	}
	for _, w := range warns {
		lu.warnf("%s", w)
	}
}
