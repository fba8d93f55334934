package cmdlib

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

type instanceSetParamsLU struct {
	instanceBase
	HV      config.Params `json:"hv"`
	BE      config.Params `json:"be"`
	OSP     config.Params `json:"osp"`
	OS      string        `json:"os"`
	Offline *bool         `json:"offline"`
	Changes [][2]any      `json:"changes"`
	// Convert is the disk template to convert to ("" for none), and
	// ConvertedFrom the previous one once the configuration changed.
	Convert       string `json:"convert,omitempty"`
	ConvertedFrom string `json:"converted_from,omitempty"`
	// DevMods says whether disks or NICs change; Dev is the outcome.
	DevMods bool       `json:"dev_mods,omitempty"`
	Dev     devChanges `json:"dev"`
	// Running is whether the instance ran at the check, Hotplug whether
	// its device changes are applied to it at once.
	// NewPrimary is the node uuid pnode names, "" when it does not change.
	NewPrimary string `json:"new_primary,omitempty"`
	Running    bool   `json:"running,omitempty"`
	Hotplug    bool   `json:"hotplug,omitempty"`
	RuntimeMem int64  `json:"runtime_mem,omitempty"`
}

func (lu *instanceSetParamsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return append(lu.locks(p, op, locking.Exclusive), modifyNetworkLocks(p, op)...)
}

