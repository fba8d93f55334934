package cmdlib

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

func toNumber(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case string:
		return strconv.ParseFloat(x, 64)
	}
	return 0, fmt.Errorf("not a number")
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch strings.ToLower(x) {
		case "true", "yes", "1":
			return true, nil
		case "false", "no", "0":
			return false, nil
		}
	}
	return false, fmt.Errorf("not a boolean")
}

// checkOS asks the node whether it has the OS, then applies Ganeti's variant
// and parameter rules.
func (p *Processor) checkOS(ctx context.Context, node *config.Node, osName string, forceVariant bool, params config.Params) error {
	var oses []nodeapi.OSInfo
	if err := p.RPC.Call(ctx, node, nodeapi.OSDiagnose, "", struct{}{}, &oses); err != nil {
		return err
	}
	base, variant, _ := strings.Cut(osName, "+")
	for _, o := range oses {
		if o.Name != base {
			continue
		}
		if !o.Valid {
			return ecode.Errorf(ecode.Environ, "OS '%s' is invalid on node %s: %s", base, node.Name, o.Error)
		}
		if len(o.Variants) > 0 {
			if variant == "" && !forceVariant {
				return ecode.Errorf(ecode.Inval, "OS name '%s' must include a variant (one of %s)", base, strings.Join(o.Variants, ", "))
			}
			if variant != "" && !contains(o.Variants, variant) && !forceVariant {
				return ecode.Errorf(ecode.Inval, "Unsupported OS variant '%s' of %s (known: %s)", variant, base, strings.Join(o.Variants, ", "))
			}
		} else if variant != "" {
			return ecode.Errorf(ecode.Inval, "OS '%s' doesn't support variants ('%s' given)", base, variant)
		}
		known := map[string]bool{}
		for _, kv := range o.Parameters {
			known[kv[0]] = true
		}
		for k := range params {
			if !known[k] {
				return ecode.Errorf(ecode.Inval, "OS '%s' has no parameter '%s'", base, k)
			}
		}
		return nil
	}
	return ecode.Errorf(ecode.Inval, "OS '%s' not found on node %s", base, node.Name)
}

// instanceBase resolves the instance and its primary node for the simple
// instance units.
type instanceBase struct {
	Name string `json:"name"`
	UUID string `json:"uuid"`
	// locked are the instance names this op locked (not saved: a resumed
	// op holds the locks recorded in its job).
	locked []string
}

// lockName is the name an instance is locked by: its configured name, even
// when the caller gave its uuid, so one instance never has two locks.
func lockName(p *Processor, nameOrUUID string) string {
	if i, ok := p.Cfg.Instance(nameOrUUID); ok {
		return i.Name
	}
	return nameOrUUID
}

func (b *instanceBase) locks(p *Processor, op *opcodes.Op, mode locking.Mode, extra ...string) []locking.Request {
	names := append([]string{lockName(p, op.Str("instance_name"))}, extra...)
	b.locked = names
	reqs := []locking.Request{bgl(locking.Shared), instLock(mode, names...)}
	if i, ok := p.Cfg.Instance(op.Str("instance_name")); ok {
		reqs = append(reqs, nodeLock(locking.Shared, i.PrimaryNode))
	}
	return reqs
}

func (b *instanceBase) load(p *Processor, op *opcodes.Op) (*config.Instance, *config.Node, error) {
	name := op.Str("instance_name")
	if b.UUID != "" {
		name = b.UUID
	}
	inst, err := p.Cfg.MustInstance(name)
	if err != nil {
		return nil, nil, err
	}
	if len(b.locked) > 0 && !contains(b.locked, inst.Name) {
		// Renamed between taking the lock and reading it: the lock no
		// longer protects this instance.
		return nil, nil, ecode.Errorf(ecode.TempNoRes, "Instance '%s' was renamed while this operation waited for its lock; retry", inst.Name)
	}
	node, err := p.Cfg.MustNode(inst.PrimaryNode)
	if err != nil {
		return nil, nil, err
	}
	b.Name, b.UUID = inst.Name, inst.UUID
	return inst, node, nil
}

// running asks the primary node whether the instance runs.
func (p *Processor) running(ctx context.Context, inst *config.Instance, node *config.Node) (bool, error) {
	var list []nodeapi.RunningInstance
	if err := p.RPC.Call(ctx, node, nodeapi.InstanceList, "", nodeapi.InstanceListArgs{Hypervisors: []string{inst.Hypervisor}}, &list); err != nil {
		return false, err
	}
	for _, r := range list {
		if r.UUID == inst.UUID || r.Name == inst.Name {
			return true, nil
		}
	}
	return false, nil
}

// ---- startup

