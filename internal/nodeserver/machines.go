package nodeserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/bootiso"
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/seconds"
)

// Boot interfaces of MachineBootPrepare and MachineBootCleanUp.
const (
	bootFake                = "fake"
	bootRedfishVirtualMedia = "redfish-virtual-media"
	bootPXE                 = "pxe"
	bootIPXE                = "ipxe"
)

// machineRoutes registers the conductor's machine RPCs: corral-node acts on
// a bare-metal machine's BMC, boot media and agent for corrald.
func (s *Server) machineRoutes() {
	handle(s, nodeapi.MachinePower, s.machinePower)
	handle(s, nodeapi.MachineBootDevice, s.machineBootDevice)
	handle(s, nodeapi.MachineBootPrepare, s.machineBootPrepare)
	handle(s, nodeapi.MachineBootCleanUp, s.machineBootCleanUp)
	handle(s, nodeapi.MachineAgentCommand, s.machineAgentCommand)
	handle(s, nodeapi.MachineNetwork, s.machineNetwork)
	s.rpc.HandleStream(nodeapi.MachineConsole, s.machineConsole)
}

// redacted classifies err for the wire with every secret replaced by
// "******": drivers already clean what a BMC echoes, this also covers the
// agent's replies and anything a cause carries.
func redacted(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	kind, class := ecode.OpExecError, ecode.Fault
	if e, ok := ecode.As(err); ok {
		kind, class = e.Kind, e.Class
	}
	msg := err.Error()
	for _, sec := range secrets {
		if sec != "" {
			msg = strings.ReplaceAll(msg, sec, "******")
		}
	}
	return &ecode.Error{Kind: kind, Class: class, Msg: msg, Err: err}
}

// bmcSecrets are the values of the secret driver_info keys of b.
func bmcSecrets(b nodeapi.MachineBMC) []string {
	var out []string
	for _, k := range driver.SecretKeys(b.Driver) {
		if v, ok := b.DriverInfo[k].(string); ok && v != "" {
			out = append(out, v)
		}
	}
	return out
}

func checkMachineID(id string) error {
	if !validMachineID(id) {
		return ecode.Errorf(ecode.Inval, "machine %q is not a machine uuid", id)
	}
	return nil
}

// machineDriver makes the BMC driver of b, one per call: drivers hold no
// connection across calls (fake-hardware keeps its state per machine in
// the process).
func machineDriver(b nodeapi.MachineBMC) (driver.Driver, error) {
	if err := checkMachineID(b.Machine); err != nil {
		return nil, err
	}
	return driver.New(b.Driver, b.DriverInfo, driver.WithMachine(b.Machine))
}

func (s *Server) machinePower(ctx context.Context, a nodeapi.MachinePowerArgs) (any, error) {
	reply, err := s.doMachinePower(ctx, a)
	return reply, redacted(err, bmcSecrets(a.MachineBMC)...)
}

func (s *Server) doMachinePower(ctx context.Context, a nodeapi.MachinePowerArgs) (any, error) {
	d, err := machineDriver(a.MachineBMC)
	if err != nil {
		return nil, err
	}
	if a.Action != "" {
		s.log.Info("machine power", "machine", a.Machine, "driver", a.Driver, "action", a.Action)
		if err := d.SetPower(ctx, a.Action, seconds.Duration(a.Timeout)); err != nil {
			return nil, fmt.Errorf("machine %s: %s: %w", a.Machine, a.Action, err)
		}
	}
	state, err := d.PowerState(ctx)
	if err != nil {
		return nil, fmt.Errorf("machine %s: power state: %w", a.Machine, err)
	}
	return nodeapi.MachinePowerReply{PowerState: state}, nil
}

func (s *Server) machineBootDevice(ctx context.Context, a nodeapi.MachineBootDeviceArgs) (any, error) {
	d, err := machineDriver(a.MachineBMC)
	if err == nil {
		s.log.Info("machine boot device", "machine", a.Machine, "driver", a.Driver, "device", a.Device, "persistent", a.Persistent)
		if err = d.SetBootDevice(ctx, a.Device, a.Persistent); err != nil {
			err = fmt.Errorf("machine %s: boot device %s: %w", a.Machine, a.Device, err)
		}
	}
	return nil, redacted(err, bmcSecrets(a.MachineBMC)...)
}

