package move

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Details is what the source cluster says about the instance to move
// (GET /2/instances/[i]/info?static=1, spec 1.6), reduced to what the
// destination needs to recreate it.
type Details struct {
	Name         string
	ConfigState  string // up, down or offline
	OS           string
	Hypervisor   string
	DiskTemplate string
	Disks        []Disk
	// NICs are the source NICs as creation parameters.
	NICs []map[string]any
	// BEParams, HVParams and OSParams are the instance's own settings,
	// not the cluster defaults filled in (those of the destination apply).
	BEParams, HVParams, OSParams map[string]any
	Tags                         []string
}

// Disk is one disk's creation parameters.
type Disk struct {
	SizeMiB  int64
	Mode     string
	Name     string
	Spindles *int64
}

// infoDisk and the 9-tuple NICs are the wire form of the info job's result.
type infoDisk struct {
	Size     float64 `json:"size"`
	Mode     string  `json:"mode"`
	Name     *string `json:"name"`
	Spindles *int64  `json:"spindles"`
}

type infoInstance struct {
	Name         string            `json:"name"`
	ConfigState  string            `json:"config_state"`
	OS           *string           `json:"os"`
	Hypervisor   string            `json:"hypervisor"`
	DiskTemplate string            `json:"disk_template"`
	Disks        []infoDisk        `json:"disks"`
	NICs         []json.RawMessage `json:"nics"`
	BEInstance   map[string]any    `json:"be_instance"`
	HVInstance   map[string]any    `json:"hv_instance"`
	OSInstance   map[string]any    `json:"os_instance"`
}

// nicKeys are the creation parameters of the first eight members of an
// info NIC tuple [name, uuid, ip, mac, mode, link, vlan, network, netinfo];
// the uuid stays with the source.
var nicKeys = [...]string{"name", "", "ip", "mac", "mode", "link", "vlan", "network"}

// ParseDetails reads the info job's result, {name: {...}}, holding exactly
// one instance.
func ParseDetails(raw []byte) (*Details, error) {
	var byName map[string]infoInstance
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, fmt.Errorf("malformed instance information: %w", err)
	}
	if len(byName) != 1 {
		return nil, fmt.Errorf("the instance information names %d instances, want 1", len(byName))
	}
	var in infoInstance
	for name, v := range byName {
		in = v
		if in.Name == "" {
			in.Name = name
		}
	}
	d := &Details{Name: in.Name, ConfigState: in.ConfigState, Hypervisor: in.Hypervisor, DiskTemplate: in.DiskTemplate,
		BEParams: in.BEInstance, HVParams: in.HVInstance, OSParams: in.OSInstance}
	if in.OS != nil {
		d.OS = *in.OS
	}
	if d.DiskTemplate == "" {
		return nil, fmt.Errorf("the instance information of %s has no disk template", d.Name)
	}
	for i, dk := range in.Disks {
		if dk.Size < 0 || dk.Size > math.MaxInt32*1024.0 || dk.Size != math.Trunc(dk.Size) {
			return nil, fmt.Errorf("disk %d of %s has an invalid size %v", i, d.Name, dk.Size)
		}
		disk := Disk{SizeMiB: int64(dk.Size), Mode: dk.Mode, Spindles: dk.Spindles}
		if dk.Name != nil {
			disk.Name = *dk.Name
		}
		d.Disks = append(d.Disks, disk)
	}
	for i, raw := range in.NICs {
		var t []any
		if err := json.Unmarshal(raw, &t); err != nil || len(t) < len(nicKeys) {
			return nil, fmt.Errorf("NIC %d of %s is not the expected [name, uuid, ip, mac, mode, link, vlan, network, ...] tuple; do the clusters' versions match?", i, d.Name)
		}
		nic := map[string]any{}
		for j, k := range nicKeys {
			if k == "" || t[j] == nil || t[j] == "" {
				continue
			}
			nic[k] = t[j]
		}
		// A NIC on a network takes its mode and link from there; giving
		// them too is refused.
		if _, ok := nic["network"]; ok {
			delete(nic, "mode")
			delete(nic, "link")
		}
		d.NICs = append(d.NICs, nic)
	}
	return d, nil
}

// Overrides change the instance as it is created on the destination.
type Overrides struct {
	// DestName is the name on the destination; empty keeps the source's.
	DestName     string
	PrimaryNode  string
	SecondNode   string
	IAllocator   string
	DiskTemplate string
	// Compress is the transfer compression both clusters must support.
	Compress string
	// BEParams, HVParams and OSParams are merged over the instance's own.
	BEParams, HVParams, OSParams map[string]any
	// NICs override the source NICs by index (no new NICs).
	NICs []map[string]any
	// KeepSource leaves the instance on the source cluster (shut down).
	KeepSource bool
}

