package cmdlib

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/seconds"
)

// Limits used by verify.
const (
	maxClockSkew   = 150 * time.Second // Ganeti's NODE_MAX_CLOCK_SKEW
	certWarnBefore = 30 * 24 * time.Hour
)

type clusterVerifyLU struct {
	Messages []string `json:"messages"`
	Errors   int      `json:"errors"`
	Warnings int      `json:"warnings"`
}

func (lu *clusterVerifyLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared),
		instLock(locking.Shared, locking.All), nodeLock(locking.Shared, locking.All)}
}

func (lu *clusterVerifyLU) errf(format string, args ...any) {
	lu.Errors++
	lu.Messages = append(lu.Messages, "E: "+fmt.Sprintf(format, args...))
}

func (lu *clusterVerifyLU) warnf(format string, args ...any) {
	lu.Warnings++
	lu.Messages = append(lu.Messages, "W: "+fmt.Sprintf(format, args...))
}

func (lu *clusterVerifyLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	return nil
}

func (lu *clusterVerifyLU) Steps() []Step {
	return []Step{{"verify", func(ctx context.Context, s *StepCtx) error {
		lu.Messages, lu.Errors, lu.Warnings = nil, 0, 0
		lu.verifyConfig(s.p)
		lu.verifyNetworks(s.p)
		lu.verifyCandidates(s.p)
		if s.p.StoreHealth != nil {
			lu.verifyStore(ctx, s.p)
		}
		lu.verifyEtcdMembers(ctx, s.p)
		lu.verifyOS(ctx, s.p)
		lu.verifyInstancePolicies(s.p)
		for _, n := range s.Cfg().Nodes() {
			lu.verifyNode(ctx, s.p, n)
		}
		lu.verifyMasterIP(ctx, s.p)
		lu.verifySharedDirs(ctx, s.p)
		for _, m := range lu.Messages {
			s.Logf(ctx, "%s", m)
		}
		s.Logf(ctx, "Verify finished: %d error(s), %d warning(s)", lu.Errors, lu.Warnings)
		return nil
	}}}
}

func (lu *clusterVerifyLU) Result() any {
	msgs := lu.Messages
	if msgs == nil {
		msgs = []string{}
	}
	return map[string]any{"ok": lu.Errors == 0, "errors": lu.Errors, "warnings": lu.Warnings, "messages": msgs,
		"jobs": lu.ganetiJobs()}
}

// ganetiJobs is the "jobs" key of Ganeti's answer (constants.JOB_IDS_KEY):
// Ganeti's OP_CLUSTER_VERIFY submits verification jobs and lists them as
// [submitted, job id or error], and gnt-cluster verify waits for each and
// exits 1 when one failed. Corral verifies within this job, so it lists
// none, except that errors found are listed the way Ganeti lists a job it
// could not submit, [false, message], so that gnt-cluster verify prints
// the message and exits 1 as it does when Ganeti finds errors.
func (lu *clusterVerifyLU) ganetiJobs() []any {
	if lu.Errors == 0 {
		return []any{}
	}
	return []any{[]any{false, fmt.Sprintf("Cluster verification found %d error(s)", lu.Errors)}}
}

func (lu *clusterVerifyLU) verifyConfig(p *Processor) {
	c := p.Cfg.Cluster()
	if _, ok := p.Cfg.Node(c.MasterNode); !ok {
		lu.errf("cluster: master node %s is not in the configuration", c.MasterNode)
	}
	for _, n := range p.Cfg.Nodes() {
		if _, ok := p.Cfg.Group(n.Group); !ok {
			lu.errf("node %s: node group %s does not exist", n.Name, n.Group)
		}
	}
	macs := map[string]string{}
	for _, i := range p.Cfg.Instances() {
		if _, ok := p.Cfg.Node(i.PrimaryNode); !ok {
			lu.errf("instance %s: primary node %s does not exist", i.Name, i.PrimaryNode)
		}
		if !contains(c.EnabledHypervisors, i.Hypervisor) {
			lu.errf("instance %s: hypervisor %s is not enabled", i.Name, i.Hypervisor)
		}
		if !contains(c.EnabledDiskTemplates, i.DiskTemplate) {
			lu.errf("instance %s: disk template %s is not enabled", i.Name, i.DiskTemplate)
		}
		for _, n := range i.NICs {
			if other, dup := macs[n.MAC]; dup {
				lu.errf("instance %s: MAC %s is also used by instance %s", i.Name, n.MAC, other)
			}
			macs[n.MAC] = i.Name
		}
	}
}