// bootInterfaceSupported refuses the boot interfaces this node cannot set
// up, before anything changes.
func bootInterfaceSupported(iface string) error {
	switch iface {
	case bootFake, bootRedfishVirtualMedia, bootPXE, bootIPXE:
		return nil
	}
	return ecode.Errorf(ecode.Inval, "unknown boot interface %q", iface)
}

// virtualMedia is the machine's driver when it has a virtual CD drive.
func virtualMedia(b nodeapi.MachineBMC) (driver.Driver, driver.VirtualMedia, error) {
	d, err := machineDriver(b)
	if err != nil {
		return nil, nil, err
	}
	vm, ok := d.(driver.VirtualMedia)
	if !ok {
		return nil, nil, ecode.Errorf(ecode.Inval, "boot interface %s needs a BMC with virtual media; the %s driver has none", bootRedfishVirtualMedia, b.Driver)
	}
	return d, vm, nil
}

// checkBootRequest refuses a boot interface this node cannot serve and a
// machine id that could not name a directory or a URL part.
func checkBootRequest(bootInterface, machine string) error {
	if err := bootInterfaceSupported(bootInterface); err != nil {
		return err
	}
	return checkMachineID(machine)
}

func (s *Server) machineBootPrepare(ctx context.Context, a nodeapi.MachineBootPrepareArgs) (any, error) {
	return nil, redacted(s.doMachineBootPrepare(ctx, a), bmcSecrets(a.MachineBMC)...)
}

// doMachineBootPrepare sets up the next boot into the agent's ramdisk. For
// PXE and iPXE: see doMachinePXEPrepare. For virtual media: a fresh ISO with the machine's command line, any
// previous CD ejected, the new one inserted by URL, the next boot (once)
// from the CD; only then are the machine's older ISOs deleted.
func (s *Server) doMachineBootPrepare(ctx context.Context, a nodeapi.MachineBootPrepareArgs) error {
	if err := checkBootRequest(a.BootInterface, a.Machine); err != nil {
		return err
	}
	switch a.BootInterface {
	case bootFake:
		return nil
	case bootPXE, bootIPXE:
		return s.doMachinePXEPrepare(ctx, a)
	}
	d, vm, err := virtualMedia(a.MachineBMC)
	if err != nil {
		return err
	}
	cmdline, err := bootiso.AgentCommandLine(a.APIURL, a.APICASHA256, a.KernelParams)
	if err != nil {
		return err
	}
	if !s.media.enabled() {
		return ecode.Errorf(ecode.Environ, "node %s serves no machine boot media: start corral-node with --machine-media-listen to boot machines through virtual media", s.name)
	}
	unlock := s.media.lockMachine(a.Machine)
	defer unlock()
	iso, mediaURL, err := s.media.build(ctx, a.Machine, cmdline)
	if err != nil {
		return fmt.Errorf("machine %s: boot ISO: %w", a.Machine, err)
	}
	s.log.Info("machine boot media built", "machine", a.Machine, "iso", iso)
	if err := vm.EjectCD(ctx); err != nil {
		// An empty drive may refuse to eject; inserting tells.
		s.log.Warn("machine virtual media: eject before insert failed", "machine", a.Machine, "err", redacted(err, bmcSecrets(a.MachineBMC)...))
	}
	if err := vm.InsertCD(ctx, mediaURL); err != nil {
		s.media.removeExcept(a.Machine, "")
		return fmt.Errorf("machine %s: insert the boot ISO: %w", a.Machine, err)
	}
	if err := d.SetBootDevice(ctx, driver.BootCDROM, false); err != nil {
		return fmt.Errorf("machine %s: boot from the CD: %w", a.Machine, err)
	}
	return s.media.removeExcept(a.Machine, iso)
}

func (s *Server) machineBootCleanUp(ctx context.Context, a nodeapi.MachineBootCleanUpArgs) (any, error) {
	return nil, redacted(s.doMachineBootCleanUp(ctx, a), bmcSecrets(a.MachineBMC)...)
}

