package cmdlib

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// Ganeti's device modification operations (DDM_*).
const (
	ddmAdd    = "add"
	ddmRemove = "remove"
	ddmModify = "modify"
)

// Ganeti's limits on an instance's devices.
const (
	maxDisks = 16
	maxNICs  = 8
)

// devMod is one entry of OP_INSTANCE_SET_PARAMS's disks or nics: an
// operation, the device's index, name or uuid (-1 appends), and parameters.
type devMod struct {
	Op     string
	ID     string
	Params map[string]any
}

// parseDevMods reads Ganeti's [op, identifier, params] entries, and the
// older [op, params] form: there "add"/"remove" act on the last device (one
// at a time) and anything else is the index of a device to modify.
func parseDevMods(kind string, raw []any) ([]devMod, error) {
	var out []devMod
	addremove := 0
	for _, r := range raw {
		l, ok := r.([]any)
		if !ok || (len(l) != 2 && len(l) != 3) {
			return nil, ecode.Errorf(ecode.Inval, "Invalid %s modification %v: expected [operation, identifier, parameters]", kind, r)
		}
		m := devMod{}
		params := l[len(l)-1]
		if params == nil {
			params = map[string]any{}
		}
		p, ok := params.(map[string]any)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "Invalid %s modification %v: parameters must be a dict", kind, r)
		}
		m.Params = p
		op := fmt.Sprint(l[0])
		if len(l) == 2 {
			if op == ddmAdd || op == ddmRemove {
				m.Op, m.ID = op, "-1"
				if addremove++; addremove > 1 {
					return nil, ecode.Errorf(ecode.Inval, "Only one %s add/attach/remove/detach operation is supported at a time", kind)
				}
			} else {
				m.Op, m.ID = ddmModify, identString(l[0])
			}
		} else {
			m.Op, m.ID = op, identString(l[1])
		}
		switch m.Op {
		case ddmAdd, ddmRemove, ddmModify:
		case "attach", "detach":
			return nil, ecode.Errorf(ecode.Inval, "The %s operation on a %s is not supported: Corral has no detached disks", m.Op, kind)
		default:
			return nil, ecode.Errorf(ecode.Inval, "Invalid %s operation '%s' (add, remove or modify)", kind, m.Op)
		}
		if m.Op == ddmRemove && len(m.Params) > 0 {
			return nil, ecode.Errorf(ecode.Inval, "No settings should be passed when removing or detaching a %s", kind)
		}
		out = append(out, m)
	}
	return out, nil
}

// identString turns a JSON identifier (a number or a string) into text.
func identString(v any) string {
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return strconv.FormatInt(int64(f), 10)
	}
	return fmt.Sprint(v)
}

// lookupDevice finds the device an identifier names in a list of n devices
// with the given names and uuids, as Ganeti's GetItemFromContainer.
func lookupDevice(kind, id string, names, uuids []string) (int, error) {
	if idx, err := strconv.Atoi(id); err == nil {
		switch {
		case idx == -1:
			if len(names) == 0 {
				return 0, ecode.Errorf(ecode.Inval, "Got %s index -1, but there are none", kind)
			}
			return len(names) - 1, nil
		case idx < 0:
			return 0, ecode.Errorf(ecode.Inval, "Not accepting negative indices other than -1")
		case idx >= len(names):
			return 0, ecode.Errorf(ecode.Inval, "Got %s index %d, but there are only %d", kind, idx, len(names))
		}
		return idx, nil
	}
	for i := range names {
		if uuids[i] == id || (names[i] != "" && names[i] == id) {
			return i, nil
		}
	}
	return 0, ecode.Errorf(ecode.NoEnt, "Cannot find %s with identifier %s", kind, id)
}

