package cmdlib

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// diskUnits are the units of the instance disk and console opcodes.
func (p *Processor) diskUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_INSTANCE_ACTIVATE_DISKS", func() LU { return &instanceActivateDisksLU{} }),
		p.unit("OP_INSTANCE_DEACTIVATE_DISKS", func() LU { return &instanceDeactivateDisksLU{} }),
		p.unit("OP_INSTANCE_GROW_DISK", func() LU { return &instanceGrowDiskLU{} }),
		p.unit("OP_INSTANCE_RECREATE_DISKS", func() LU { return &instanceRecreateDisksLU{} }),
		p.unit("OP_INSTANCE_CONSOLE", func() LU { return &instanceConsoleLU{} }),
	}
}

// Hypervisor names and parameters the console answer depends on (cmdlib
// sits above the node-side hypervisor package and speaks of them by name).
const (
	hvKVM            = "kvm"
	hvFake           = "fake"
	hvSerialConsole  = "serial_console"
	hvVNCBindAddress = "vnc_bind_address"
	vncBasePort      = 5900
	// consoleUser is who Ganeti's clients ssh to the primary node as.
	consoleUser = "root"
)

// ivName is Ganeti's name of an instance's disk N.
func ivName(i int) string { return fmt.Sprintf("disk/%d", i) }

// findDisk looks a configured disk up in a node's disk list: by uuid, or by
// the "disk<N>" name the file template gives a disk without one.
func findDisk(found []nodeapi.FoundDisk, instUUID string, idx int, d config.Disk) (nodeapi.FoundDisk, bool) {
	want := d.UUID
	if want == "" {
		want = "disk" + strconv.Itoa(idx)
	}
	for _, f := range found {
		if f.InstanceUUID == instUUID && f.DiskUUID == want {
			return f, true
		}
	}
	return nodeapi.FoundDisk{}, false
}

// ---- activate disks

// instanceActivateDisksLU checks that every disk of the instance is present
// on its primary node and reports where: for the file template a present
// image is an active disk, so nothing is assembled and nothing recorded.
type instanceActivateDisksLU struct {
	instanceBase
	Out [][]any `json:"out"`
}

func (lu *instanceActivateDisksLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceActivateDisksLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	_, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	return checkNodeOnline(node)
}

func (lu *instanceActivateDisksLU) Steps() []Step {
	return []Step{{"assemble", func(ctx context.Context, s *StepCtx) error {
		inst, node, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		out := [][]any{}
		if len(inst.Disks) > 0 {
			// Read-only: no operation id, so the node keeps no record of it.
			var found []nodeapi.FoundDisk
			if err := s.p.RPC.Call(ctx, node, nodeapi.DiskList, "", struct{}{}, &found); err != nil {
				return ecode.ExecErrorf("Cannot activate block devices: listing the disks of node %s: %w", node.Name, err)
			}
			for i, d := range inst.Disks {
				f, ok := findDisk(found, inst.UUID, i, d)
				if !ok {
					return ecode.ExecErrorf("Cannot activate block devices: %s of instance %s is missing on node %s", ivName(i), inst.Name, node.Name)
				}
				if !s.Op().Bool("ignore_size") && f.SizeMiB < d.SizeMiB {
					return ecode.ExecErrorf("Cannot activate block devices: %s of instance %s is %d MiB on node %s, the configuration says %d MiB (use ignore_size to activate it anyway)",
						ivName(i), inst.Name, f.SizeMiB, node.Name, d.SizeMiB)
				}
				out = append(out, []any{node.Name, ivName(i), f.Path})
			}
		}
		lu.Out = out
		return nil
	}}}
}

func (lu *instanceActivateDisksLU) Result() any { return lu.Out }

// ---- deactivate disks

// instanceDeactivateDisksLU refuses, as Ganeti, while the instance is up
// unless forced. File images have nothing to tear down, so it then only
// says so: no node is called and nothing is recorded.
type instanceDeactivateDisksLU struct{ instanceBase }

func (lu *instanceDeactivateDisksLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *instanceDeactivateDisksLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if op.Bool("force") {
		return nil
	}
	if inst.AdminState == config.AdminUp {
		return ecode.Errorf(ecode.State, "Instance '%s' is marked to be up, cannot shutdown disks", inst.Name)
	}
	if node.Offline {
		return nil
	}
	run, err := p.running(ctx, inst, node)
	if err != nil {
		return err
	}
	if run {
		return ecode.Errorf(ecode.State, "Instance '%s' is running, cannot shutdown disks", inst.Name)
	}
	return nil
}