// doMachineBootCleanUp undoes a prepare: the CD ejected, its ISOs deleted,
// and the machine booting from its disk from now on.
func (s *Server) doMachineBootCleanUp(ctx context.Context, a nodeapi.MachineBootCleanUpArgs) error {
	if err := checkBootRequest(a.BootInterface, a.Machine); err != nil {
		return err
	}
	switch a.BootInterface {
	case bootFake:
		return nil
	case bootPXE, bootIPXE:
		return s.doMachinePXECleanUp(ctx, a)
	}
	d, vm, err := virtualMedia(a.MachineBMC)
	if err != nil {
		return err
	}
	unlock := s.media.lockMachine(a.Machine)
	defer unlock()
	if err := vm.EjectCD(ctx); err != nil {
		return fmt.Errorf("machine %s: eject the boot ISO: %w", a.Machine, err)
	}
	if err := s.media.removeExcept(a.Machine, ""); err != nil {
		return err
	}
	if err := d.SetBootDevice(ctx, driver.BootDisk, true); err != nil {
		return fmt.Errorf("machine %s: boot from the disk: %w", a.Machine, err)
	}
	s.log.Info("machine boot media cleaned up", "machine", a.Machine)
	return nil
}

// machineAgentCommand runs one command of the machine's agent. The client
// is made for this call alone (its own transport: a connection pooled
// from an earlier boot would be reset by the new agent); the token is in
// no log and no error.
func (s *Server) machineAgentCommand(ctx context.Context, a nodeapi.MachineAgentCommandArgs) (any, error) {
	reply, err := s.doMachineAgentCommand(ctx, a)
	return reply, redacted(err, a.Token)
}

func (s *Server) doMachineAgentCommand(ctx context.Context, a nodeapi.MachineAgentCommandArgs) (*nodeapi.MachineAgentCommandReply, error) {
	if err := checkMachineID(a.Machine); err != nil {
		return nil, err
	}
	if a.Name == "" || strings.ContainsAny(a.Name, " /?#") {
		return nil, ecode.Errorf(ecode.Inval, "agent command %q is not an <extension>.<command> name", a.Name)
	}
	o := agentapi.ClientOptions{DialContext: s.agentDialer(a.URL)}
	if t := seconds.Duration(a.Timeout); t > 0 {
		o.Timeout, o.WaitTimeout = t, t
	}
	cl, err := agentapi.NewClient(a.URL, a.Token, o)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "machine %s: %w", a.Machine, err)
	}
	defer cl.Close()
	s.log.Info("machine agent command", "machine", a.Machine, "command", a.Name, "wait", a.Wait)
	params := a.Params
	if params == nil {
		params = map[string]any{}
	}
	res, err := cl.RunCommand(ctx, a.Name, params, a.Wait)
	if err != nil {
		return nil, agentError(a.Machine, err)
	}
	reply := &nodeapi.MachineAgentCommandReply{ID: res.ID, Status: res.CommandStatus}
	if res.CommandError != nil {
		reply.Error = res.CommandError
	}
	if raw := res.CommandResult; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &reply.Result); err != nil {
			return nil, ecode.ExecErrorf("machine %s: agent command %s: its command_result is not an object: %w", a.Machine, a.Name, err)
		}
	}
	return reply, nil
}

// agentError classifies a failed agent call: the agent's refusals by their
// status, anything else (unreachable, timed out) as an execution error.
func agentError(machine string, err error) error {
	var ae *agentapi.AgentError
	if errors.As(err, &ae) {
		class := ecode.Fault
		switch {
		case ae.Status == 401 || ae.Status == 403:
			class = ecode.Inval
		case ae.Status == 404:
			class = ecode.NoEnt
		case ae.Status == 409:
			class = ecode.TempNoRes
		case ae.Status >= 400 && ae.Status < 500:
			class = ecode.Inval
		}
		return &ecode.Error{Kind: ecode.OpExecError, Class: class, Msg: fmt.Sprintf("machine %s: %v", machine, err), Err: err}
	}
	return ecode.ExecErrorf("machine %s: %w", machine, err)
}
