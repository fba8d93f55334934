package cmdlib

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/iallocator"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]{0,62})(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,62}))*$`)

// CheckName validates an instance or node name (a DNS-style name).
func CheckName(kind, name string) error {
	if len(name) > 253 || !nameRE.MatchString(name) {
		return ecode.Errorf(ecode.Inval, "Invalid %s name '%s': use letters, digits, '-' and '.' (a DNS name)", kind, name)
	}
	return nil
}

type instanceCreateLU struct {
	Inst      *config.Instance `json:"instance"`
	Node      string           `json:"node"` // primary node name, for the result
	Start     bool             `json:"start"`
	NoInstall bool             `json:"no_install"`
	Debug     int              `json:"debug"`
	Mode      string           `json:"mode,omitempty"`
	Import    *importPlan      `json:"import,omitempty"`
}

func (lu *instanceCreateLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := []locking.Request{bgl(locking.Shared), instLock(locking.Exclusive, op.Str("instance_name"))}
	reqs = append(reqs, nicNetworkLocks(p, op.List("nics"))...)
	if pn := op.Str("pnode"); pn != "" {
		if n, ok := p.Cfg.Node(pn); ok {
			return append(reqs, nodeLock(locking.Exclusive, n.UUID), nodeResLock(locking.Exclusive, n.UUID))
		}
		return reqs // Prereq reports the unknown node
	}
	return append(reqs,
		locking.Request{Level: locking.LevelNodeAlloc, Names: []string{"NAL"}, Mode: locking.Exclusive},
		nodeLock(locking.Shared, locking.All), nodeResLock(locking.Shared, locking.All))
}

