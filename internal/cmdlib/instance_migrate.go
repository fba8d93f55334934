package cmdlib

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/iallocator"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
)

// OP_INSTANCE_MIGRATE for instances whose disks every node of the group
// reaches (sharedfile, diskless; rbd and the like once their backends
// exist): the destination qemu waits with -incoming, the source sends its
// memory over qemu's TLS migration with certificates from the cluster CA,
// and the configuration moves the instance only once the destination runs
// it. Cancelling the job before that leaves the source running and kills the
// destination. cleanup=true finds where the instance really runs after a
// crash in the middle and fixes the configuration.

// migrationReport is how often the job log gets a progress line.
const migrationReport = 3 * time.Second

// postcopyAfterPasses is how many passes over the guest's memory pre-copy
// gets before a migration allowed to (migration_caps postcopy-ram) switches
// to post-copy: the guest dirties memory faster than it is sent.
const postcopyAfterPasses = 5

type instanceMigrateLU struct {
	instanceBase
	Source string `json:"source"` // node uuids
	Target string `json:"target"`
	Live   bool   `json:"live"`
	// Failover: the instance is down and allow_failover let the migration
	// become a failover (Ganeti's fallback).
	Failover bool `json:"failover,omitempty"`
}

func (lu *instanceMigrateLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return migrationLocks(&lu.instanceBase, p, op)
}

// migrationLocks takes the instance and, shared, its node and the target (or
// every node when the allocator chooses).
func migrationLocks(b *instanceBase, p *Processor, op *opcodes.Op) []locking.Request {
	name := lockName(p, op.Str("instance_name"))
	b.locked = []string{name}
	reqs := []locking.Request{bgl(locking.Shared), instLock(locking.Exclusive, name)}
	inst, ok := p.Cfg.Instance(op.Str("instance_name"))
	t, tok := p.Cfg.Node(op.Str("target_node"))
	if ok && tok {
		return append(reqs, nodeLock(locking.Shared, inst.PrimaryNode, t.UUID))
	}
	return append(reqs, nodeLock(locking.Shared, locking.All))
}

func (lu *instanceMigrateLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, src, err := lu.load(p, op)
	if err != nil {
		return err
	}
	lu.Source = src.UUID
	if !isExternallyMirrored(inst.DiskTemplate) {
		return ecode.Errorf(ecode.State, "Instance's disk layout '%s' does not allow migrations (its disks are on one node)", inst.DiskTemplate)
	}
	if err := refuseInRescue(p, inst, "migrate it"); err != nil {
		return err
	}
	if op.Bool("cleanup") {
		return nil // the step finds out where the instance runs
	}
	live, err := migrationMode(p, inst, op)
	if err != nil {
		return err
	}
	lu.Live = live
	if err := checkNodeOnline(src); err != nil {
		return err
	}
	running, err := p.running(ctx, inst, src)
	if err != nil {
		return err
	}
	if !running {
		if !op.Bool("allow_failover") {
			return ecode.Errorf(ecode.State, "Instance %s is not running, cannot migrate (allow_failover moves a stopped instance)", inst.Name)
		}
		lu.Failover = true
	}
	target, err := p.migrationTarget(ctx, inst, src, op)
	if err != nil {
		return err
	}
	lu.Target = target.UUID
	return nil
}

// migrationMode is Ganeti's choice of live or not: the mode parameter, the
// obsolete live flag, or the hypervisor's migration_mode.
func migrationMode(p *Processor, inst *config.Instance, op *opcodes.Op) (bool, error) {
	mode := op.Str("mode")
	if op.Has("live") {
		if mode != "" {
			return false, ecode.Errorf(ecode.Inval, "Only one of the 'live' and 'mode' parameters may be given")
		}
		mode = hypervisor.MigrationNonLive
		if op.Bool("live") {
			mode = hypervisor.MigrationLive
		}
	}
	if mode == "" {
		mode = migrationParam(p.Spec(inst), hypervisor.ParamMigrationMode)
	}
	switch mode {
	case hypervisor.MigrationLive, "":
		return true, nil
	case hypervisor.MigrationNonLive:
		return false, nil
	}
	return false, ecode.Errorf(ecode.Inval, "Invalid migration mode '%s' (live, non-live)", mode)
}

