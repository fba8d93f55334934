package cmdlib

import (
	"context"
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
}

func (lu *instanceSetParamsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
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
	if len(op.List("disks")) > 0 || len(op.List("nics")) > 0 {
		return ecode.Errorf(ecode.Inval, "Adding, removing or changing disks and NICs is not available in this version; change beparams, hvparams, osparams or the OS")
	}
	// Ganeti's client sends an empty dict when no private parameter is
	// given: only actual changes are refused.
	if len(op.Dict("osparams_private")) > 0 {
		return ecode.Errorf(ecode.Inval, "Changing private OS parameters is not available in this version")
	}
	if op.Params["runtime_mem"] != nil {
		return ecode.Errorf(ecode.Inval, "runtime_mem (memory ballooning) is not available in this version")
	}
	c := p.Cfg.Cluster()
	hvUpd := op.Dict("hvparams")
	hvChecked := map[string]any{}
	for k, v := range hvUpd {
		if v == nil || v == "default" {
			if _, ok := c.HVParams[inst.Hypervisor][k]; !ok {
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
	lu.OS = inst.OS
	if o := op.Str("os_name"); o != "" {
		lu.OS = o
	}
	lu.OSP = inst.OSParams
	if m, ok := op.Params["osparams"].(map[string]any); ok {
		lu.OSP = updateParams(inst.OSParams, m)
	}
	if lu.OS != inst.OS || op.Params["osparams"] != nil {
		if err := p.checkOS(ctx, node, lu.OS, op.Bool("force_variant"), config.Fill(c.OSParams[osBase(lu.OS)], lu.OSP)); err != nil {
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
	if len(lu.Changes) == 0 && lu.Offline == nil && op.Params["osparams"] == nil {
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
		if err := pol.check(beSpec(be, true)); err != nil {
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
	return []Step{{"update", func(ctx context.Context, s *StepCtx) error {
		inst, _, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		inst.HVParams, inst.BEParams, inst.OSParams, inst.OS = lu.HV, lu.BE, lu.OSP, lu.OS
		if lu.Offline != nil {
			if *lu.Offline {
				inst.AdminState = config.AdminOffline
			} else if inst.AdminState == config.AdminOffline {
				inst.AdminState = config.AdminDown
			}
		}
		s.Tx().PutInstance(inst)
		return nil
	}}}
}

func (lu *instanceSetParamsLU) Result() any {
	if lu.Changes == nil {
		return [][2]any{}
	}
	return lu.Changes
}