// insertIndex is where an added device goes, as Ganeti's
// GetIndexFromIdentifier: -1 appends.
func insertIndex(kind, id string, n int) (int, error) {
	idx, err := strconv.Atoi(id)
	if err != nil {
		return 0, ecode.Errorf(ecode.Inval, "Only positive integer or -1 is accepted")
	}
	switch {
	case idx == -1:
		return n, nil
	case idx < 0:
		return 0, ecode.Errorf(ecode.Inval, "Not accepting negative indices other than -1")
	case idx > n:
		return 0, ecode.Errorf(ecode.Inval, "Got %s index %d, but there are only %d", kind, idx, n)
	}
	return idx, nil
}

// devChanges is the prepared outcome of disk and NIC modifications: the new
// lists, and which devices were added or removed (by position), so the steps
// repeat the same work after a restart of the master.
type devChanges struct {
	Disks        []config.Disk `json:"disks"`
	NICs         []config.NIC  `json:"nics"`
	AddedDisks   []int         `json:"added_disks,omitempty"`
	RemovedDisks []removedDisk `json:"removed_disks,omitempty"`
	AddedNICs    []int         `json:"added_nics,omitempty"`
	RemovedNICs  []int         `json:"removed_nics,omitempty"` // old positions
	// ModifiedNICs are positions in the new list of NICs whose MAC, IP,
	// mode or link changed: hotplug replaces the device.
	ModifiedNICs []int `json:"modified_nics,omitempty"`
	DiskGrowMiB  int64 `json:"disk_grow_mib,omitempty"`
}

type removedDisk struct {
	Index int         `json:"index"`
	Disk  config.Disk `json:"disk"`
}

func diskIDs(ds []config.Disk) (names, uuids []string) {
	for _, d := range ds {
		names, uuids = append(names, d.Name), append(uuids, d.UUID)
	}
	return names, uuids
}

func nicIDs(ns []config.NIC) (names, uuids []string) {
	for _, n := range ns {
		names, uuids = append(names, n.Name), append(uuids, n.UUID)
	}
	return names, uuids
}

// prepareDiskMods applies disk modifications to a copy of the instance's
// disks and returns the change descriptions Ganeti reports.
func prepareDiskMods(inst *config.Instance, mods []devMod, dc *devChanges) ([][2]any, error) {
	var changes [][2]any
	for _, m := range mods {
		switch m.Op {
		case ddmAdd:
			if inst.DiskTemplate == config.DTDiskless {
				return nil, ecode.Errorf(ecode.Inval, "Must specify disk type on diskless instance")
			}
			if _, ok := m.Params["size"]; !ok {
				return nil, ecode.Errorf(ecode.Inval, "Required disk parameter 'size' missing")
			}
			nd, err := parseDisks([]any{normalizeDiskParams(m.Params)}, inst.DiskTemplate)
			if err != nil {
				return nil, err
			}
			idx, err := insertIndex("disk", m.ID, len(dc.Disks))
			if err != nil {
				return nil, err
			}
			if len(dc.Disks) >= maxDisks {
				return nil, ecode.Errorf(ecode.State, "Instance has too many disks (%d), cannot add more", maxDisks)
			}
			dc.Disks = append(dc.Disks[:idx], append([]config.Disk{nd[0]}, dc.Disks[idx:]...)...)
			dc.AddedDisks = append(dc.AddedDisks, idx)
			dc.DiskGrowMiB += nd[0].SizeMiB
			changes = append(changes, [2]any{fmt.Sprintf("disk/%d", idx), fmt.Sprintf("add:size=%d,mode=%s", nd[0].SizeMiB, nd[0].Mode)})
		case ddmRemove:
			names, uuids := diskIDs(dc.Disks)
			idx, err := lookupDevice("disk", m.ID, names, uuids)
			if err != nil {
				return nil, err
			}
			if len(dc.Disks) == 1 {
				return nil, ecode.Errorf(ecode.Inval, "Cannot remove the last disk of instance %s: disk template '%s' needs at least one disk", inst.Name, inst.DiskTemplate)
			}
			dc.RemovedDisks = append(dc.RemovedDisks, removedDisk{Index: idx, Disk: dc.Disks[idx]})
			dc.Disks = append(dc.Disks[:idx:idx], dc.Disks[idx+1:]...)
			changes = append(changes, [2]any{fmt.Sprintf("disk/%d", idx), "remove"})
		case ddmModify:
			names, uuids := diskIDs(dc.Disks)
			idx, err := lookupDevice("disk", m.ID, names, uuids)
			if err != nil {
				return nil, err
			}
			ch, err := modifyDisk(&dc.Disks[idx], idx, m.Params)
			if err != nil {
				return nil, err
			}
			changes = append(changes, ch...)
		}
	}
	return changes, nil
}