func (lu *instanceCreateLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	c := p.Cfg.Cluster()
	name := op.Str("instance_name")
	if err := CheckName("instance", name); err != nil {
		return err
	}
	if op.Str("disk_template") == "" && len(c.EnabledDiskTemplates) > 0 {
		// Ganeti's default: the cluster's first enabled template.
		op.Params["disk_template"] = c.EnabledDiskTemplates[0]
	}
	if err := lu.prereqImport(ctx, p, op); err != nil {
		return err
	}
	if err := p.Cfg.CheckInstanceNameFree(name, ""); err != nil {
		return err
	}
	alloc, err := p.allocatorFor(op.Str("iallocator"))
	if err != nil {
		return err
	}
	tmpl := op.Str("disk_template")
	if !diskTemplateSupported(tmpl) {
		return ecode.Errorf(ecode.Inval, "Disk template '%s' is not supported (supported: %s)", tmpl, strings.Join(supportedDiskTemplates, ", "))
	}
	if tmpl == config.DTSharedFile && c.SharedFileStorageDir == "" {
		return ecode.Errorf(ecode.State, "Disk template sharedfile needs the cluster's shared_file_storage_dir (cluster modify --shared-file-storage-dir)")
	}
	if !contains(c.EnabledDiskTemplates, tmpl) {
		return ecode.Errorf(ecode.State, "Disk template '%s' is not enabled in the cluster (enabled: %s)", tmpl, strings.Join(c.EnabledDiskTemplates, ", "))
	}
	hv := op.Str("hypervisor")
	if hv == "" {
		hv = c.DefaultHypervisor()
	}
	if !contains(c.EnabledHypervisors, hv) {
		return ecode.Errorf(ecode.State, "Hypervisor '%s' is not enabled in the cluster (enabled: %s)", hv, strings.Join(c.EnabledHypervisors, ", "))
	}
	hvp, err := checkHVParams(c, hv, op.Dict("hvparams"))
	if err != nil {
		return err
	}
	bep, err := checkBEParams(op.Dict("beparams"), true)
	if err != nil {
		return err
	}
	inst := &config.Instance{
		Meta:         config.Meta{UUID: config.NewUUID(), Name: name, Tags: op.Strings("tags")},
		Hypervisor:   hv,
		HVParams:     hvp,
		BEParams:     bep,
		OSParams:     config.Params(op.Dict("osparams")),
		AdminState:   config.AdminDown,
		DiskTemplate: tmpl,
	}
	if priv, err := privateOSParamsUpdate(op); err != nil {
		return err
	} else if priv != nil {
		inst.OSParamsPriv = config.Params(priv)
	}
	if inst.Disks, err = parseDisks(op.List("disks"), tmpl); err != nil {
		return err
	}
	if inst.NICs, err = parseNICs(p, c, op.List("nics")); err != nil {
		return err
	}
	lu.NoInstall = op.Bool("no_install")
	osName := op.Str("os_type")
	if osName == "" && !lu.NoInstall && lu.Mode == modeCreate {
		return ecode.Errorf(ecode.Inval, "No guest OS given (os_type); pass one or set no_install")
	}
	if osName != "" && lu.Mode == modeCreate && osBlacklisted(c, osName) {
		return ecode.Errorf(ecode.State, "Guest OS '%s' is not allowed for installation", osName)
	}
	inst.OS = osName
	if len(inst.HVParams) > 0 || inst.BEParams["vcpus"] != nil {
		if err := validateInstanceHV(c, inst); err != nil {
			return err
		}
	}

	be := config.Fill(c.BEParams, inst.BEParams)
	if err := checkMemoryOrder(be); err != nil {
		return err
	}
	nd := need{hv: hv, template: tmpl, memMiB: config.MemoryMiB(be), vcpus: config.VCPUs(be),
		spindles: config.ParamInt(be["spindle_use"], 1)}
	if !op.Bool("ignore_ipolicy") {
		nd.spec = fullSpecs(be, tmpl, inst.Disks, len(inst.NICs))
	}
	for _, d := range inst.Disks {
		nd.diskMiB += d.SizeMiB
	}
	if gn := op.Str("group_name"); gn != "" {
		g, ok := p.Cfg.Group(gn)
		if !ok {
			return ecode.Errorf(ecode.NoEnt, "Node group '%s' not known", gn)
		}
		nd.group = g.UUID
	}
	var node *config.Node
	if pn := op.Str("pnode"); pn != "" {
		if node, err = p.Cfg.MustNode(pn); err != nil {
			return err
		}
		if nd.group != "" && node.Group != nd.group {
			return ecode.Errorf(ecode.Inval, "Node %s is not in node group '%s' (group_name)", node.Name, op.Str("group_name"))
		}
		if err := checkNodeOnline(node); err != nil {
			return err
		}
		if err := checkNodeVMCapable(node); err != nil {
			return err
		}
		if node.Drained {
			return ecode.Errorf(ecode.State, "Node %s is drained: no new instances may be placed on it", node.Name)
		}
		if err := p.checkNodeRoom(ctx, node, nd, ""); err != nil {
			return err
		}
	} else if node, err = p.placeNew(ctx, alloc, inst, nd); err != nil {
		return err
	}
	inst.PrimaryNode = node.UUID
	if err := applyNICNetworks(p, inst.NICs, node, op.Bool("conflicts_check")); err != nil {
		return err
	}
	if inst.OS != "" {
		if err := p.checkOSParams(ctx, node, inst.OS, op.Bool("force_variant"), config.InstanceOSParams(c, inst), config.InstancePrivateOSParams(c, inst.OS, inst.OSParamsPriv)); err != nil {
			return err
		}
	}
	lu.Inst, lu.Node, lu.Start, lu.Debug = inst, node.Name, op.Bool("start"), op.Int("debug_level")
	return nil
}

// placeNew chooses the primary node of a new instance: the built-in
// allocator, or the allocator the op names (or the cluster's default) run
// on the protocol's allocate request.
func (p *Processor) placeNew(ctx context.Context, alloc iallocator.Allocator, inst *config.Instance, nd need) (*config.Node, error) {
	if _, builtin := alloc.(iallocator.Builtin); builtin {
		return p.allocate(ctx, nd)
	}
	req := &iallocator.Allocate{Name: inst.Name, DiskTemplate: inst.DiskTemplate, OS: inst.OS, Tags: inst.Tags,
		Memory: nd.memMiB, VCPUs: config.VCPUs(config.Fill(p.Cfg.Cluster().BEParams, inst.BEParams)), SpindleUse: config.ParamInt(config.Fill(p.Cfg.Cluster().BEParams, inst.BEParams)["spindle_use"], 1),
		Hypervisor: inst.Hypervisor}
	if g, ok := p.Cfg.Group(nd.group); ok {
		req.GroupName = g.Name
	}
	for _, d := range inst.Disks {
		req.Disks = append(req.Disks, iallocator.Disk{SizeMiB: d.SizeMiB, Mode: d.Mode})
	}
	for _, n := range inst.NICs {
		req.NICs = append(req.NICs, iallocator.NIC{MAC: n.MAC, IP: n.IP, Mode: n.Mode, Link: n.Link})
	}
	return p.allocateWith(ctx, alloc, req, nd)
}

