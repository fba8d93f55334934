package cmdlib

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/jobqueue"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/seconds"
)

// ---- test delay

type testDelayLU struct {
	Done int `json:"done"`
}

func (lu *testDelayLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	if op.Bool("no_locks") {
		return nil
	}
	var uuids []string
	for _, n := range op.Strings("on_nodes") {
		if node, ok := p.Cfg.Node(n); ok {
			uuids = append(uuids, node.UUID)
		}
	}
	reqs := []locking.Request{bgl(locking.Shared)}
	if len(uuids) > 0 {
		reqs = append(reqs, nodeLock(locking.Shared, uuids...))
	}
	return reqs
}

func (lu *testDelayLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	if d := op.Float("duration"); d < 0 || math.IsNaN(d) {
		return ecode.Errorf(ecode.Inval, "Delay duration must be non-negative")
	}
	if op.Int("repeat") < 0 {
		return ecode.Errorf(ecode.Inval, "Repeat count must be non-negative")
	}
	for _, n := range op.Strings("on_nodes") {
		if _, err := p.Cfg.MustNode(n); err != nil {
			return err
		}
	}
	if ev := op.Str("wake_event"); ev != "" {
		if err := engine.CheckEventName(ev); err != nil {
			return err
		}
		if len(op.Strings("on_nodes")) > 0 || op.Int("repeat") > 0 {
			return ecode.Errorf(ecode.Inval, "wake_event cannot be combined with on_nodes or repeat")
		}
	}
	return nil
}

func (lu *testDelayLU) Steps() []Step {
	return []Step{{"delay", func(ctx context.Context, s *StepCtx) error {
		op := s.Op()
		d := seconds.Duration(op.Float("duration"))
		if ev := op.Str("wake_event"); ev != "" {
			return lu.awaitEvent(ctx, s, ev, d)
		}
		rounds := op.Int("repeat")
		if rounds == 0 {
			rounds = 1
		}
		for i := 0; i < rounds; i++ {
			if op.Int("repeat") > 0 {
				s.Logf(ctx, "Test delay iteration %d/%d", i+1, rounds)
			}
			if err := lu.once(ctx, s, d); err != nil {
				return err
			}
		}
		return nil
	}}}
}

