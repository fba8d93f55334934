package baremetal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/corral/corral/internal/baremetal/configdrive"
	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/nodeapi"
)

// workInterface is the interface whose implementation does a kind of
// work.
var workInterface = map[string]string{
	workVerify:   IfPower,
	workClean:    IfDeploy,
	workInspect:  IfInspect,
	workDeploy:   IfDeploy,
	workTearDown: IfDeploy,
	workRescue:   IfRescue,
	workUnrescue: IfRescue,
	workAdopt:    IfDeploy,
}

// checkImpl refuses work the machine's interfaces cannot do.
func checkImpl(m *config.Machine, work, impl string) error {
	switch {
	case impl == "fake":
		return nil
	case work == workInspect:
		return ecode.Errorf(ecode.Inval, "Node %s cannot be inspected: its inspect interface is %q.", m.UUID, impl)
	case impl == "agent", impl == "direct", impl == "ipmitool", impl == "redfish":
		return nil
	}
	return ecode.Errorf(ecode.Inval, "Node %s: the %s interface %q cannot %s.", m.UUID, workInterface[work], impl, work)
}

// needsConductor says whether any action on m goes through a node: its
// BMC, or its agent.
func needsConductor(m *config.Machine) bool {
	return m.Interfaces.Power != "fake" || m.Interfaces.Rescue == "agent" || m.Interfaces.Deploy == "direct"
}

// Conductor is the node that acts on m now (see conductor).
func (d *Deps) Conductor(m *config.Machine) (*config.Node, error) { return d.conductor(m) }

// conductor picks the node acting on m: an online node of the node group
// named by the machine's conductor group (any group when it is ""),
// spread by the machine's uuid so that machines share the nodes.
func (d *Deps) conductor(m *config.Machine) (*config.Node, error) {
	group := ""
	if m.ConductorGroup != "" {
		g, ok := d.Cfg.Group(m.ConductorGroup)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "No conductor service registered which supports conductor group \"%s\".", m.ConductorGroup)
		}
		group = g.UUID
	}
	var nodes []*config.Node
	for _, n := range d.Cfg.Nodes() {
		if !n.Offline && (group == "" || n.Group == group) {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) == 0 {
		return nil, ecode.Errorf(ecode.Environ, "No online node can conduct node %s (conductor group %q).", m.UUID, m.ConductorGroup)
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].UUID < nodes[j].UUID })
	h := fnv.New32a()
	h.Write([]byte(m.UUID))
	return nodes[int(h.Sum32())%len(nodes)], nil
}

// call runs a node RPC on the unit's conductor.
func (u *provisionUnit) call(ctx context.Context, s *engine.StepCtx, method string, args, reply any) error {
	n, ok := s.Cfg().Node(u.Conductor)
	if !ok {
		return ecode.Errorf(ecode.Environ, "the conductor node %s of this action left the cluster", u.Conductor)
	}
	return s.RPC(ctx, n, method, args, reply)
}

// portRefs are the machine's ports as its conductor node sees them.
func portRefs(cfg *confdb.DB, m *config.Machine) []nodeapi.MachinePortRef {
	var out []nodeapi.MachinePortRef
	for _, p := range cfg.Ports(m.UUID) {
		id, _ := p.LocalLinkConnection["port_id"].(string)
		out = append(out, nodeapi.MachinePortRef{MAC: p.Address, PortID: id})
	}
	return out
}

// moveTo puts a machine with the bridged network interface on the named
// network of its conductor; other machines stay where they are wired.
func (u *provisionUnit) moveTo(ctx context.Context, s *engine.StepCtx, m *config.Machine, network string) error {
	if m.Interfaces.Network != "bridged" {
		return nil
	}
	args := nodeapi.MachineNetworkArgs{Machine: m.UUID, Ports: portRefs(s.Cfg(), m), Network: network}
	if err := u.call(ctx, s, nodeapi.MachineNetwork, args, nil); err != nil {
		return fmt.Errorf("moving the ports to the %s network: %w", network, err)
	}
	return nil
}

// bootNetwork is the network the machine boots the agent on for work.
func (d *Deps) bootNetwork(work string) string {
	if work == workRescue {
		return d.Networks.Rescue
	}
	return d.Networks.Provisioning
}