// ReleaseAfter gives back the node-allocation lock and the other nodes'
// shared locks once the instance (and so its capacity) is reserved in the
// configuration: other creates may place instances meanwhile.
func (lu *instanceCreateLU) ReleaseAfter(step int) []locking.Level {
	if step == 0 {
		// The NICs' addresses are taken from their pools in step 0 too.
		return []locking.Level{locking.LevelNodeAlloc, locking.LevelNetwork}
	}
	return nil
}

// startStep is the index of the "start" step: the last one. An import has
// two more steps before it (filling the disks, the rename script); a plain
// create does not pay for their commits.
func (lu *instanceCreateLU) startStep() int { return len(lu.Steps()) - 1 }

func (lu *instanceCreateLU) Steps() []Step {
	steps := []Step{
		{"reserve", func(ctx context.Context, s *StepCtx) error {
			if err := reserveNICAddrs(ctx, s, lu.Inst); err != nil {
				return err
			}
			if hypervisorTakesPort(lu.Inst.Hypervisor) {
				if err := assignNetworkPort(ctx, s, lu.Inst); err != nil {
					return err
				}
			}
			s.Tx().PutInstance(lu.Inst.Clone())
			s.Logf(ctx, "Placing instance %s on node %s", lu.Inst.Name, lu.Node)
			return nil
		}},
		{"create-disks", func(ctx context.Context, s *StepCtx) error {
			node, err := s.Cfg().MustNode(lu.Node)
			if err != nil {
				return err
			}
			for i, d := range lu.Inst.Disks {
				s.Logf(ctx, "Creating disk %d (%d MiB)", i, d.SizeMiB)
				args := nodeapi.DiskArgs{InstanceUUID: lu.Inst.UUID, Template: lu.Inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
					Disk: nodeapi.DiskSpec{UUID: d.UUID, Name: d.Name, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(lu.Inst.DiskTemplate, node.UUID)}}
				var r nodeapi.DiskReply
				if err := s.RPC(ctx, node, nodeapi.DiskCreate, args, &r); err != nil {
					return fmt.Errorf("creating disk %d on %s: %w", i, node.Name, err)
				}
			}
			return nil
		}},
		{"install-os", func(ctx context.Context, s *StepCtx) error {
			if lu.NoInstall || lu.Inst.OS == "" || lu.Import != nil {
				return nil
			}
			node, err := s.Cfg().MustNode(lu.Node)
			if err != nil {
				return err
			}
			s.Logf(ctx, "Running the OS create scripts of %s", lu.Inst.OS)
			args := nodeapi.OSCreateArgs{Instance: s.p.Spec(lu.Inst), ForceVariant: s.Op().Bool("force_variant"),
				DebugLevel: lu.Debug, SecretParams: secretParams(s.Op())}
			var r nodeapi.OSReply
			return s.RPC(ctx, node, nodeapi.OSCreate, args, &r)
		}},
	}
	if lu.Import != nil {
		steps = append(steps, lu.importDisksStep(), lu.renameOSStep())
	}
	return append(steps, Step{"start", func(ctx context.Context, s *StepCtx) error {
		if !lu.Start {
			return nil
		}
		node, err := s.Cfg().MustNode(lu.Node)
		if err != nil {
			return err
		}
		s.Logf(ctx, "Starting instance %s", lu.Inst.Name)
		inst, err := s.Cfg().MustInstance(lu.Inst.UUID)
		if err != nil {
			return err
		}
		if err := s.RPC(ctx, node, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: s.p.Spec(inst)}, nil); err != nil {
			return err
		}
		inst.AdminState = config.AdminUp
		s.Tx().PutInstance(inst)
		return nil
	}})
}