// normalizeDiskParams accepts sizes given as strings (the CLI's and older
// clients' way) and drops Ganeti's disk parameters Corral's templates
// ignore.
func normalizeDiskParams(p map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range p {
		switch k {
		case "size":
			if s, ok := v.(string); ok {
				if n, err := strconv.ParseInt(s, 10, 64); err == nil {
					v = float64(n)
				}
			}
		case "name":
			if s, ok := v.(string); ok && strings.EqualFold(s, "none") {
				v = ""
			}
		case "vg", "metavg", "spindles", "provider", "access", "adopt":
			continue
		}
		out[k] = v
	}
	return out
}

// modifyDisk changes a disk's mode or name, the only disk parameters Ganeti
// lets a modification change.
func modifyDisk(d *config.Disk, idx int, p map[string]any) ([][2]any, error) {
	if _, ok := p["size"]; ok {
		return nil, ecode.Errorf(ecode.Inval, "Disk size change not possible, use grow-disk")
	}
	var changes [][2]any
	for k, v := range p {
		s, _ := v.(string)
		switch k {
		case "mode":
			if s != "rw" && s != "ro" {
				return nil, ecode.Errorf(ecode.Inval, "Invalid disk access mode '%s'", s)
			}
			d.Mode = s
			changes = append(changes, [2]any{fmt.Sprintf("disk.mode/%d", idx), s})
		case "name":
			if strings.EqualFold(s, "none") {
				s = ""
			}
			d.Name = s
			var out any = s
			if s == "" {
				out = nil
			}
			changes = append(changes, [2]any{fmt.Sprintf("disk.name/%d", idx), out})
		default:
			return nil, ecode.Errorf(ecode.Inval, "Disk parameter '%s' cannot be changed (mode and name can)", k)
		}
	}
	return changes, nil
}