func bmcOf(m *config.Machine) nodeapi.MachineBMC {
	return nodeapi.MachineBMC{Machine: m.UUID, Driver: m.Driver, DriverInfo: m.DriverInfo}
}

// power runs a power action on the machine through the conductor and
// records the state it reports.
func (u *provisionUnit) power(ctx context.Context, s *engine.StepCtx, m *config.Machine, action string) error {
	if m.Interfaces.Power == "fake" {
		m.PowerState = string(states.Power(action).EndsIn())
		return nil
	}
	var r nodeapi.MachinePowerReply
	if err := u.call(ctx, s, nodeapi.MachinePower, nodeapi.MachinePowerArgs{MachineBMC: bmcOf(m), Action: action}, &r); err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	m.PowerState = r.PowerState
	return nil
}

// workSteps are the steps of a phase's work: nothing for fake
// implementations (the closing transition alone), the ramdisk boot, the
// wait for the agent and the agent's command for the agent-driven ones.
func (d *Deps) workSteps(u *provisionUnit, ph phase) []subStep {
	name := ph.Work
	if name == "" {
		name = string(ph.Then)
	}
	if ph.Impl == "" || ph.Impl == "fake" {
		return []subStep{{name: name}}
	}
	switch ph.Work {
	case workVerify:
		return []subStep{{name: "verify the BMC", run: func(ctx context.Context, s *engine.StepCtx, m *config.Machine) error {
			return u.power(ctx, s, m, "")
		}}}
	case workRescue, workDeploy, workClean:
		return append(u.agentBoot(ph), u.agentCommand(ph))
	case workUnrescue, workTearDown:
		return []subStep{{name: "boot from disk", run: func(ctx context.Context, s *engine.StepCtx, m *config.Machine) error {
			return u.bootDisk(ctx, s, m, ph.Work == workUnrescue)
		}}}
	}
	return []subStep{{name: name}}
}

// agentBoot boots the agent's ramdisk and waits for it: power off, set up
// the ramdisk boot with a new agent token, power on, show the wait state,
// park until the agent heartbeats (or the callback timeout fails the
// action), then take the resume transition.
func (u *provisionUnit) agentBoot(ph phase) []subStep {
	return []subStep{
		{name: "boot the agent's ramdisk", run: func(ctx context.Context, s *engine.StepCtx, m *config.Machine) error {
			return u.bootRamdisk(ctx, s, m, u.d.bootNetwork(ph.Work))
		}},
		{name: "show the wait for the agent", run: func(ctx context.Context, s *engine.StepCtx, m *config.Machine) error {
			to, err := states.Next(states.State(m.ProvisionState), states.EventWait)
			if err != nil {
				return err
			}
			u.setState(m, to)
			u.Deadline = float64(u.d.now().Add(u.d.callbackTimeout(ph.Work)).Unix())
			return nil
		}},
		{name: "wait for the agent", run: u.awaitAgent},
	}
}

func (d *Deps) callbackTimeout(work string) time.Duration {
	switch work {
	case workRescue:
		return d.Timeouts.RescueCallback
	case workDeploy:
		return d.Timeouts.DeployCallback
	}
	return d.Timeouts.CleanCallback
}

func (u *provisionUnit) bootRamdisk(ctx context.Context, s *engine.StepCtx, m *config.Machine, network string) error {
	if err := u.power(ctx, s, m, string(states.PowerOff)); err != nil {
		return err
	}
	if err := u.moveTo(ctx, s, m, network); err != nil {
		return err
	}
	token, err := newAgentToken()
	if err != nil {
		return err
	}
	pin, err := certPin(u.d.AgentAPICert)
	if err != nil {
		return err
	}
	args := nodeapi.MachineBootPrepareArgs{MachineBMC: bmcOf(m), BootInterface: m.Interfaces.Boot,
		APIURL: u.d.AgentAPIURL, APICASHA256: pin, KernelParams: kernelParams(m),
		Ports: portRefs(s.Cfg(), m), Network: network}
	if args.APIURL == "" {
		return ecode.Errorf(ecode.Environ, "corrald has no --baremetal-api-url: the agent of node %s could not call back", m.UUID)
	}
	if err := u.call(ctx, s, nodeapi.MachineBootPrepare, args, nil); err != nil {
		return fmt.Errorf("preparing the ramdisk boot: %w", err)
	}
	s.Tx().PutAgentRecord(confdb.AgentRecord{Machine: m.UUID, Token: token})
	return u.power(ctx, s, m, string(states.PowerOn))
}