// migrationTarget is the target_node, or the node the allocator (the
// built-in one or an external one such as hail) answers to a relocate
// request; checked alike either way. Sharedfile disks live in the
// directory every node of one group shares, so they stay in the group.
func (p *Processor) migrationTarget(ctx context.Context, inst *config.Instance, src *config.Node, op *opcodes.Op) (*config.Node, error) {
	be := config.Fill(p.Cfg.Cluster().BEParams, inst.BEParams)
	nd := need{hv: inst.Hypervisor, template: inst.DiskTemplate, memMiB: config.MemoryMiB(be), vcpus: config.VCPUs(be),
		spindles: config.ParamInt(be["spindle_use"], 1)}
	if inst.DiskTemplate == config.DTSharedFile {
		nd.group = src.Group
	}
	name := op.Str("target_node")
	if name == "" {
		a, err := p.allocatorFor(op.Str("iallocator"))
		if err != nil {
			return nil, err
		}
		ans, err := p.runAllocator(ctx, a, p.allocatorCluster(ctx, inst.Hypervisor, inst.DiskTemplate),
			&iallocator.Relocate{Name: inst.Name, RelocateFrom: []string{src.Name}})
		if err != nil {
			return nil, err
		}
		name = ans.Nodes[0]
	} else if op.Str("iallocator") != "" {
		return nil, ecode.Errorf(ecode.Inval, "Give either target_node or iallocator, not both")
	}
	t, err := p.Cfg.MustNode(name)
	if err != nil {
		return nil, err
	}
	if t.UUID == src.UUID {
		return nil, ecode.Errorf(ecode.Inval, "Instance %s is already on node %s", inst.Name, t.Name)
	}
	if err := checkNodeOnline(t); err != nil {
		return nil, err
	}
	if err := checkNodeVMCapable(t); err != nil {
		return nil, err
	}
	if t.Drained {
		return nil, ecode.Errorf(ecode.State, "Can't use drained node %s", t.Name)
	}
	if inst.DiskTemplate == config.DTSharedFile && t.Group != src.Group {
		return nil, ecode.Errorf(ecode.Inval, "Node %s is in another node group than %s: the instance's sharedfile disks are shared within a group", t.Name, src.Name)
	}
	// Ganeti's CheckTargetNodeIPolicy: another group's policy applies.
	if err := p.checkTargetGroupPolicy(inst, src, t, op.Bool("ignore_ipolicy")); err != nil {
		return nil, err
	}
	if err := p.checkNodeRoom(ctx, t, nd, inst.UUID); err != nil {
		return nil, err
	}
	return t, nil
}

func (lu *instanceMigrateLU) Steps() []Step {
	return []Step{
		{"prepare-destination", func(ctx context.Context, s *StepCtx) error {
			if s.Op().Bool("cleanup") || lu.Failover {
				return nil
			}
			return lu.prepare(ctx, s)
		}},
		{"migrate", func(ctx context.Context, s *StepCtx) error {
			switch {
			case s.Op().Bool("cleanup"):
				return lu.cleanup(ctx, s)
			case lu.Failover:
				s.Logf(ctx, "Instance %s is not running: failing it over instead", lu.Name)
				return lu.switchPrimary(ctx, s)
			}
			return lu.migrate(ctx, s)
		}},
		{"stop-source", func(ctx context.Context, s *StepCtx) error {
			if s.Op().Bool("cleanup") || lu.Failover {
				return nil
			}
			inst, src, err := lu.sourceOf(s)
			if err != nil {
				return err
			}
			return s.RPC(ctx, src, nodeapi.MigrationDrop, nodeapi.InstanceArgs{Instance: s.p.Spec(inst)}, nil)
		}},
	}
}

func (lu *instanceMigrateLU) Result() any { return nil }

func (lu *instanceMigrateLU) sourceOf(s *StepCtx) (*config.Instance, *config.Node, error) {
	inst, err := s.Cfg().MustInstance(lu.UUID)
	if err != nil {
		return nil, nil, err
	}
	src, err := s.Cfg().MustNode(lu.Source)
	return inst, src, err
}

// migrationParam is an hvparam of the instance, its hypervisor's default
// when neither the cluster nor the instance sets it.
func migrationParam(spec nodeapi.InstanceSpec, key string) string {
	if v, ok := spec.HVParams[key]; ok {
		return v
	}
	return hypervisor.DefaultParams(spec.Hypervisor)[key]
}

func migrationInt(spec nodeapi.InstanceSpec, key string) int {
	n, _ := strconv.Atoi(migrationParam(spec, key))
	return n
}

// migrationPort is where the destination listens.
func migrationPort(spec nodeapi.InstanceSpec) int {
	return migrationInt(spec, hypervisor.ParamMigrationPort)
}

// migrationCert has node sign a request for a key it keeps, with the
// cluster CA.
func (s *StepCtx) migrationCert(ctx context.Context, node *config.Node, instUUID string) (string, error) {
	if s.p.Certs == nil {
		return "", ecode.Errorf(ecode.Environ, "this master cannot sign certificates: no TLS migration possible")
	}
	var r nodeapi.MigrationCSRReply
	if err := s.RPC(ctx, node, nodeapi.MigrationCSR, nodeapi.MigrationCSRArgs{InstanceUUID: instUUID}, &r); err != nil {
		return "", err
	}
	var ips []net.IP
	if ip := net.ParseIP(node.PrimaryIP); ip != nil {
		ips = append(ips, ip)
	}
	cert, err := s.p.Certs.SignNodeCert([]byte(r.CSR), pki.RoleMigration, node.Name, ips)
	if err != nil {
		return "", ecode.ExecErrorf("signing the migration certificate of %s: %w", node.Name, err)
	}
	return string(cert), nil
}