type instanceStartupLU struct{ instanceBase }

func (lu *instanceStartupLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceStartupLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if inst.AdminState == config.AdminOffline {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked offline, it cannot be started", inst.Name)
	}
	if err := refuseInRescue(p, inst, "start it"); err != nil {
		return err
	}
	if err := checkNodeOnline(node); err != nil {
		return err
	}
	c := p.Cfg.Cluster()
	if _, err := checkHVParams(c, inst.Hypervisor, op.Dict("hvparams")); err != nil {
		return err
	}
	be, err := checkBEParams(op.Dict("beparams"), false)
	if err != nil {
		return err
	}
	filled := config.Fill(config.Fill(c.BEParams, inst.BEParams), be)
	if err := checkMemoryOrder(filled); err != nil {
		return err
	}
	return p.checkStartMemory(ctx, inst, node, config.MemoryMiB(filled))
}

// checkStartMemory is Ganeti's CheckNodeFreeMemory before a start: an
// instance that is not running yet needs its memory free on the node. The
// hypervisor gives a guest its maxmem, so that is what must be free.
func (p *Processor) checkStartMemory(ctx context.Context, inst *config.Instance, node *config.Node, memMiB int64) error {
	running, err := p.running(ctx, inst, node)
	if err != nil || running {
		return err
	}
	f, err := p.nodeFacts(ctx, node, inst.Hypervisor, inst.DiskTemplate)
	if err != nil {
		return err
	}
	if f.MemoryFreeMiB < memMiB {
		return ecode.Errorf(ecode.NoRes, "Not enough memory on node %s for starting instance %s: needed %d MiB, available %d MiB",
			node.Name, inst.Name, memMiB, f.MemoryFreeMiB)
	}
	return nil
}

func (lu *instanceStartupLU) Steps() []Step {
	return []Step{
		// As Ganeti: record the wish first, so the watcher and a resumed
		// op agree on it whatever happens to the start.
		{"mark-up", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if !s.Op().Bool("no_remember") && inst.AdminState != config.AdminUp {
				inst.AdminState = config.AdminUp
				s.Tx().PutInstance(inst)
			}
			return nil
		}},
		{"start", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			spec := inst.Clone()
			// Temporary parameters apply to this start only (Ganeti's startup -H/-B).
			hv, _ := checkHVParams(s.Cfg().Cluster(), inst.Hypervisor, s.Op().Dict("hvparams"))
			be, _ := checkBEParams(s.Op().Dict("beparams"), false)
			spec.HVParams = config.Fill(spec.HVParams, hv)
			spec.BEParams = config.Fill(spec.BEParams, be)
			return s.RPC(ctx, node, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: s.p.Spec(spec)}, nil)
		}},
	}
}

func (lu *instanceStartupLU) Result() any { return nil }

// ---- shutdown

type instanceShutdownLU struct{ instanceBase }

func (lu *instanceShutdownLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceShutdownLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if inst.AdminState == config.AdminOffline {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked offline", inst.Name)
	}
	if node.Offline && !op.Bool("ignore_offline_nodes") {
		return checkNodeOnline(node)
	}
	return nil
}

func (lu *instanceShutdownLU) Steps() []Step {
	return []Step{
		// Record "down" before stopping, as Ganeti does, so the watcher
		// never restarts an instance an operator is stopping.
		{"mark-down", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if !s.Op().Bool("no_remember") && inst.AdminState != config.AdminDown {
				inst.AdminState = config.AdminDown
				s.Tx().PutInstance(inst)
			}
			return nil
		}},
		{"stop", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if node.Offline {
				return nil
			}
			args := nodeapi.ShutdownArgs{Instance: s.p.Spec(inst), Timeout: s.Op().Int("timeout"), Force: s.Op().Bool("force")}
			return s.RPC(ctx, node, nodeapi.InstanceShutdown, args, nil)
		}},
	}
}

func (lu *instanceShutdownLU) Result() any { return nil }

// ---- reboot

type instanceRebootLU struct{ instanceBase }

func (lu *instanceRebootLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceRebootLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	switch op.Str("reboot_type") {
	case "soft", "hard", "full":
	default:
		return ecode.Errorf(ecode.Inval, "Invalid reboot type '%s' (soft, hard or full)", op.Str("reboot_type"))
	}
	if inst.AdminState == config.AdminOffline {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked offline", inst.Name)
	}
	if err := refuseInRescue(p, inst, "reboot it"); err != nil {
		return err
	}
	return checkNodeOnline(node)
}