// kernelParams are the machine's kernel_append_params (instance_info
// over driver_info, as Ironic reads them).
func kernelParams(m *config.Machine) string {
	for _, d := range []map[string]any{m.InstanceInfo, m.DriverInfo} {
		if v, ok := d["kernel_append_params"].(string); ok {
			return v
		}
	}
	return ""
}

// awaitAgent parks until the agent's heartbeat, then resumes the action.
func (u *provisionUnit) awaitAgent(ctx context.Context, s *engine.StepCtx, m *config.Machine) error {
	rec, _, err := s.Cfg().AgentRecord(ctx, m.UUID)
	if err != nil {
		return err
	}
	if rec == nil || rec.URL == "" {
		deadline := time.Unix(int64(u.Deadline), 0)
		if !u.d.now().Before(deadline) {
			return ecode.ExecErrorf("Timeout reached while waiting for callback for node %s", m.UUID)
		}
		return s.Suspend(ctx, deadline, AgentEvent(m.UUID))
	}
	to, err := states.Next(states.State(m.ProvisionState), states.EventResume)
	if err != nil {
		return err
	}
	u.setState(m, to)
	return nil
}

// agentCommand runs the phase's command on the agent and returns the
// machine to its disk where the action ends there.
func (u *provisionUnit) agentCommand(ph phase) subStep {
	names := map[string]string{workRescue: "finalize the rescue", workDeploy: "write the image", workClean: "erase the disk's metadata"}
	return subStep{name: names[ph.Work], run: func(ctx context.Context, s *engine.StepCtx, m *config.Machine) error {
		rec, _, err := s.Cfg().AgentRecord(ctx, m.UUID)
		if err != nil {
			return err
		}
		if rec == nil {
			return ecode.ExecErrorf("node %s: the agent's record is gone", m.UUID)
		}
		cmd, params, err := u.commandOf(ctx, ph.Work, m, s)
		if err != nil {
			return err
		}
		var r nodeapi.MachineAgentCommandReply
		args := nodeapi.MachineAgentCommandArgs{Machine: m.UUID, URL: rec.URL, Token: rec.Token, Name: cmd, Params: params, Wait: true, Timeout: 3600}
		if err := u.call(ctx, s, nodeapi.MachineAgentCommand, args, &r); err != nil {
			return fmt.Errorf("agent command %s: %w", cmd, err)
		}
		if r.Status != "SUCCEEDED" {
			return ecode.ExecErrorf("agent command %s on node %s ended %s: %v", cmd, m.UUID, r.Status, r.Error)
		}
		s.Tx().DropAgentRecord(m.UUID)
		if ph.Work == workRescue {
			// The machine stays in the ramdisk until unrescue, back on
			// its tenant network, where its owner reaches it.
			return u.moveTo(ctx, s, m, u.d.Networks.Tenant)
		}
		if err := u.bootDisk(ctx, s, m, false); err != nil {
			return err
		}
		if ph.Work != workDeploy {
			return nil // a cleaned machine waits powered off, as Ironic leaves it
		}
		if err := u.moveTo(ctx, s, m, u.d.Networks.Tenant); err != nil {
			return err
		}
		return u.power(ctx, s, m, string(states.PowerOn))
	}}
}

// commandOf is the agent command of a kind of work and its parameters.
func (u *provisionUnit) commandOf(ctx context.Context, work string, m *config.Machine, s *engine.StepCtx) (string, map[string]any, error) {
	switch work {
	case workRescue:
		hash, _ := m.InstanceInfo[keyRescueHash].(string)
		p := map[string]any{"rescue_password": hash, "hashed": true}
		if keys := s.Op().Strings("ssh_public_keys"); len(keys) > 0 {
			p["ssh_public_keys"] = keys
		}
		return "rescue.finalize_rescue", p, nil
	case workDeploy:
		info, err := imageInfo(m)
		if err != nil {
			return "", nil, err
		}
		p := map[string]any{"image_info": info}
		if cd := m.InstanceInfo[keyConfigDrive]; cd != nil {
			// As Ironic: the ISO, gzip-compressed and base64-encoded, in
			// the command's configdrive. Commands are logged by name only.
			enc, err := configdrive.Builder{}.Encode(ctx, cd, configdrive.Machine{UUID: m.UUID, Name: m.Name})
			if err != nil {
				return "", nil, err
			}
			p["configdrive"] = enc
		}
		return "standby.prepare_image", p, nil
	}
	return "deploy.erase_devices_metadata", map[string]any{}, nil
}