// prepare starts the destination, waiting for the instance.
func (lu *instanceMigrateLU) prepare(ctx context.Context, s *StepCtx) error {
	inst, src, err := lu.sourceOf(s)
	if err != nil {
		return err
	}
	dst, err := s.Cfg().MustNode(lu.Target)
	if err != nil {
		return err
	}
	spec := s.p.Spec(inst)
	s.Logf(ctx, "Migrating instance %s from %s to %s (%s)", inst.Name, src.Name, dst.Name, modeName(lu.Live))
	// Each end gets its certificate in the call that uses it: a restarted
	// node daemon has lost the key of an earlier request.
	cert, err := s.migrationCert(ctx, dst, inst.UUID)
	if err != nil {
		return err
	}
	args := nodeapi.MigrationAcceptArgs{Instance: spec, Address: dst.PrimaryIP, Port: migrationPort(spec), CertPEM: cert,
		Postcopy: postcopyAllowed(spec, lu.Live)}
	return s.RPC(ctx, dst, nodeapi.MigrationAccept, args, nil)
}

func modeName(live bool) string {
	if live {
		return hypervisor.MigrationLive
	}
	return hypervisor.MigrationNonLive
}

func postcopyAllowed(spec nodeapi.InstanceSpec, live bool) bool {
	for _, c := range hypervisor.MigrationCaps(map[string]string{hypervisor.ParamMigrationCaps: migrationParam(spec, hypervisor.ParamMigrationCaps)}) {
		if c == hypervisor.CapPostcopy {
			return live
		}
	}
	return false
}

// migrate sends the instance and follows it until the destination runs it,
// then moves it in the configuration.
func (lu *instanceMigrateLU) migrate(ctx context.Context, s *StepCtx) error {
	inst, src, err := lu.sourceOf(s)
	if err != nil {
		return err
	}
	if inst.PrimaryNode == lu.Target {
		return nil // a repeated step: already moved
	}
	dst, err := s.Cfg().MustNode(lu.Target)
	if err != nil {
		return err
	}
	spec := s.p.Spec(inst)
	args := nodeapi.InstanceArgs{Instance: spec}
	var st hypervisor.MigrationStatus
	if err := s.RPC(ctx, src, nodeapi.MigrationStatus, args, &st); err != nil {
		return err
	}
	if st.Status != hypervisor.MigrationCompleted && (st.Finished() || st.Status == hypervisor.MigrationNone) {
		cert, err := s.migrationCert(ctx, src, inst.UUID)
		if err != nil {
			return err
		}
		bw, down := migrationInt(spec, hypervisor.ParamMigrationBandwidth), migrationInt(spec, hypervisor.ParamMigrationDowntime)
		start := nodeapi.MigrationStartArgs{Instance: spec, Address: dst.PrimaryIP, Port: migrationPort(spec), TLSHostname: dst.Name,
			CertPEM: cert, Live: lu.Live, BandwidthMiB: bw, DowntimeMS: down, Postcopy: postcopyAllowed(spec, lu.Live)}
		if err := s.RPC(ctx, src, nodeapi.MigrationStart, start, nil); err != nil {
			return err
		}
	}
	st, err = lu.follow(ctx, s, src, spec)
	if err != nil {
		if st.Status == hypervisor.MigrationFailed {
			// The source often knows only that the stream broke; the
			// destination may say why.
			var dstSt hypervisor.MigrationStatus
			if derr := s.RPC(ctx, dst, nodeapi.MigrationStatus, args, &dstSt); derr == nil && dstSt.Error != "" {
				return fmt.Errorf("%w (destination %s: %s)", err, dst.Name, dstSt.Error)
			}
		}
		return err
	}
	s.Logf(ctx, "Migration completed in %d ms, downtime %d ms (%d MiB sent)", st.TotalMS, st.DowntimeMS, st.TransferredMiB)
	if err := s.RPC(ctx, dst, nodeapi.MigrationFinish, args, nil); err != nil {
		return err
	}
	inst.PrimaryNode = dst.UUID
	s.Tx().PutInstance(inst)
	return nil
}

// migrationStatusPatience is how long follow goes on asking a source whose
// status calls fail before the migration is given up.
const migrationStatusPatience = time.Minute