// updateParams applies Ganeti's rules: the value "default" (or null)
// removes the custom setting so the cluster default applies again.
func updateParams(old config.Params, upd map[string]any) config.Params {
	out := old.Clone()
	if out == nil {
		out = config.Params{}
	}
	for k, v := range upd {
		if v == nil || v == "default" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

func (lu *instanceSetParamsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	c := p.Cfg.Cluster()
	hvUpd := op.Dict("hvparams")
	if len(hvUpd) > 0 {
		if err := refuseInRescue(p, inst, "change its hypervisor parameters"); err != nil {
			return err
		}
	}
	hvChecked := map[string]any{}
	for k, v := range hvUpd {
		if v == nil || v == "default" {
			// A value the instance holds may always go, even one its
			// hypervisor no longer knows.
			if _, ok := knownHVParams(c, inst.Hypervisor)[k]; !ok && inst.HVParams[k] == nil {
				return ecode.Errorf(ecode.Inval, "Unknown hypervisor parameter '%s' for %s", k, inst.Hypervisor)
			}
			hvChecked[k] = nil
			continue
		}
		one, err := checkHVParams(c, inst.Hypervisor, map[string]any{k: v})
		if err != nil {
			return err
		}
		hvChecked[k] = one[k]
	}
	beUpd := op.Dict("beparams")
	if err := lu.checkBE(ctx, p, op, inst, node); err != nil {
		return err
	}
	lu.HV = updateParams(inst.HVParams, hvChecked)
	if len(hvUpd) > 0 || beUpd["vcpus"] != nil {
		changed := *inst
		changed.HVParams, changed.BEParams = lu.HV, lu.BE
		if err := validateInstanceHV(c, &changed); err != nil {
			return err
		}
	}
	lu.OS = inst.OS
	if o := op.Str("os_name"); o != "" {
		lu.OS = o
	}
	lu.OSP = inst.OSParams
	if m, ok := op.Params["osparams"].(map[string]any); ok {
		lu.OSP = updateParams(inst.OSParams, m)
	}
	privUpd, err := privateOSParamsUpdate(op)
	if err != nil {
		return err
	}
	if lu.OS != inst.OS || op.Params["osparams"] != nil || privUpd != nil {
		priv := updateParams(inst.OSParamsPriv, privUpd)
		if err := p.checkOSParams(ctx, node, lu.OS, op.Bool("force_variant"), config.Fill(config.ClusterOSParams(c, lu.OS), lu.OSP),
			config.InstancePrivateOSParams(c, lu.OS, priv)); err != nil {
			return err
		}
	}
	if v, ok := op.Params["offline"].(bool); ok {
		if v && inst.AdminState == config.AdminUp {
			return ecode.Errorf(ecode.State, "Instance '%s' is up; shut it down before marking it offline", inst.Name)
		}
		lu.Offline = &v
	}
	for _, kv := range []struct {
		prefix string
		m      map[string]any
	}{{"be/", beUpd}, {"hv/", hvUpd}} {
		keys := make([]string, 0, len(kv.m))
		for k := range kv.m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			lu.Changes = append(lu.Changes, [2]any{kv.prefix + k, kv.m[k]})
		}
	}
	if lu.OS != inst.OS {
		lu.Changes = append(lu.Changes, [2]any{"os", lu.OS})
	}
	// As Ganeti: each private parameter changed is listed, its value
	// never.
	for _, k := range slices.Sorted(maps.Keys(privUpd)) {
		lu.Changes = append(lu.Changes, [2]any{"os_private/" + k, opcodes.Redacted})
	}
	if err := lu.prereqConvert(p, op, inst); err != nil {
		return err
	}
	if err := lu.prereqDevices(ctx, p, op, inst, node); err != nil {
		return err
	}
	if err := lu.prereqPrimary(ctx, p, op, inst, node); err != nil {
		return err
	}
	if len(lu.Changes) == 0 && lu.Offline == nil && op.Params["osparams"] == nil && lu.NewPrimary == "" {
		return ecode.Errorf(ecode.Inval, "No changes submitted")
	}
	return nil
}

// checkBE checks a beparams change and sets lu.BE: every value, minmem
// against maxmem, the filled values against the instance policy of the
// primary node's group (unless ignore_ipolicy), more memory against the
// node's free memory (unless force) and more vcpus against its CPUs.
func (lu *instanceSetParamsLU) checkBE(ctx context.Context, p *Processor, op *opcodes.Op, inst *config.Instance, node *config.Node) error {
	c := p.Cfg.Cluster()
	beUpd := op.Dict("beparams")
	beChecked := map[string]any{}
	for k, v := range beUpd {
		if v == nil || v == "default" {
			if _, ok := config.BEParamType(k); !ok {
				return ecode.Errorf(ecode.Inval, "Unknown backend parameter '%s'", k)
			}
			beChecked[k] = nil
			continue
		}
		one, err := checkBEParams(map[string]any{k: v}, false)
		if err != nil {
			return err
		}
		for kk, vv := range one {
			beChecked[kk] = vv
		}
	}
	lu.BE = updateParams(inst.BEParams, beChecked)
	if len(beUpd) == 0 {
		return nil
	}
	old, be := config.Fill(c.BEParams, inst.BEParams), config.Fill(c.BEParams, lu.BE)
	if err := checkMemoryOrder(be); err != nil {
		return err
	}
	pol := p.nodePolicy(node)
	if !op.Bool("ignore_ipolicy") {
		if err := pol.check(beSpecs(be, true)); err != nil {
			return err
		}
	}
	if config.MemoryMiB(be) > config.MemoryMiB(old) && !op.Bool("force") {
		nd := need{hv: inst.Hypervisor, template: inst.DiskTemplate, memMiB: config.MemoryMiB(be)}
		if err := p.checkNodeRoom(ctx, node, nd, inst.UUID); err != nil {
			return err
		}
	}
	if config.VCPUs(be) > config.VCPUs(old) {
		f, err := p.nodeFacts(ctx, node, inst.Hypervisor, inst.DiskTemplate)
		if err != nil {
			return err
		}
		return pol.checkVCPUs(node, f.CPUs, config.VCPUs(be))
	}
	return nil
}

func (lu *instanceSetParamsLU) Steps() []Step {
	return []Step{{"create-disks", lu.createDisks}, {"hot-remove", lu.hotRemove}, {"convert-disks", lu.convertDisks}, {"update", func(ctx context.Context, s *StepCtx) error {
		inst, _, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		inst.HVParams, inst.BEParams, inst.OSParams, inst.OS = lu.HV, lu.BE, lu.OSP, lu.OS
		// An instance created before ports were allocated, or of a
		// hypervisor that gets none at creation, gets one when its console
		// moves to a TCP port.
		if consoleListensOnTCP(config.InstanceHVParams(s.Cfg().Cluster(), inst)) {
			if err := assignNetworkPort(ctx, s, inst); err != nil {
				return err
			}
		}
		// Checked in Prereq; read from the op again so that the unit's
		// saved state holds no private value.
		if privUpd, _ := privateOSParamsUpdate(s.Op()); privUpd != nil {
			inst.OSParamsPriv = updateParams(inst.OSParamsPriv, privUpd)
		}
		if lu.DevMods {
			// The NICs' addresses change hands in this transaction.
			nics := append([]config.NIC(nil), lu.Dev.NICs...)
			if err := moveNICAddrs(ctx, s, inst.NICs, nics); err != nil {
				return err
			}
			inst.Disks, inst.NICs = lu.Dev.Disks, nics
		}
		if lu.NewPrimary != "" {
			inst.PrimaryNode = lu.NewPrimary
		}
		if lu.Convert != "" && inst.DiskTemplate != lu.Convert {
			lu.ConvertedFrom, inst.DiskTemplate = inst.DiskTemplate, lu.Convert
		}
		if lu.Offline != nil {
			if *lu.Offline {
				inst.AdminState = config.AdminOffline
			} else if inst.AdminState == config.AdminOffline {
				inst.AdminState = config.AdminDown
			}
		}
		s.Tx().PutInstance(inst)
		return nil
	}}, {"hot-add", lu.hotAdd}, {"remove-disks", lu.removeDisks}, {"runtime-memory", lu.setRuntimeMemory}, {"remove-old-disks", lu.removeOldDisks}}
}

func (lu *instanceSetParamsLU) Result() any {
	if lu.Changes == nil {
		return [][2]any{}
	}
	return lu.Changes
}