func (lu *clusterVerifyLU) verifyNode(ctx context.Context, p *Processor, n *config.Node) {
	if n.Offline {
		lu.Messages = append(lu.Messages, fmt.Sprintf("I: node %s is offline, skipped", n.Name))
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var info nodeapi.NodeInfoReply
	if err := p.RPC.Call(cctx, n, nodeapi.NodeInfo, "", nodeapi.NodeInfoArgs{}, &info); err != nil {
		lu.errf("node %s: not reachable: %v", n.Name, err)
		return
	}
	if info.Version != Version {
		lu.errf("node %s: runs version %s, the master runs %s", n.Name, info.Version, Version)
	}
	if skew := clockSkew(time.Now(), info.Time); skew > maxClockSkew {
		lu.errf("node %s: clock skew of %s (more than %s)", n.Name, skew.Round(time.Second), maxClockSkew)
	}
	if info.CertNotAfter > 0 {
		left := time.Until(time.Unix(int64(info.CertNotAfter), 0))
		switch {
		case left <= 0:
			lu.errf("node %s: node certificate expired %s ago", n.Name, fmtAge(-left))
		case left < certWarnBefore:
			lu.warnf("node %s: node certificate expires in %s", n.Name, fmtAge(left))
		}
	}
	if !n.VMCapable {
		return
	}
	hvs := p.Cfg.Cluster().EnabledHypervisors
	var running []nodeapi.RunningInstance
	if err := p.RPC.Call(cctx, n, nodeapi.InstanceList, "", nodeapi.InstanceListArgs{Hypervisors: hvs}, &running); err != nil {
		lu.errf("node %s: cannot list instances: %v", n.Name, err)
		return
	}
	byUUID := map[string]*config.Instance{}
	for _, i := range p.Cfg.Instances() {
		byUUID[i.UUID] = i
	}
	seen := map[string]bool{}
	for _, r := range running {
		i, ok := byUUID[r.UUID]
		switch {
		case !ok:
			lu.errf("node %s: orphan instance %s (uuid %s, pid %d) runs but is not in the configuration", n.Name, r.Name, r.UUID, r.PID)
		case i.PrimaryNode != n.UUID:
			lu.errf("instance %s: runs on node %s, which is not its primary", i.Name, n.Name)
		case i.AdminState != config.AdminUp:
			lu.errf("instance %s: running on %s but its admin state is %s", i.Name, n.Name, i.AdminState)
		}
		seen[r.UUID] = true
	}
	var procs []nodeapi.HypervisorProcess
	if err := p.RPC.Call(cctx, n, nodeapi.ProcessList, "", struct{}{}, &procs); err != nil {
		lu.errf("node %s: cannot list hypervisor processes: %v", n.Name, err)
	}
	for _, pr := range procs {
		if pr.UID == 0 {
			lu.errf("node %s: qemu process %d (uuid %s) runs as root", n.Name, pr.PID, pr.UUID)
		}
		if !seen[pr.UUID] {
			lu.errf("node %s: orphan qemu process %d (uuid %q) is not managed by this node daemon", n.Name, pr.PID, pr.UUID)
		}
	}
	var disks []nodeapi.FoundDisk
	if err := p.RPC.Call(cctx, n, nodeapi.DiskList, "", struct{}{}, &disks); err != nil {
		lu.errf("node %s: cannot list disks: %v", n.Name, err)
		return
	}
	found := map[string]nodeapi.FoundDisk{}
	for _, d := range disks {
		found[d.DiskUUID] = d
		i, ok := byUUID[d.InstanceUUID]
		if !ok || i.PrimaryNode != n.UUID {
			lu.warnf("node %s: orphan disk file %s (%d MiB) belongs to no instance on this node", n.Name, d.Path, d.SizeMiB)
			continue
		}
		if d.Mode&0o077 != 0 {
			lu.errf("instance %s: disk file %s has mode %04o, other users can read it", i.Name, d.Path, d.Mode&0o7777)
		}
	}
	var insts []*config.Instance
	for _, i := range byUUID {
		if i.PrimaryNode == n.UUID {
			insts = append(insts, i)
		}
	}
	sort.Slice(insts, func(a, b int) bool { return insts[a].Name < insts[b].Name })
	for _, i := range insts {
		if i.AdminState == config.AdminUp && !seen[i.UUID] {
			lu.errf("instance %s: should be running on %s but is not", i.Name, n.Name)
		}
		if i.DiskTemplate != config.DTFile {
			continue
		}
		for idx, d := range i.Disks {
			f, ok := found[d.UUID]
			switch {
			case !ok:
				lu.errf("instance %s: disk %d is missing on node %s", i.Name, idx, n.Name)
			case f.SizeMiB != d.SizeMiB:
				lu.errf("instance %s: disk %d is %d MiB on node %s, the configuration says %d MiB", i.Name, idx, f.SizeMiB, n.Name, d.SizeMiB)
			}
		}
	}
}

// verifyCandidates checks the master candidate pool as Ganeti does: as
// many candidates as the pool size asks for, or every node able to be one.
func (lu *clusterVerifyLU) verifyCandidates(p *Processor) {
	want, have, capable := p.Cfg.Cluster().CandidatePoolSize, 0, 0
	for _, n := range p.Cfg.Nodes() {
		if n.Offline || n.Drained || !n.MasterCapable {
			continue
		}
		capable++
		if n.MasterCandidate {
			have++
		}
	}
	if need := min(want, capable); have < need {
		lu.warnf("cluster: %d master candidate(s), %d wanted (candidate_pool_size %d, %d node(s) able to be one): promote nodes with 'corral node modify --master-candidate=yes'",
			have, need, want, capable)
	}
}

// verifyStore checks every member of a replicated store: all must answer
// and know a leader, and fewer than three members survive no machine loss.
func (lu *clusterVerifyLU) verifyStore(ctx context.Context, p *Processor) {
	ms, err := p.StoreHealth(ctx)
	if err != nil {
		lu.errf("store: cannot list the etcd members: %v", err)
		return
	}
	healthy, leaders := 0, 0
	for _, m := range ms {
		if !m.Healthy {
			lu.errf("store: etcd member %s (%s) is unhealthy: %s", m.Name, m.Endpoint, m.Err)
			continue
		}
		healthy++
		if m.Leader {
			leaders++
		}
	}
	switch {
	case healthy <= len(ms)/2:
		lu.errf("store: only %d of %d etcd members are healthy: no quorum", healthy, len(ms))
	case leaders != 1:
		lu.errf("store: %d etcd members say they lead", leaders)
	}
	if len(ms) < 3 {
		lu.warnf("store: %d etcd member(s): the cluster cannot lose a machine without losing its store (run 3 or 5)", len(ms))
	}
}

// clockSkew is how far a node's clock (seconds since the epoch, as it
// reported them) is from now, saturated: a node reporting an absurd time
// must show as skewed, not wrap around to no skew at all.
func clockSkew(now time.Time, nodeTime float64) time.Duration {
	return seconds.Duration(math.Abs(float64(now.UnixMicro())/1e6 - nodeTime))
}