func (lu *instanceRebootLU) Steps() []Step {
	return []Step{{"reboot", func(ctx context.Context, s *StepCtx) error {
		inst, node, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		typ := s.Op().Str("reboot_type")
		run, err := s.p.running(ctx, inst, node)
		if err != nil {
			return err
		}
		spec := s.p.Spec(inst)
		if run && typ != "full" {
			err = s.RPC(ctx, node, nodeapi.InstanceReboot, nodeapi.RebootArgs{Instance: spec, Type: typ, Timeout: s.Op().Int("shutdown_timeout")}, nil)
		} else {
			if run {
				if err := s.RPC(ctx, node, nodeapi.InstanceShutdown, nodeapi.ShutdownArgs{Instance: spec, Timeout: s.Op().Int("shutdown_timeout")}, nil); err != nil {
					return err
				}
			}
			err = s.RPC(ctx, node, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: spec}, nil)
		}
		if err != nil {
			return err
		}
		if inst.AdminState != config.AdminUp {
			inst.AdminState = config.AdminUp
			s.Tx().PutInstance(inst)
		}
		return nil
	}}}
}

func (lu *instanceRebootLU) Result() any { return nil }

// ---- remove

type instanceRemoveLU struct{ instanceBase }

func (lu *instanceRemoveLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return append(lu.locks(p, op, locking.Exclusive), instanceNetworkLocks(p, op.Str("instance_name"))...)
}

func (lu *instanceRemoveLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	_, _, err := lu.load(p, op)
	return err
}

func (lu *instanceRemoveLU) Steps() []Step {
	return []Step{
		{"shutdown", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			s.Logf(ctx, "Shutting down instance %s on node %s", inst.Name, node.Name)
			args := nodeapi.ShutdownArgs{Instance: s.p.Spec(inst), Timeout: s.Op().Int("shutdown_timeout")}
			if err := s.RPC(ctx, node, nodeapi.InstanceShutdown, args, nil); err != nil {
				if !s.Op().Bool("ignore_failures") {
					return ecode.ExecErrorf("Could not shutdown instance %s on node %s: %v", inst.Name, node.Name, err)
				}
				s.Logf(ctx, "Warning: could not shut down the instance (ignored): %v", err)
			}
			return nil
		}},
		// A rescued instance's rescue initrd holds the rescue password's
		// hash: it goes with the instance.
		{"remove-rescue-initrd", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil || !InRescue(s.Cfg().InstanceStatus(inst.UUID)) {
				return err
			}
			args := nodeapi.InstanceRescueCleanupArgs{InstanceUUID: inst.UUID}
			if err := s.RPC(ctx, node, nodeapi.InstanceRescueCleanup, args, nil); err != nil {
				if !s.Op().Bool("ignore_failures") {
					return ecode.ExecErrorf("Could not remove the rescue initrd of instance %s on node %s: %w", inst.Name, node.Name, err)
				}
				s.Logf(ctx, "Warning: could not remove the rescue initrd (ignored): %v", err)
			}
			return nil
		}},
		{"remove-disks", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			for i, d := range inst.Disks {
				args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
					Disk: nodeapi.DiskSpec{UUID: d.UUID, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)}}
				if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
					if !s.Op().Bool("ignore_failures") {
						return ecode.ExecErrorf("Can't remove disk %d of instance %s: %v", i, inst.Name, err)
					}
					s.Logf(ctx, "Warning: could not remove disk %d (ignored): %v", i, err)
				}
			}
			return nil
		}},
		{"remove-config", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			s.Logf(ctx, "Removing instance %s from the configuration", inst.Name)
			if err := releaseNICAddrs(ctx, s, inst); err != nil {
				return err
			}
			s.Tx().DeleteInstance(inst)
			return nil
		}},
	}
}

func (lu *instanceRemoveLU) Result() any { return nil }

// requireDown checks an instance is administratively and really down, as
// Ganeti requires before reinstall and rename.
func (p *Processor) requireDown(ctx context.Context, inst *config.Instance, node *config.Node, what string) error {
	if inst.AdminState == config.AdminUp {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked to be up, cannot %s it (shut it down first)", inst.Name, what)
	}
	if err := checkNodeOnline(node); err != nil {
		return err
	}
	run, err := p.running(ctx, inst, node)
	if err != nil {
		return err
	}
	if run {
		return ecode.Errorf(ecode.State, "Instance '%s' is running on node %s, cannot %s it", inst.Name, node.Name, what)
	}
	return nil
}

// ---- reinstall

type instanceReinstallLU struct {
	instanceBase
	OS string `json:"os"`
}