// prepareNICMods applies NIC modifications to a copy of the instance's
// NICs and returns the change descriptions Ganeti reports.
func prepareNICMods(p *Processor, inst *config.Instance, node *config.Node, mods []devMod, dc *devChanges) ([][2]any, error) {
	c := p.Cfg.Cluster()
	var changes [][2]any
	for _, m := range mods {
		if err := checkNICModParams(m); err != nil {
			return nil, err
		}
		switch m.Op {
		case ddmAdd:
			params := map[string]any{}
			for k, v := range m.Params {
				params[k] = v
			}
			nn, err := parseNICs(p, c, []any{params})
			if err != nil {
				return nil, err
			}
			for _, other := range dc.NICs {
				if other.MAC == nn[0].MAC {
					return nil, ecode.Errorf(ecode.NotUnique, "MAC address %s already in use in the cluster", nn[0].MAC)
				}
			}
			// A NIC on a network takes its group connection's mode and
			// link; its address is taken when the change is committed.
			if err := applyNICNetworks(p, nn, node, true); err != nil {
				return nil, err
			}
			idx, err := insertIndex("NIC", m.ID, len(dc.NICs))
			if err != nil {
				return nil, err
			}
			if len(dc.NICs) >= maxNICs {
				return nil, ecode.Errorf(ecode.State, "Instance has too many network interfaces (%d), cannot add more", maxNICs)
			}
			dc.NICs = append(dc.NICs[:idx], append([]config.NIC{nn[0]}, dc.NICs[idx:]...)...)
			dc.AddedNICs = append(dc.AddedNICs, idx)
			n := nn[0]
			changes = append(changes, [2]any{fmt.Sprintf("nic.%d", idx),
				fmt.Sprintf("add:mac=%s,ip=%s,mode=%s,link=%s,network=%s", n.MAC, noneIfEmpty(n.IP), n.Mode, n.Link, noneIfEmpty(networkName(p, n.Network)))})
		case ddmRemove:
			names, uuids := nicIDs(dc.NICs)
			idx, err := lookupDevice("NIC", m.ID, names, uuids)
			if err != nil {
				return nil, err
			}
			dc.RemovedNICs = append(dc.RemovedNICs, idx)
			dc.NICs = append(dc.NICs[:idx:idx], dc.NICs[idx+1:]...)
			changes = append(changes, [2]any{fmt.Sprintf("nic/%d", idx), "remove"})
		case ddmModify:
			names, uuids := nicIDs(dc.NICs)
			idx, err := lookupDevice("NIC", m.ID, names, uuids)
			if err != nil {
				return nil, err
			}
			nch, err := modifyNICNetwork(p, &dc.NICs[idx], idx, node, m.Params)
			if err != nil {
				return nil, err
			}
			changes = append(changes, nch...)
			ch, err := modifyNIC(p, c, &dc.NICs[idx], idx, m.Params)
			if err != nil {
				return nil, err
			}
			for _, k := range []string{"mac", "ip", "mode", "link", "bridge", "network"} {
				if _, ok := m.Params[k]; ok {
					dc.ModifiedNICs = append(dc.ModifiedNICs, idx)
					break
				}
			}
			changes = append(changes, ch...)
		}
	}
	return changes, nil
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

// checkNICModParams applies Ganeti's checks on a NIC modification's
// parameters that do not depend on the NIC.
func checkNICModParams(m devMod) error {
	for k, v := range m.Params {
		s, _ := v.(string)
		switch k {
		case "ip":
			if s != "" && !strings.EqualFold(s, "none") && !strings.EqualFold(s, nicIPPool) && net.ParseIP(s) == nil {
				return ecode.Errorf(ecode.Inval, "Invalid IP address '%s'", s)
			}
		case "mac":
			if m.Op == ddmModify && s == "auto" {
				return ecode.Errorf(ecode.Inval, "'auto' is not a valid MAC address when modifying an existing NIC")
			}
		case "network":
			if s != "" && !strings.EqualFold(s, valueNone) {
				for _, k := range []string{"mode", "link", "bridge"} {
					if _, given := m.Params[k]; given {
						return ecode.Errorf(ecode.Inval, "If network is given, no mode or link is allowed to be passed")
					}
				}
			}
		}
	}
	return nil
}

// modifyNIC changes a NIC's MAC, IP, mode, link or name.
func modifyNIC(p *Processor, c *config.Cluster, n *config.NIC, idx int, params map[string]any) ([][2]any, error) {
	var changes [][2]any
	for _, k := range paramKeys(params) {
		s, _ := params[k].(string)
		switch k {
		case "mac":
			mac := strings.ToLower(s)
			if mac == "generate" {
				for tries := 0; ; tries++ {
					mac = config.NewMAC(c.MACPrefix)
					if !p.Cfg.MACInUse(mac) {
						break
					}
					if tries > 100 {
						return nil, ecode.Errorf(ecode.TempNoRes, "Cannot generate a unique MAC under prefix %s", c.MACPrefix)
					}
				}
			} else if !macRE.MatchString(mac) {
				return nil, ecode.Errorf(ecode.Inval, "Invalid MAC address '%s'", s)
			} else if mac != n.MAC && p.Cfg.MACInUse(mac) {
				return nil, ecode.Errorf(ecode.NotUnique, "MAC address '%s' already in use in the cluster", mac)
			}
			n.MAC = mac
		case "ip", "network":
			continue // modifyNICNetwork
		case "mode":
			if s != "bridged" && s != "routed" {
				return nil, ecode.Errorf(ecode.Inval, "Invalid NIC mode '%s' (bridged or routed)", s)
			}
			n.Mode = s
		case "link", "bridge":
			k = "link"
			n.Link = s
		case "name":
			if strings.EqualFold(s, "none") {
				s = ""
			}
			n.Name = s
		case "vlan":
			continue
		default:
			return nil, ecode.Errorf(ecode.Inval, "Unknown NIC parameter '%s'", k)
		}
		changes = append(changes, [2]any{fmt.Sprintf("nic.%s/%d", k, idx), params[k]})
	}
	if n.Mode == "routed" && n.IP == "" {
		return nil, ecode.Errorf(ecode.Inval, "Cannot set the NIC IP address to None on a routed NIC")
	}
	return changes, nil
}

// checkHotplugShape refuses hot changes Corral cannot make with devices
// named and placed by their index: only the last device may be hot-removed
// and devices are hot-added at the end, so every device keeps its index
// (and with it its id and PCI slot).
func checkHotplugShape(inst *config.Instance, dc *devChanges) error {
	for _, r := range dc.RemovedDisks {
		if r.Index != len(inst.Disks)-1 || len(dc.RemovedDisks) > 1 {
			return ecode.Errorf(ecode.State, "Hotplug is not possible: only the last disk can be hot-removed (disk %d is not); change it without hotplug, it takes effect at the next start", r.Index)
		}
	}
	for _, r := range dc.RemovedNICs {
		if r != len(inst.NICs)-1 || len(dc.RemovedNICs) > 1 {
			return ecode.Errorf(ecode.State, "Hotplug is not possible: only the last NIC can be hot-removed (NIC %d is not); change it without hotplug, it takes effect at the next start", r)
		}
	}
	base := len(inst.Disks) - len(dc.RemovedDisks)
	for i, a := range dc.AddedDisks {
		if a != base+i {
			return ecode.Errorf(ecode.State, "Hotplug is not possible: disks are hot-added at the end (index -1), not at %d", a)
		}
	}
	base = len(inst.NICs) - len(dc.RemovedNICs)
	for i, a := range dc.AddedNICs {
		if a != base+i {
			return ecode.Errorf(ecode.State, "Hotplug is not possible: NICs are hot-added at the end (index -1), not at %d", a)
		}
	}
	return nil
}

// hotplug runs one change on the running instance, and reports it as
// Ganeti does: a failure is a warning and "hotplug:failed", the
// configuration change stays.
func (s *StepCtx) hotplug(ctx context.Context, node *config.Node, args nodeapi.HotplugArgs) string {
	s.Logf(ctx, "Trying to hotplug device...")
	if err := s.RPC(ctx, node, nodeapi.Hotplug, args, nil); err != nil {
		s.Logf(ctx, "WARNING: Could not hotplug device: %v", err)
		s.Logf(ctx, "Continuing execution..")
		return "hotplug:failed"
	}
	s.Logf(ctx, "Hotplug done.")
	return "hotplug:done"
}

// checkHotplug asks the primary node whether the running instance can take
// hotplugged devices; with hotplug_if_possible a refusal turns hotplug off.
func (lu *instanceSetParamsLU) checkHotplug(ctx context.Context, p *Processor, op *opcodes.Op, inst *config.Instance, node *config.Node) error {
	if !op.Bool("hotplug") && !op.Bool("hotplug_if_possible") {
		return nil
	}
	if !lu.Running {
		if op.Bool("hotplug") {
			return ecode.Errorf(ecode.State, "Hotplug is not possible: instance %s is not running", inst.Name)
		}
		return nil
	}
	err := p.RPC.Call(ctx, node, nodeapi.Hotplug, "", nodeapi.HotplugArgs{Instance: p.Spec(inst), Action: nodeapi.HotplugCheck}, nil)
	if err == nil {
		err = checkHotplugShape(inst, &lu.Dev)
	}
	if err != nil {
		if op.Bool("hotplug") {
			return ecode.Errorf(ecode.State, "Hotplug is not possible: %s", strings.TrimPrefix(err.Error(), "Hotplug is not possible: "))
		}
		return nil
	}
	lu.Hotplug = true
	return nil
}

// paramKeys are a parameter dict's keys in order, for changes reported in
// a stable order.
func paramKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