// imageInfo is the agent's image_info from the machine's instance_info.
func imageInfo(m *config.Machine) (map[string]any, error) {
	src, _ := m.InstanceInfo["image_source"].(string)
	if !strings.HasPrefix(src, "http://") && !strings.HasPrefix(src, "https://") {
		return nil, ecode.Errorf(ecode.Inval, "Node %s: instance_info/image_source must be an HTTP(S) URL of the image, not %q.", m.UUID, src)
	}
	info := map[string]any{"id": src, "urls": []any{src}, "disk_format": "raw"}
	if f, ok := m.InstanceInfo["image_disk_format"].(string); ok && f != "" {
		info["disk_format"] = f
	}
	algo, _ := m.InstanceInfo["image_os_hash_algo"].(string)
	val, _ := m.InstanceInfo["image_os_hash_value"].(string)
	sum, _ := m.InstanceInfo["image_checksum"].(string)
	switch {
	case algo != "" && val != "":
		info["os_hash_algo"], info["os_hash_value"] = algo, val
	case sum != "":
		info["checksum"] = sum
	default:
		return nil, ecode.Errorf(ecode.Inval, "Node %s: instance_info needs image_os_hash_algo and image_os_hash_value, or image_checksum.", m.UUID)
	}
	return info, nil
}

// bootDisk powers the machine off, removes the ramdisk boot and, when on
// is set, powers it on from its disk.
func (u *provisionUnit) bootDisk(ctx context.Context, s *engine.StepCtx, m *config.Machine, on bool) error {
	if err := u.power(ctx, s, m, string(states.PowerOff)); err != nil {
		return err
	}
	args := nodeapi.MachineBootCleanUpArgs{MachineBMC: bmcOf(m), BootInterface: m.Interfaces.Boot, Ports: portRefs(s.Cfg(), m)}
	if err := u.call(ctx, s, nodeapi.MachineBootCleanUp, args, nil); err != nil {
		return fmt.Errorf("removing the ramdisk boot: %w", err)
	}
	s.Tx().DropAgentRecord(m.UUID)
	if !on {
		return nil
	}
	return u.power(ctx, s, m, string(states.PowerOn))
}

// undoWork removes what a failed or aborted action set up on m: the
// agent's record and the ramdisk boot. The machine is left powered as it
// is, as Ironic leaves it.
func (d *Deps) undoWork(ctx context.Context, s *engine.StepCtx, m *config.Machine) {
	s.Tx().DropAgentRecord(m.UUID)
	if m.Interfaces.Boot == "fake" || m.Interfaces.Power == "fake" {
		return
	}
	n, err := d.conductor(m)
	if err != nil {
		return
	}
	args := nodeapi.MachineBootCleanUpArgs{MachineBMC: bmcOf(m), BootInterface: m.Interfaces.Boot, Ports: portRefs(s.Cfg(), m)}
	_ = s.RPC(ctx, n, nodeapi.MachineBootCleanUp, args, nil)
	if m.Interfaces.Network == "bridged" && strings.Contains(m.ProvisionState, "rescu") {
		// A rescue that failed or was aborted leaves the rescue network:
		// the machine's owner finds it back on its tenant network.
		net := nodeapi.MachineNetworkArgs{Machine: m.UUID, Ports: portRefs(s.Cfg(), m), Network: d.Networks.Tenant}
		_ = s.RPC(ctx, n, nodeapi.MachineNetwork, net, nil)
	}
}

// certPin is the SHA-256 fingerprint (hex) of the first certificate in the
// PEM file path; "" for no file.
func certPin(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the Bare Metal API's certificate to pin: %w", err)
	}
	b, _ := pem.Decode(raw)
	if b == nil || b.Type != "CERTIFICATE" {
		return "", ecode.Errorf(ecode.Environ, "%s holds no PEM certificate", path)
	}
	sum := sha256.Sum256(b.Bytes)
	return hex.EncodeToString(sum[:]), nil
}