func (lu *instanceDeactivateDisksLU) Steps() []Step {
	return []Step{{"deactivate", func(ctx context.Context, s *StepCtx) error {
		inst, _, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		s.Logf(ctx, "Disks of instance %s (template %s) need no teardown: nothing to deactivate", inst.Name, inst.DiskTemplate)
		return nil
	}}}
}

func (lu *instanceDeactivateDisksLU) Result() any { return nil }

// ---- grow disk

// instanceGrowDiskLU grows one disk to a target size, on the node and in
// the configuration in the same committed step; a running kvm instance is
// then told the new size (block_resize).
type instanceGrowDiskLU struct {
	instanceBase
	Index  int   `json:"index"`
	Target int64 `json:"target"` // MiB
	Delta  int64 `json:"delta"`  // MiB
	// Running is whether the kvm instance ran at the check: qemu is then
	// told the new size.
	Running bool `json:"running,omitempty"`
}

func (lu *instanceGrowDiskLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := lu.locks(p, op, locking.Exclusive)
	if i, ok := p.Cfg.Instance(op.Str("instance_name")); ok {
		// The node's free space is checked, then used: no other op may
		// reserve it in between.
		reqs = append(reqs, nodeResLock(locking.Exclusive, i.PrimaryNode))
	}
	return reqs
}

func (lu *instanceGrowDiskLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if err := checkNodeOnline(node); err != nil {
		return err
	}
	idx, amount := op.Int("disk"), int64(op.Int("amount"))
	if idx < 0 || idx >= len(inst.Disks) {
		return ecode.Errorf(ecode.Inval, "Invalid disk index %d: instance %s has %d disks", idx, inst.Name, len(inst.Disks))
	}
	if amount < 0 {
		return ecode.Errorf(ecode.Inval, "Requested amount (%d MiB) is negative", amount)
	}
	cur := inst.Disks[idx].SizeMiB
	lu.Index = idx
	if op.Bool("absolute") {
		lu.Target, lu.Delta = amount, amount-cur
		if lu.Delta < 0 {
			return ecode.Errorf(ecode.State, "Requested size (%d MiB) is smaller than current disk size (%d MiB)", amount, cur)
		}
	} else {
		lu.Target, lu.Delta = cur+amount, amount
	}
	if lu.Delta == 0 {
		return nil
	}
	if inst.Hypervisor == hvKVM {
		run, err := p.running(ctx, inst, node)
		if err != nil {
			return err
		}
		if run && config.Fill(p.Cfg.Cluster().HVParams[hvKVM], inst.HVParams)["disk_type"] != "paravirtual" {
			return ecode.Errorf(ecode.State, "Instance '%s' is running with disk_type %v: only paravirtual disks grow while running, shut it down first",
				inst.Name, config.Fill(p.Cfg.Cluster().HVParams[hvKVM], inst.HVParams)["disk_type"])
		}
		lu.Running = run
	}
	f, err := p.nodeFacts(ctx, node, inst.Hypervisor, inst.DiskTemplate)
	if err != nil {
		return err
	}
	if f.DiskFreeMiB < lu.Delta {
		return ecode.Errorf(ecode.NoRes, "Not enough disk space on node %s: required %d MiB, available %d MiB", node.Name, lu.Delta, f.DiskFreeMiB)
	}
	return nil
}