// Revert removes what a failed create left: disks and the reservation.
func (lu *instanceCreateLU) Revert(ctx context.Context, s *StepCtx, failed error) {
	if lu.Inst == nil {
		return
	}
	if s.Step() >= lu.startStep() {
		// As Ganeti: an installed instance that fails to start stays, so
		// the operator can look at it; only the job fails. Make sure it is
		// not left running while the configuration says down.
		s.Logf(ctx, "Instance %s was created but not started: %v", lu.Inst.Name, failed)
		node, ok := s.Cfg().Node(lu.Node)
		if !ok {
			return
		}
		err := s.RPC(ctx, node, nodeapi.InstanceShutdown, nodeapi.ShutdownArgs{Instance: s.p.Spec(lu.Inst), Force: true}, nil)
		if inst, ok := s.Cfg().Instance(lu.Inst.UUID); ok && err != nil {
			// The node may have started it before it died: nothing would
			// ever stop an instance recorded as down. Recorded as up (as
			// Ganeti records it before starting), the watcher starts it
			// or finds it running once the node is back.
			s.Logf(ctx, "Could not make sure instance %s is stopped (%v): it stays marked up", lu.Inst.Name, err)
			inst.AdminState = config.AdminUp
			s.Tx().PutInstance(inst)
		}
		return
	}
	s.Logf(ctx, "Creation failed (%v); removing what was created", failed)
	if node, ok := s.Cfg().Node(lu.Node); ok {
		_ = s.RPC(ctx, node, nodeapi.InstanceShutdown, nodeapi.ShutdownArgs{Instance: s.p.Spec(lu.Inst), Force: true}, nil)
		for i, d := range lu.Inst.Disks {
			args := nodeapi.DiskArgs{InstanceUUID: lu.Inst.UUID, Template: lu.Inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
				Disk: nodeapi.DiskSpec{UUID: d.UUID, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(lu.Inst.DiskTemplate, node.UUID)}}
			if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
				// Recorded with the instance's removal: the watcher
				// removes the disk once the node answers again.
				s.Logf(ctx, "Could not remove disk %d (%v); it will be removed when node %s answers", i, err, node.Name)
				s.Tx().AddDiskRemoval(confdb.DiskRemoval{NodeUUID: node.UUID, InstanceUUID: lu.Inst.UUID, InstanceName: lu.Inst.Name,
					Template: lu.Inst.DiskTemplate, DiskUUID: d.UUID, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode})
			}
		}
	}
	if inst, ok := s.Cfg().Instance(lu.Inst.UUID); ok {
		if err := releaseNICAddrs(ctx, s, inst); err != nil {
			s.Logf(ctx, "Warning: could not give back the NICs' addresses: %v", err)
		}
		s.Tx().DeleteInstance(inst)
	}
}

func (lu *instanceCreateLU) Result() any {
	if lu.Node == "" {
		return []string{}
	}
	return []string{lu.Node}
}

func secretParams(op *opcodes.Op) map[string]string {
	m, ok := op.Params["osparams_secret"].(map[string]any)
	if !ok {
		return nil
	}
	return config.Params(m).Strings()
}

func parseDisks(raw []any, tmpl string) ([]config.Disk, error) {
	if tmpl == config.DTDiskless {
		if len(raw) > 0 {
			return nil, ecode.Errorf(ecode.Inval, "Diskless instances take no disks (got %d)", len(raw))
		}
		return nil, nil
	}
	if len(raw) == 0 {
		return nil, ecode.Errorf(ecode.Inval, "Disk template '%s' needs at least one disk", tmpl)
	}
	if len(raw) > 16 {
		return nil, ecode.Errorf(ecode.Inval, "Too many disks: %d (at most 16)", len(raw))
	}
	var out []config.Disk
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "Disk %d: expected a dict", i)
		}
		for k := range m {
			switch k {
			case "size", "mode", "name":
			default:
				return nil, ecode.Errorf(ecode.Inval, "Disk %d: unknown parameter '%s'", i, k)
			}
		}
		size, ok := m["size"].(float64)
		if !ok || size <= 0 || size != float64(int64(size)) {
			return nil, ecode.Errorf(ecode.Inval, "Disk %d: missing or invalid size (MiB, a positive integer)", i)
		}
		mode, _ := m["mode"].(string)
		if mode == "" {
			mode = "rw"
		}
		if mode != "rw" && mode != "ro" {
			return nil, ecode.Errorf(ecode.Inval, "Disk %d: invalid mode '%s' (rw or ro)", i, mode)
		}
		name, _ := m["name"].(string)
		out = append(out, config.Disk{UUID: config.NewUUID(), Name: name, SizeMiB: int64(size), Mode: mode})
	}
	return out, nil
}