func (lu *testDelayLU) once(ctx context.Context, s *StepCtx, d time.Duration) error {
	op := s.Op()
	errs := make(chan error, len(op.Strings("on_nodes"))+1)
	n := 0
	for _, name := range op.Strings("on_nodes") {
		node, err := s.Cfg().MustNode(name)
		if err != nil {
			return err
		}
		n++
		go func() {
			errs <- s.p.RPC.Call(ctx, node, nodeapi.TestDelay, "", nodeapi.DelayArgs{Duration: d.Seconds()}, nil)
		}()
	}
	// Like Ganeti's LUTestDelay, a delay with no node to sleep on (not on
	// the master, no on_nodes) sleeps in the job itself.
	if d > 0 && (op.Bool("on_master") || n == 0) {
		t := time.NewTimer(d)
		defer t.Stop()
		// An interruptible delay notices a kill-cancel while it sleeps.
		var poll <-chan time.Time
		if op.Bool("interruptible") {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			poll = tick.C
		}
	wait:
		for {
			select {
			case <-t.C:
				break wait
			case <-poll:
				if s.Canceled() {
					return jobqueue.ErrCanceled
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	for ; n > 0; n-- {
		if err := <-errs; err != nil {
			return ecode.ExecErrorf("Error during master delay test: %v", err)
		}
	}
	return nil
}

// awaitEvent suspends the delay step until event is delivered or d
// passes, then logs which came first.
func (lu *testDelayLU) awaitEvent(ctx context.Context, s *StepCtx, event string, d time.Duration) error {
	switch s.Woken() {
	case engine.WokenByEvent:
		s.Logf(ctx, "Test delay woken by event %s", event)
		return nil
	case engine.WokenByDeadline:
		s.Logf(ctx, "Test delay ended after %s without event %s", d, event)
		return nil
	}
	s.Logf(ctx, "Test delay waiting for event %s for at most %s", event, d)
	return s.Suspend(ctx, time.Now().Add(d), event)
}

func (lu *testDelayLU) Result() any { return nil }

// UnsafeToRepeat declares the delay step unsafe when the op asks for it:
// sleeping twice harms nothing, which makes it the one step through which
// tests can interrupt an unsafe step on purpose.
func (lu *testDelayLU) UnsafeToRepeat(op *opcodes.Op, i int) string {
	if !op.Bool("unsafe_to_repeat") {
		return ""
	}
	return "nothing: an OP_TEST_DELAY only sleeps (unsafe_to_repeat is for testing)"
}

// ---- cluster set params

// setClusterBEParams checks and applies new backend defaults: each value,
// then the filled defaults, which every instance inherits, against minmem
// <= maxmem and the cluster's instance policy.
func setClusterBEParams(c *config.Cluster, upd map[string]any) error {
	checked, err := checkBEParams(upd, false)
	if err != nil {
		return err
	}
	be := config.Fill(c.BEParams, checked)
	if err := checkMemoryOrder(be); err != nil {
		return err
	}
	if v := clusterPolicy(c).violations(beSpecs(be, true)); len(v) > 0 {
		return ecode.Errorf(ecode.Inval, "The cluster's default backend parameters would violate its instance policy: %s", strings.Join(v, ", "))
	}
	c.BEParams = be
	return nil
}

type clusterSetParamsLU struct {
	Cluster *config.Cluster `json:"cluster"`
	SSHSync bool            `json:"ssh_sync,omitempty"` // the SSH files follow a changed switch
	// MasterIPMoved: the cluster IP's parameters change; OldMasterIP are
	// the old ones when there was a cluster IP (masterip.go).
	MasterIPMoved bool                  `json:"master_ip_moved,omitempty"`
	OldMasterIP   *nodeapi.MasterIPArgs `json:"old_master_ip,omitempty"`
}

func (lu *clusterSetParamsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Exclusive)}
}

var macPrefixRE = regexp.MustCompile(`^[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$`)

func (lu *clusterSetParamsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	c := p.Cfg.Cluster()
	changed := false
	ints := []struct {
		name string
		dst  *int
		min  int
	}{
		{"candidate_pool_size", &c.CandidatePoolSize, 1},
		{"max_running_jobs", &c.MaxRunningJobs, 1},
		{"max_tracked_jobs", &c.MaxTrackedJobs, 1},
		{"job_queue_size", &c.JobQueueSize, 1},
	}
	for _, f := range ints {
		if v, ok := op.Params[f.name].(float64); ok {
			if int(v) < f.min {
				return ecode.Errorf(ecode.Inval, "%s must be at least %d", f.name, f.min)
			}
			*f.dst, changed = int(v), true
		}
	}
	if v := op.Str("mac_prefix"); v != "" {
		v = strings.ToLower(v)
		if !macPrefixRE.MatchString(v) {
			return ecode.Errorf(ecode.Inval, "Invalid MAC prefix '%s' (three hex octets, e.g. aa:00:00)", v)
		}
		c.MACPrefix, changed = v, true
	}
	if v := op.Str("file_storage_dir"); v != "" {
		c.FileStorageDir, changed = v, true
	}
	if v, ok := op.Params["shared_file_storage_dir"].(string); ok && v != c.SharedFileStorageDir {
		if err := checkSharedFileDir(p, v); err != nil {
			return err
		}
		c.SharedFileStorageDir, changed = v, true
	}
	if v := op.Str("default_iallocator"); v != "" {
		c.DefaultIAllocator, changed = v, true
	}
	if v := op.Params["auto_failover"]; v != nil {
		b, ok := v.(bool)
		if !ok {
			return ecode.Errorf(ecode.Inval, "Parameter auto_failover must be a boolean")
		}
		c.AutoFailover, changed = b, true
	}
	if stateGiven(op, "hv_state") || stateGiven(op, "disk_state") {
		if err := mergeClusterState(op, c); err != nil {
			return err
		}
		changed = true
	}
	if l, ok := op.Params["enabled_hypervisors"].([]any); ok {
		var hvs []string
		for _, h := range l {
			s, _ := h.(string)
			if _, known := c.HVParams[s]; !known {
				return ecode.Errorf(ecode.Inval, "Unknown hypervisor '%s'", s)
			}
			hvs = append(hvs, s)
		}
		if len(hvs) == 0 {
			return ecode.Errorf(ecode.Inval, "At least one hypervisor must be enabled")
		}
		for _, i := range p.Cfg.Instances() {
			if !slices.Contains(hvs, i.Hypervisor) {
				return ecode.Errorf(ecode.State, "Hypervisor %s is used by instance %s and cannot be disabled", i.Hypervisor, i.Name)
			}
		}
		c.EnabledHypervisors, changed = hvs, true
	}
	if l, ok := op.Params["enabled_disk_templates"].([]any); ok {
		var ts []string
		for _, t := range l {
			s, _ := t.(string)
			if !diskTemplateSupported(s) {
				return ecode.Errorf(ecode.Inval, "Disk template '%s' is not supported (%s)", s, strings.Join(supportedDiskTemplates, ", "))
			}
			ts = append(ts, s)
		}
		for _, i := range p.Cfg.Instances() {
			if !slices.Contains(ts, i.DiskTemplate) {
				return ecode.Errorf(ecode.State, "Disk template %s is used by instance %s and cannot be disabled", i.DiskTemplate, i.Name)
			}
		}
		c.EnabledDiskTemplates, changed = ts, true
	}
	if m, ok := op.Params["hvparams"].(map[string]any); ok {
		for hv, v := range m {
			upd, ok := v.(map[string]any)
			if !ok {
				return ecode.Errorf(ecode.Inval, "hvparams for %s must be a dict", hv)
			}
			if _, known := c.HVParams[hv]; !known {
				return ecode.Errorf(ecode.Inval, "Unknown hypervisor '%s'", hv)
			}
			checked, err := checkHVParams(c, hv, upd)
			if err != nil {
				return err
			}
			c.HVParams[hv] = config.Fill(c.HVParams[hv], checked)
			changed = true
		}
	}
	if m, ok := op.Params["beparams"].(map[string]any); ok {
		if err := setClusterBEParams(c, m); err != nil {
			return err
		}
		changed = true
	}
	if m, ok := op.Params["nicparams"].(map[string]any); ok {
		for k, v := range m {
			if k != "mode" && k != "link" && k != "vlan" {
				return ecode.Errorf(ecode.Inval, "Unknown NIC parameter '%s'", k)
			}
			if k == "mode" && v != "bridged" && v != "routed" {
				return ecode.Errorf(ecode.Inval, "Invalid NIC mode '%v' (bridged or routed)", v)
			}
		}
		c.NICParams = config.Fill(c.NICParams, m)
		changed = true
	}
	for _, f := range []struct {
		param string
		dst   *map[string]config.Params
	}{{"osparams", &c.OSParams}, {"osparams_private_cluster", &c.OSParamsPrivate}} {
		m, ok := op.Params[f.param].(map[string]any)
		if !ok {
			continue
		}
		if *f.dst == nil {
			*f.dst = map[string]config.Params{}
		}
		for osName, v := range m {
			upd, ok := v.(map[string]any)
			if !ok {
				return ecode.Errorf(ecode.Inval, "%s for %s must be a dict", f.param, osName)
			}
			(*f.dst)[osName] = updateParams((*f.dst)[osName], upd)
			if len((*f.dst)[osName]) == 0 {
				delete(*f.dst, osName) // as Ganeti: an OS left without parameters goes
			}
		}
		changed = true
	}
	for _, f := range []struct {
		name string
		dst  *[]string
	}{{"hidden_os", &c.HiddenOS}, {"blacklisted_os", &c.BlacklistedOS}} {
		l, ok := op.Params[f.name].([]any)
		if !ok {
			if op.Params[f.name] != nil {
				return ecode.Errorf(ecode.Inval, "%s must be a list of [\"add\"|\"remove\", name]", f.name)
			}
			continue
		}
		for _, e := range l {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return ecode.Errorf(ecode.Inval, "%s entries must be [\"add\"|\"remove\", name]", f.name)
			}
			action, _ := pair[0].(string)
			name, _ := pair[1].(string)
			switch action {
			case "add":
				if !slices.Contains(*f.dst, name) {
					*f.dst = append(*f.dst, name)
				}
			case "remove":
				*f.dst = slices.DeleteFunc(*f.dst, func(s string) bool { return s == name })
			default:
				return ecode.Errorf(ecode.Inval, "%s: invalid action '%s' (add or remove)", f.name, action)
			}
		}
		changed = true
	}
	resync, err := setSSHParams(op, c, &changed)
	if err != nil {
		return err
	}
	lu.SSHSync = resync
	if err := setUIDPool(op, c, &changed); err != nil {
		return err
	}
	if err := setOSHVParams(op, c, &changed); err != nil {
		return err
	}
	if err := setClusterIPolicy(op, c, &changed); err != nil {
		return err
	}
	if lu.OldMasterIP, lu.MasterIPMoved, err = setMasterNetwork(p, op, c, &changed); err != nil {
		return err
	}
	if !changed {
		return ecode.Errorf(ecode.Inval, "Please give at least one of the parameters")
	}
	lu.Cluster = c
	return nil
}

func (lu *clusterSetParamsLU) Steps() []Step {
	return append(lu.masterIPSteps([]Step{lu.updateStep()}), lu.sshSteps()...)
}

func (lu *clusterSetParamsLU) updateStep() Step {
	return Step{"update", func(ctx context.Context, s *StepCtx) error {
		cur := s.Cfg().Cluster()
		lu.Cluster.Meta = cur.Meta
		lu.Cluster.Epoch = cur.Epoch
		lu.Cluster.WatcherPauseUntil = cur.WatcherPauseUntil
		lu.Cluster.ReconcilerPauses = cur.ReconcilerPauses
		s.Tx().PutCluster(lu.Cluster)
		return nil
	}}
}

func (lu *clusterSetParamsLU) Result() any { return nil }

// ---- cluster destroy

type clusterDestroyLU struct {
	Master string `json:"master"`
}

func (lu *clusterDestroyLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Exclusive)}
}