func (lu *instanceGrowDiskLU) Steps() []Step {
	return []Step{{"grow", func(ctx context.Context, s *StepCtx) error {
		inst, node, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		if lu.Index >= len(inst.Disks) {
			return ecode.ExecErrorf("disk %d of instance %s disappeared", lu.Index, inst.Name)
		}
		d := inst.Disks[lu.Index]
		if d.SizeMiB == lu.Target {
			return nil
		}
		s.Logf(ctx, "Growing disk %d of instance '%s' by %d MiB to %d MiB", lu.Index, inst.Name, lu.Delta, lu.Target)
		args := nodeapi.DiskGrowArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir, NewSizeMiB: lu.Target,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: lu.Index, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)}}
		if err := s.RPC(ctx, node, nodeapi.DiskGrow, args, &nodeapi.DiskGrowReply{}); err != nil {
			return ecode.ExecErrorf("Grow request failed for disk %d of instance %s on node %s: %w", lu.Index, inst.Name, node.Name, err)
		}
		inst.Disks[lu.Index].SizeMiB = lu.Target
		s.Tx().PutInstance(inst)
		return nil
	}}, {"tell-hypervisor", func(ctx context.Context, s *StepCtx) error {
		if !lu.Running {
			return nil
		}
		inst, node, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		// qemu keeps the size it opened the file with until told.
		args := nodeapi.HotplugArgs{Instance: s.p.Spec(inst), Action: nodeapi.HotplugResize, Target: nodeapi.HotplugDisk, Index: lu.Index}
		if err := s.RPC(ctx, node, nodeapi.Hotplug, args, nil); err != nil {
			return ecode.ExecErrorf("Disk %d of instance %s grew, but the running instance was not told: %w", lu.Index, inst.Name, err)
		}
		return nil
	}}}
}

func (lu *instanceGrowDiskLU) Result() any { return nil }

// ---- console

// instanceConsoleLU answers Ganeti's console dict (objects.InstanceConsole
// without its unset keys): how a client reaches the running instance.
type instanceConsoleLU struct {
	instanceBase
	Out map[string]any `json:"out"`
}

func (lu *instanceConsoleLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Shared)
}

func (lu *instanceConsoleLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if err := checkNodeOnline(node); err != nil {
		return err
	}
	var list []nodeapi.RunningInstance
	if err := p.RPC.Call(ctx, node, nodeapi.InstanceList, "", nodeapi.InstanceListArgs{Hypervisors: []string{inst.Hypervisor}}, &list); err != nil {
		return err
	}
	var run *nodeapi.RunningInstance
	for i := range list {
		if list[i].UUID == inst.UUID || (list[i].UUID == "" && list[i].Name == inst.Name) {
			run = &list[i]
		}
	}
	if run == nil {
		state := "ADMIN_down"
		if inst.AdminState == config.AdminUp {
			state = "ERROR_down"
		}
		return &ecode.Error{Kind: ecode.OpExecError, Class: ecode.State,
			Msg: fmt.Sprintf("Instance %s is not running (state %s)", inst.Name, state)}
	}
	lu.Out = consoleDict(inst, node, p.Spec(inst).HVParams, run.SerialSocket)
	return nil
}

// consoleDict follows Ganeti's hypervisors: kvm offers its serial console
// over ssh and socat on the primary node, else VNC, else SPICE, else a
// message.
func consoleDict(inst *config.Instance, node *config.Node, hv map[string]string, serialSocket string) map[string]any {
	out := map[string]any{"instance": inst.Name}
	switch inst.Hypervisor {
	case hvFake:
		out["kind"], out["message"] = "msg", "Console not available for fake hypervisor"
		return out
	case hvKVM:
		if serial, err := toBool(hv[hvSerialConsole]); (err != nil || serial) && serialSocket != "" {
			out["kind"], out["host"], out["user"] = "ssh", node.Name, consoleUser
			// Raw mode and Ctrl-] to leave, as corral instance console.
			out["command"] = []string{"socat", "STDIO,raw,echo=0,escape=0x1d", "UNIX-CONNECT:" + serialSocket}
			return out
		}
		if addr := hv[hvVNCBindAddress]; net.ParseIP(addr) != nil && inst.NetworkPort > vncBasePort {
			host := addr
			if ip := net.ParseIP(addr); ip.IsUnspecified() {
				host = node.Name
			}
			out["kind"], out["host"], out["port"], out["display"] = "vnc", host, inst.NetworkPort, inst.NetworkPort-vncBasePort
			return out
		}
		if addr := hv[hypervisor.ParamSpiceBind]; net.ParseIP(addr) != nil && inst.NetworkPort > 0 {
			out["kind"], out["host"], out["port"] = "spice", addr, inst.NetworkPort
			return out
		}
	}
	out["kind"], out["message"] = "msg", fmt.Sprintf("No serial shell for instance %s", inst.Name)
	return out
}

func (lu *instanceConsoleLU) Steps() []Step { return nil }
func (lu *instanceConsoleLU) Result() any   { return lu.Out }