var macRE = regexp.MustCompile(`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`)

func parseNICs(p *Processor, c *config.Cluster, raw []any) ([]config.NIC, error) {
	if len(raw) > 8 {
		return nil, ecode.Errorf(ecode.Inval, "Too many NICs: %d (at most 8)", len(raw))
	}
	var out []config.NIC
	seen := map[string]bool{}
	for i, r := range raw {
		m, ok := r.(map[string]any)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "NIC %d: expected a dict", i)
		}
		n := config.NIC{UUID: config.NewUUID()}
		modeGiven, linkGiven := false, false
		for k, v := range m {
			s, _ := v.(string)
			switch k {
			case "mac":
				n.MAC = strings.ToLower(s)
			case "ip":
				n.IP = s
			case "mode":
				n.Mode, modeGiven = s, v != nil && s != "auto"
				if s == "auto" {
					n.Mode = ""
				}
			case "link", "bridge":
				n.Link, linkGiven = s, v != nil
			case "name":
				n.Name = s
			case "network":
				n.Network = s
			case "vlan":
				if s != "" {
					return nil, ecode.Errorf(ecode.Inval, "NIC %d: NIC VLANs are not available in this version: the nodes' kernel has no bridge VLAN filtering", i)
				}
			default:
				return nil, ecode.Errorf(ecode.Inval, "NIC %d: unknown parameter '%s'", i, k)
			}
		}
		if err := checkNICNetwork(p, &n, modeGiven, linkGiven); err != nil {
			return nil, err
		}
		if n.Network == "" {
			if n.Mode == "" {
				n.Mode, _ = c.NICParams["mode"].(string)
			}
			if n.Link == "" {
				n.Link, _ = c.NICParams["link"].(string)
			}
			switch n.Mode {
			case "bridged":
			case "routed":
				if n.IP == "" {
					return nil, ecode.Errorf(ecode.Inval, "Routed nic mode requires an ip address if not attached to a network")
				}
			default:
				return nil, ecode.Errorf(ecode.Inval, "NIC %d: invalid mode '%s' (bridged or routed)", i, n.Mode)
			}
		}
		switch {
		case n.MAC == "" || n.MAC == "auto" || n.MAC == "generate":
			prefix := networkMACPrefix(p, c, n.Network)
			for tries := 0; ; tries++ {
				n.MAC = config.NewMAC(prefix)
				if !p.Cfg.MACInUse(n.MAC) && !seen[n.MAC] {
					break
				}
				if tries > 100 {
					return nil, ecode.Errorf(ecode.TempNoRes, "Cannot generate a unique MAC under prefix %s", prefix)
				}
			}
		case macRE.MatchString(n.MAC):
			if p.Cfg.MACInUse(n.MAC) || seen[n.MAC] {
				return nil, ecode.Errorf(ecode.NotUnique, "MAC address %s already in use in the cluster", n.MAC)
			}
		default:
			return nil, ecode.Errorf(ecode.Inval, "NIC %d: invalid MAC address '%s'", i, n.MAC)
		}
		seen[n.MAC] = true
		out = append(out, n)
	}
	return out, nil
}

// checkHVParams accepts only the hypervisor's known parameters.
// validateInstanceHV checks the instance's filled hypervisor parameters
// with the hypervisor's own table, as the node will when it starts the
// instance, so a bad value fails the job that sets it. Keys the table does
// not have (a configuration from Ganeti carries some) are left to the node.
func validateInstanceHV(c *config.Cluster, inst *config.Instance) error {
	defaults := hypervisor.DefaultParams(inst.Hypervisor)
	if defaults == nil {
		return nil
	}
	filled := map[string]string{}
	for k, v := range config.InstanceHVParams(c, inst).Strings() {
		if _, known := defaults[k]; known {
			filled[k] = v
		}
	}
	if err := hypervisor.ValidateParams(inst.Hypervisor, filled); err != nil {
		return err
	}
	// One cpu_mask entry applies to every vCPU; several must be one each.
	if mask, ok := filled[hypervisor.ParamCPUMask]; ok {
		entries, _ := hypervisor.ParseCPUMask(mask) // validated above
		vcpus := config.VCPUs(config.Fill(c.BEParams, inst.BEParams))
		if len(entries) > 1 && len(entries) != vcpus {
			return ecode.Errorf(ecode.Inval, "Number of vCPUs [%d] does not match the CPU mask [%s]", vcpus, mask)
		}
	}
	return nil
}