func (lu *instanceReinstallLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceReinstallLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if err := refuseInRescue(p, inst, "reinstall it"); err != nil {
		return err
	}
	if err := p.requireDown(ctx, inst, node, "reinstall"); err != nil {
		return err
	}
	lu.OS = inst.OS
	if o := op.Str("os_type"); o != "" {
		lu.OS = o
	}
	if lu.OS == "" {
		return ecode.Errorf(ecode.Inval, "Instance '%s' has no OS; pass os_type", inst.Name)
	}
	c := p.Cfg.Cluster()
	if osBlacklisted(c, lu.OS) && lu.OS != inst.OS {
		return ecode.Errorf(ecode.State, "Guest OS '%s' is not allowed for installation", lu.OS)
	}
	osp := inst.OSParams
	if m, ok := op.Params["osparams"].(map[string]any); ok {
		osp = updateParams(inst.OSParams, m)
	}
	privUpd, err := privateOSParamsUpdate(op)
	if err != nil {
		return err
	}
	priv := updateParams(inst.OSParamsPriv, privUpd)
	return p.checkOSParams(ctx, node, lu.OS, op.Bool("force_variant"), config.Fill(config.ClusterOSParams(c, lu.OS), osp),
		config.InstancePrivateOSParams(c, lu.OS, priv))
}

func (lu *instanceReinstallLU) Steps() []Step {
	return []Step{
		{"update-os", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			m, hasParams := s.Op().Params["osparams"].(map[string]any)
			// Checked in Prereq; the values are read from the op again
			// so that no copy of them is kept in the unit's state.
			privUpd, _ := privateOSParamsUpdate(s.Op())
			if inst.OS == lu.OS && !hasParams && privUpd == nil {
				return nil
			}
			inst.OS = lu.OS
			if hasParams {
				inst.OSParams = updateParams(inst.OSParams, m)
			}
			if privUpd != nil {
				inst.OSParamsPriv = updateParams(inst.OSParamsPriv, privUpd)
			}
			s.Tx().PutInstance(inst)
			return nil
		}},
		{"install-os", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			s.Logf(ctx, "Running the OS create scripts of %s (reinstall)", inst.OS)
			args := nodeapi.OSCreateArgs{Instance: s.p.Spec(inst), Reinstall: true, ForceVariant: s.Op().Bool("force_variant"),
				DebugLevel: s.Op().Int("debug_level"), SecretParams: secretParams(s.Op())}
			return s.RPC(ctx, node, nodeapi.OSCreate, args, &nodeapi.OSReply{})
		}},
	}
}

func (lu *instanceReinstallLU) Result() any { return nil }

// ---- rename

type instanceRenameLU struct {
	instanceBase
	OldName string `json:"old_name"`
	NewName string `json:"new_name"`
}

func (lu *instanceRenameLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	// The new name is locked too so two renames to it cannot race.
	if newName := op.Str("new_name"); newName != lockName(p, op.Str("instance_name")) {
		return lu.locks(p, op, locking.Exclusive, newName)
	}
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceRenameLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	newName := op.Str("new_name")
	if err := CheckName("instance", newName); err != nil {
		return err
	}
	// A rename to the same name is allowed, as in Ganeti (burnin's
	// "rename to own name" step): it runs the OS rename script again.
	if err := p.Cfg.CheckInstanceNameFree(newName, inst.UUID); err != nil {
		return err
	}
	if err := p.requireDown(ctx, inst, node, "rename"); err != nil {
		return err
	}
	lu.OldName, lu.NewName = inst.Name, newName
	return nil
}

func (lu *instanceRenameLU) Steps() []Step {
	return []Step{
		{"rename-config", func(ctx context.Context, s *StepCtx) error {
			inst, _, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			inst.Name = lu.NewName
			s.Tx().PutInstance(inst)
			return nil
		}},
		{"rename-os", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if inst.OS == "" {
				return nil
			}
			s.Logf(ctx, "Running the OS rename script for %s -> %s", lu.OldName, lu.NewName)
			err = s.RPC(ctx, node, nodeapi.OSRename, nodeapi.OSRenameArgs{Instance: s.p.Spec(inst), OldName: lu.OldName}, &nodeapi.OSReply{})
			if err != nil {
				// Ganeti keeps the new name and reports the script failure as a warning.
				s.Logf(ctx, "Warning: the OS rename script failed: %v", err)
			}
			return nil
		}},
	}
}

func (lu *instanceRenameLU) Result() any { return lu.NewName }

// publicOSParams are the filled OS parameters as answers may show them:
// private values are redacted, as Ganeti does.
func publicOSParams(c *config.Cluster, inst *config.Instance) config.Params {
	out := config.InstanceOSParams(c, inst)
	for k := range config.InstancePrivateOSParams(c, inst.OS, inst.OSParamsPriv) {
		out[k] = "<redacted>"
	}
	return out
}