// follow polls the source until the migration ends, logging progress and
// switching to post-copy when pre-copy does not converge.
func (lu *instanceMigrateLU) follow(ctx context.Context, s *StepCtx, src *config.Node, spec nodeapi.InstanceSpec) (hypervisor.MigrationStatus, error) {
	args := nodeapi.InstanceArgs{Instance: spec}
	postcopy := postcopyAllowed(spec, lu.Live)
	lastReport := time.Now()
	tick := time.NewTicker(hypervisor.MigrationPollInterval)
	defer tick.Stop()
	var silentSince time.Time
	for {
		var st hypervisor.MigrationStatus
		if err := s.RPC(ctx, src, nodeapi.MigrationStatus, args, &st); err != nil {
			// qemu may not answer for a while as the migration completes
			// (it flushes and hands over its disks: with rbd, librbd
			// calls under qemu's main lock); only a long silence fails.
			switch {
			case silentSince.IsZero():
				silentSince = time.Now()
				s.Logf(ctx, "No migration status from node %s yet (%v); asking again", src.Name, err)
			case time.Since(silentSince) > migrationStatusPatience:
				return st, err
			}
			select {
			case <-ctx.Done():
				return st, ctx.Err()
			case <-tick.C:
			}
			continue
		}
		silentSince = time.Time{}
		switch st.Status {
		case hypervisor.MigrationCompleted:
			return st, nil
		case hypervisor.MigrationFailed, hypervisor.MigrationCancelled, hypervisor.MigrationNone:
			msg := st.Error
			if msg == "" {
				msg = st.Status
			}
			return st, ecode.ExecErrorf("migration of %s failed: %s", spec.Name, msg)
		}
		if postcopy && st.Status == hypervisor.MigrationActive && st.DirtySyncs >= postcopyAfterPasses {
			s.Logf(ctx, "Pre-copy does not converge after %d passes (%d MiB left): switching to post-copy", st.DirtySyncs, st.RemainingMiB)
			if err := s.RPC(ctx, src, nodeapi.MigrationPostcopy, args, nil); err != nil {
				return st, err
			}
			postcopy = false
		}
		if time.Since(lastReport) >= migrationReport {
			lastReport = time.Now()
			s.Logf(ctx, "Migration %s: %d/%d MiB sent, %d MiB left, pass %d, %d ms", st.Status, st.TransferredMiB, st.TotalMiB, st.RemainingMiB, st.DirtySyncs, st.TotalMS)
		}
		if s.Canceled() {
			return st, engine.ErrCanceledByRequest
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-tick.C:
		}
	}
}

// Revert undoes a migration that did not complete: the source keeps (or
// goes back to) running, the destination's process goes. A migration qemu
// reports complete is never undone: the destination runs the guest.
func (lu *instanceMigrateLU) Revert(ctx context.Context, s *StepCtx, failed error) {
	if s.Op().Bool("cleanup") || lu.Failover || lu.Target == "" {
		return
	}
	inst, src, err := lu.sourceOf(s)
	if err != nil || inst.PrimaryNode != lu.Source {
		return
	}
	dst, ok := s.Cfg().Node(lu.Target)
	if !ok {
		return
	}
	args := nodeapi.InstanceArgs{Instance: s.p.Spec(inst)}
	var st hypervisor.MigrationStatus
	if err := s.RPC(ctx, src, nodeapi.MigrationStatus, args, &st); err == nil {
		if st.Status == hypervisor.MigrationCompleted || st.Status == hypervisor.MigrationPostcopy {
			s.Logf(ctx, "Migration of %s failed (%v) after the destination %s took the guest over: run migrate with cleanup", inst.Name, failed, dst.Name)
			return
		}
	}
	if err := s.RPC(ctx, src, nodeapi.MigrationCancel, args, nil); err != nil {
		s.Logf(ctx, "Could not cancel the migration on %s: %v", src.Name, err)
	}
	if err := s.RPC(ctx, dst, nodeapi.MigrationDrop, args, nil); err != nil {
		s.Logf(ctx, "Could not stop the destination process of %s on %s: %v", inst.Name, dst.Name, err)
	}
	if errors.Is(failed, engine.ErrCanceledByRequest) {
		s.Logf(ctx, "Migration of %s cancelled: it keeps running on %s", inst.Name, src.Name)
		return
	}
	s.Logf(ctx, "Migration of %s failed: it keeps running on %s", inst.Name, src.Name)
}

// switchPrimary records the target as the instance's node (a failover of a
// stopped instance).
func (lu *instanceMigrateLU) switchPrimary(ctx context.Context, s *StepCtx) error {
	inst, err := s.Cfg().MustInstance(lu.UUID)
	if err != nil {
		return err
	}
	inst.PrimaryNode = lu.Target
	s.Tx().PutInstance(inst)
	return nil
}