// knownHVParams are the parameters a job may set for hypervisor hv: the
// cluster's, and the hypervisor table's that a cluster created before they
// existed lacks (their defaults typed as the cluster stores them).
func knownHVParams(c *config.Cluster, hv string) config.Params {
	known := config.Params{}
	for k, d := range hypervisor.DefaultParams(hv) {
		switch d {
		case "true":
			known[k] = true
		case "false":
			known[k] = false
		default:
			known[k] = d
		}
	}
	for k, v := range c.HVParams[hv] {
		known[k] = v
	}
	return known
}

func checkHVParams(c *config.Cluster, hv string, p map[string]any) (config.Params, error) {
	known := knownHVParams(c, hv)
	out := config.Params{}
	for k, v := range p {
		if _, ok := known[k]; !ok {
			return nil, ecode.Errorf(ecode.Inval, "Unknown hypervisor parameter '%s' for %s", k, hv)
		}
		if dv, ok := known[k]; ok && dv != nil && v != nil {
			if _, isBool := dv.(bool); isBool {
				if s, ok := v.(string); ok {
					switch strings.ToLower(s) {
					case "true", "yes", "1":
						v = true
					case "false", "no", "0":
						v = false
					default:
						return nil, ecode.Errorf(ecode.Inval, "Hypervisor parameter '%s' must be a boolean, got '%s'", k, s)
					}
				}
			}
		}
		out[k] = v
	}
	return out, nil
}

// checkBEParams accepts Ganeti's backend parameters, with memory as the
// old alias of maxmem and minmem. Memory sizes and vcpus are positive
// integers, spindle_use a non-negative one. fillMin sets minmem to maxmem
// when only maxmem is given (for a new instance; a change keeps the other
// value).
func checkBEParams(p map[string]any, fillMin bool) (config.Params, error) {
	out := config.Params{}
	for k, v := range p {
		typ, ok := config.BEParamType(k)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "Unknown backend parameter '%s'", k)
		}
		switch typ {
		case "int":
			f, err := checkBEInt(k, v)
			if err != nil {
				return nil, err
			}
			v = f
		case "bool":
			b, err := toBool(v)
			if err != nil {
				return nil, ecode.Errorf(ecode.Inval, "Backend parameter '%s' must be a boolean", k)
			}
			v = b
		}
		out[k] = v
	}
	if m, ok := out["memory"]; ok {
		delete(out, "memory")
		out["maxmem"], out["minmem"] = m, m
	}
	if err := checkMemoryOrder(out); err != nil {
		return nil, err
	}
	if mx, ok := out["maxmem"].(float64); ok {
		if _, ok := out["minmem"]; !ok && fillMin {
			out["minmem"] = mx
		}
	}
	return out, nil
}

// checkBEInt checks an integer backend parameter: a whole number (or its
// text), at least 1 but for spindle_use (at least 0), and exact in JSON.
func checkBEInt(key string, v any) (float64, error) {
	least, what := 1.0, "a positive integer"
	if key == "spindle_use" {
		least, what = 0, "a non-negative integer"
	}
	f, err := toNumber(v)
	if err != nil || math.IsNaN(f) || f != math.Trunc(f) || f < least || f > opcodes.MaxExactInt {
		return 0, ecode.Errorf(ecode.Inval, "Backend parameter '%s' must be %s, got %s", key, what, opcodes.ParamText(v))
	}
	return f, nil
}

// checkMemoryOrder refuses a minmem above maxmem where both are set.
func checkMemoryOrder(be config.Params) error {
	mx, okMax := be["maxmem"].(float64)
	mn, okMin := be["minmem"].(float64)
	if okMax && okMin && mn > mx {
		return ecode.Errorf(ecode.Inval, "Backend parameter minmem (%s MiB) is larger than maxmem (%s MiB)", num(mn), num(mx))
	}
	return nil
}