// ExportInfo is the prepare-export job's result.
type ExportInfo struct {
	Handshake   json.RawMessage `json:"handshake"`
	X509KeyName json.RawMessage `json:"x509_key_name"`
	X509CA      json.RawMessage `json:"x509_ca"`
}

// ImportInfo is the destination's remote-import log message.
type ImportInfo struct {
	Disks  []json.RawMessage `json:"disks"`
	X509CA json.RawMessage   `json:"x509_ca"`
}

// merged returns base with over's keys set (neither is changed).
func merged(base, over map[string]any) map[string]any {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]any{}
	}
	maps.Copy(out, over)
	return out
}

// CreateBody builds the destination's POST /2/instances body (spec 1.7) in
// remote-import mode. opportunistic asks the allocator to use only the
// nodes nobody else holds (it fails fast with temp_insufficient_resources
// when those do not fit).
func CreateBody(d *Details, exp *ExportInfo, o Overrides, opportunistic bool) (map[string]any, error) {
	if len(o.NICs) > len(d.NICs) {
		return nil, fmt.Errorf("%d NIC override(s) given but %s has %d NIC(s); a move cannot add NICs", len(o.NICs), d.Name, len(d.NICs))
	}
	disks := make([]any, 0, len(d.Disks))
	for _, dk := range d.Disks {
		m := map[string]any{"size": dk.SizeMiB, "mode": dk.Mode}
		if dk.Name != "" {
			m["name"] = dk.Name
		}
		if dk.Spindles != nil {
			m["spindles"] = *dk.Spindles
		}
		disks = append(disks, m)
	}
	nics := make([]any, 0, len(d.NICs))
	for i, n := range d.NICs {
		if i < len(o.NICs) {
			n = merged(n, o.NICs[i])
		}
		nics = append(nics, n)
	}
	name := d.Name
	if o.DestName != "" {
		name = o.DestName
	}
	template := d.DiskTemplate
	if o.DiskTemplate != "" {
		template = o.DiskTemplate
	}
	compress := o.Compress
	if compress == "" {
		compress = "none"
	}
	tags := slices.Clone(d.Tags)
	if tags == nil {
		tags = []string{}
	}
	body := map[string]any{
		"__version__":          1,
		"mode":                 "remote-import",
		"name":                 name,
		"disk_template":        template,
		"disks":                disks,
		"nics":                 nics,
		"hypervisor":           d.Hypervisor,
		"start":                d.ConfigState == "up",
		"ip_check":             false,
		"name_check":           false,
		"wait_for_sync":        false,
		"source_handshake":     exp.Handshake,
		"source_x509_ca":       exp.X509CA,
		"source_instance_name": d.Name,
		"compress":             compress,
		"beparams":             merged(d.BEParams, o.BEParams),
		"hvparams":             merged(d.HVParams, o.HVParams),
		"osparams":             merged(d.OSParams, o.OSParams),
		"tags":                 tags,
	}
	if d.OS != "" {
		body["os"] = d.OS
	}
	for k, v := range map[string]string{"pnode": o.PrimaryNode, "snode": o.SecondNode, "iallocator": o.IAllocator} {
		if v != "" {
			body[k] = v
		}
	}
	if opportunistic {
		body["opportunistic_locking"] = true
	}
	return body, nil
}

// ParseImportInfo reads a remote-import log message.
func ParseImportInfo(raw []byte, disks int) (*ImportInfo, error) {
	var ii ImportInfo
	if err := json.Unmarshal(raw, &ii); err != nil {
		return nil, fmt.Errorf("malformed remote-import information: %w", err)
	}
	if len(ii.Disks) != disks {
		return nil, fmt.Errorf("the destination listens for %d disk(s), the instance has %d", len(ii.Disks), disks)
	}
	if len(ii.X509CA) == 0 || string(ii.X509CA) == "null" {
		return nil, fmt.Errorf("the remote-import information has no destination certificate")
	}
	return &ii, nil
}

// ParseExportInfo reads the prepare-export job's result.
func ParseExportInfo(raw []byte) (*ExportInfo, error) {
	return parseExportInfo(raw, false)
}

// parseExportInfo reads a prepare-export result; a dry run's has only the
// handshake (no certificate was made).
func parseExportInfo(raw []byte, dryRun bool) (*ExportInfo, error) {
	var e ExportInfo
	if err := json.Unmarshal(raw, &e); err != nil {
		return nil, fmt.Errorf("malformed prepare-export result: %w", err)
	}
	need := map[string]json.RawMessage{"handshake": e.Handshake, "x509_key_name": e.X509KeyName, "x509_ca": e.X509CA}
	if dryRun {
		need = map[string]json.RawMessage{"handshake": e.Handshake}
	}
	for k, v := range need {
		if len(v) == 0 || string(v) == "null" {
			return nil, fmt.Errorf("the prepare-export result has no %s (was the export prepared in remote mode?)", k)
		}
	}
	return &e, nil
}