func (lu *clusterDestroyLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	c := p.Cfg.Cluster()
	if n := len(p.Cfg.Instances()); n > 0 {
		return ecode.Errorf(ecode.State, "There are still %d instance(s) in the cluster; remove them first", n)
	}
	for _, n := range p.Cfg.Nodes() {
		if n.UUID != c.MasterNode {
			return ecode.Errorf(ecode.State, "There are still nodes besides the master (%s); remove them first", n.Name)
		}
	}
	m, err := p.Cfg.MustNode(c.MasterNode)
	if err != nil {
		return err
	}
	lu.Master = m.Name
	return nil
}

// Steps take the cluster IP off the master's node, as Ganeti's destroy
// does; a node that cannot is a warning.
func (lu *clusterDestroyLU) Steps() []Step {
	return []Step{{"master-ip", func(ctx context.Context, s *StepCtx) error {
		c := s.Cfg().Cluster()
		if c.ClusterIP == "" {
			return nil
		}
		n, err := s.p.MasterIPNode()
		if err == nil {
			err = s.RPC(ctx, n, nodeapi.DeactivateMasterIP, masterIPArgs(c), nil)
		}
		if err != nil {
			s.Logf(ctx, "Warning: could not take the master IP %s off the master's node: %v", c.ClusterIP, err)
		}
		return nil
	}}}
}

func (lu *clusterDestroyLU) Result() any { return lu.Master }

// ---- helpers shared by verify

func fmtAge(d time.Duration) string {
	if d > 48*time.Hour {
		return fmt.Sprintf("%d days", int(d.Hours()/24))
	}
	return d.Round(time.Minute).String()
}
