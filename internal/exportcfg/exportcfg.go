// Package exportcfg reads and writes an instance export's metadata file,
// config.ini, in the layout of Ganeti's exports so that either system can
// import what the other exported.
//
// The file is Python ConfigParser syntax. Section [export] describes the
// export (version 0, timestamp, source node, OS, compression); [instance]
// the instance (name, memory, vcpus, disk template, hypervisor, tags, and
// per NIC and disk nic%d_* and disk%d_* keys with their counts);
// [hypervisor], [backend] and [os] hold the instance's own hypervisor,
// backend and OS parameters as strings.
package exportcfg

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
)

// FileName is the metadata file's name inside an export directory.
const FileName = "config.ini"

// Version is the only export format version there is.
const Version = 0

// Ganeti's limits on disks and NICs per instance: a reader looks for
// disk%d and nic%d keys below them.
const (
	MaxDisks = 16
	MaxNICs  = 8
)

// Section names.
const (
	SectionExport     = "export"
	SectionInstance   = "instance"
	SectionHypervisor = "hypervisor"
	SectionBackend    = "backend"
	SectionOS         = "os"
)

// Disk is one exported disk.
type Disk struct {
	// Index is the disk's position in the instance (the N of the disk%d
	// keys). An export may skip a disk that could not be saved, so
	// indices can have gaps; Marshal writes the keys of this index.
	Index   int
	Name    string
	SizeMiB int64
	// Dump is the image's file name in the export directory.
	Dump string
	// Mode is rw or ro; Ganeti does not record it (its reader ignores the
	// key), so it is empty in Ganeti's exports.
	Mode string
}

// NIC is one network interface of the exported instance.
type NIC struct{ MAC, IP, Mode, Link, Network, Name string }

// Export is the content of config.ini.
type Export struct {
	Version     int
	Timestamp   int64  // Unix seconds
	Source      string // the node the instance was exported from
	OS          string
	Compression string

	Name, Hypervisor, DiskTemplate string
	MaxMem, MinMem                 int64 // MiB
	VCPUs                          int
	Tags                           []string

	Disks []Disk
	NICs  []NIC

	// The instance's own parameters (not the cluster's defaults).
	HVParams, BEParams, OSParams map[string]string
}

// Marshal renders e as config.ini, with a fixed key order. Ganeti's
// writer leaves unset NIC IPs and names and disk names as "None", which
// its reader takes for "not set"; Marshal does the same so that Ganeti
// reads these exports as it reads its own.
func (e *Export) Marshal() []byte {
	var w iniWriter
	w.section(SectionExport)
	w.set("version", strconv.Itoa(e.Version))
	w.set("timestamp", strconv.FormatInt(e.Timestamp, 10))
	w.set("source", e.Source)
	w.set("os", e.OS)
	w.set("compression", e.Compression)

	w.section(SectionInstance)
	w.set("name", e.Name)
	w.set("maxmem", strconv.FormatInt(e.MaxMem, 10))
	w.set("minmem", strconv.FormatInt(e.MinMem, 10))
	// "memory" is the pre-maxmem key older readers look for.
	w.set("memory", strconv.FormatInt(e.MaxMem, 10))
	w.set("vcpus", strconv.Itoa(e.VCPUs))
	w.set("disk_template", e.DiskTemplate)
	w.set("hypervisor", e.Hypervisor)
	w.set("tags", strings.Join(e.Tags, " "))
	for i, n := range e.NICs {
		p := fmt.Sprintf("nic%d_", i)
		w.set(p+"mac", n.MAC)
		w.set(p+"ip", orNone(n.IP))
		// Ganeti's reader takes mode and link only when no network is
		// named, so an unset network is left empty rather than "None".
		w.set(p+"network", n.Network)
		w.set(p+"mode", n.Mode)
		w.set(p+"link", n.Link)
		w.set(p+"vlan", "")
		w.set(p+"name", orNone(n.Name))
	}
	w.set("nic_count", strconv.Itoa(len(e.NICs)))
	for _, d := range e.Disks {
		p := fmt.Sprintf("disk%d_", d.Index)
		w.set(p+"ivname", fmt.Sprintf("disk/%d", d.Index))
		w.set(p+"dump", d.Dump)
		w.set(p+"size", strconv.FormatInt(d.SizeMiB, 10))
		w.set(p+"name", orNone(d.Name))
		if d.Mode != "" {
			w.set(p+"mode", d.Mode)
		}
	}
	w.set("disk_count", strconv.Itoa(len(e.Disks)))

	w.section(SectionHypervisor)
	w.setMap(e.HVParams)
	w.section(SectionBackend)
	w.setMap(e.BEParams)
	w.section(SectionOS)
	w.setMap(e.OSParams)
	return []byte(w.b.String())
}

func orNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

// unNone reads an optional value Ganeti writes as "None" when unset.
func unNone(s string) string {
	if strings.EqualFold(s, "none") {
		return ""
	}
	return s
}

// Parse reads config.ini. It insists on what an import cannot do without:
// both [export] and [instance], version 0, the instance name, and
// nic_count and disk_count matching the NICs and disks described. Keys it
// does not know are ignored.
func Parse(data []byte) (*Export, error) {
	secs, err := parseINI(data)
	if err != nil {
		return nil, fmt.Errorf("export config: %w", err)
	}
	exp, inst := secs[SectionExport], secs[SectionInstance]
	if exp == nil {
		return nil, errors.New("export config: no [export] section")
	}
	if inst == nil {
		return nil, errors.New("export config: no [instance] section")
	}
	e := &Export{
		Source:       exp["source"],
		OS:           exp["os"],
		Compression:  exp["compression"],
		Name:         inst["name"],
		Hypervisor:   inst["hypervisor"],
		DiskTemplate: inst["disk_template"],
		Tags:         nonEmpty(strings.Fields(inst["tags"])),
		HVParams:     maps.Clone(secs[SectionHypervisor]),
		BEParams:     maps.Clone(secs[SectionBackend]),
		OSParams:     maps.Clone(secs[SectionOS]),
	}
	for _, m := range []*map[string]string{&e.HVParams, &e.BEParams, &e.OSParams} {
		if *m == nil {
			*m = map[string]string{}
		}
	}
	v, ok := exp["version"]
	if !ok {
		return nil, errors.New("export config: [export] has no version")
	}
	if e.Version, err = strconv.Atoi(v); err != nil || e.Version != Version {
		return nil, fmt.Errorf("export config: unsupported export version %q (want %d)", v, Version)
	}
	if e.Name == "" {
		return nil, errors.New("export config: [instance] has no name")
	}
	if e.Timestamp, err = optInt(exp, "timestamp", false); err != nil {
		return nil, err
	}
	// Exports older than maxmem/minmem have only "memory".
	mem, err := optInt(inst, "memory", true)
	if err != nil {
		return nil, err
	}
	e.MaxMem, e.MinMem = mem, mem
	if _, ok := inst["maxmem"]; ok {
		if e.MaxMem, err = optInt(inst, "maxmem", true); err != nil {
			return nil, err
		}
	}
	if _, ok := inst["minmem"]; ok {
		if e.MinMem, err = optInt(inst, "minmem", true); err != nil {
			return nil, err
		}
	}
	vcpus, err := optInt(inst, "vcpus", true)
	if err != nil {
		return nil, err
	}
	if vcpus > 1<<20 {
		return nil, fmt.Errorf("export config: vcpus %d out of range", vcpus)
	}
	e.VCPUs = int(vcpus)
	if e.NICs, err = parseNICs(inst); err != nil {
		return nil, err
	}
	if e.Disks, err = parseDisks(inst); err != nil {
		return nil, err
	}
	return e, nil
}

func nonEmpty[T any](l []T) []T {
	if len(l) == 0 {
		return nil
	}
	return l
}

// optInt reads a decimal integer key, zero when absent.
func optInt(s section, key string, nonNegative bool) (int64, error) {
	v, ok := s[key]
	if !ok {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || (nonNegative && n < 0) {
		return 0, fmt.Errorf("export config: %s: invalid number %q", key, v)
	}
	return n, nil
}

// count reads a required nic_count or disk_count.
func count(inst section, key string, max int) (int, error) {
	v, ok := inst[key]
	if !ok {
		return 0, fmt.Errorf("export config: [instance] has no %s", key)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > max {
		return 0, fmt.Errorf("export config: %s: invalid count %q (0 to %d)", key, v, max)
	}
	return n, nil
}

// parseNICs reads nic%d_* from index 0 up to the first index without a MAC,
// as Ganeti's reader does.
func parseNICs(inst section) ([]NIC, error) {
	want, err := count(inst, "nic_count", MaxNICs)
	if err != nil {
		return nil, err
	}
	var nics []NIC
	for i := 0; i < MaxNICs; i++ {
		p := fmt.Sprintf("nic%d_", i)
		mac, ok := inst[p+"mac"]
		if !ok {
			break
		}
		nics = append(nics, NIC{MAC: mac, IP: unNone(inst[p+"ip"]), Mode: unNone(inst[p+"mode"]),
			Link: unNone(inst[p+"link"]), Network: unNone(inst[p+"network"]), Name: unNone(inst[p+"name"])})
	}
	if len(nics) != want {
		return nil, fmt.Errorf("export config: nic_count is %d but %d NIC(s) are described (nic0_mac, nic1_mac, ...)", want, len(nics))
	}
	return nics, nil
}

// parseDisks reads every disk%d_size below MaxDisks: a disk that failed to
// export leaves a gap, and disk_count counts the ones present.
func parseDisks(inst section) ([]Disk, error) {
	want, err := count(inst, "disk_count", MaxDisks)
	if err != nil {
		return nil, err
	}
	var disks []Disk
	for i := 0; i < MaxDisks; i++ {
		p := fmt.Sprintf("disk%d_", i)
		if _, ok := inst[p+"size"]; !ok {
			continue
		}
		size, err := optInt(inst, p+"size", true)
		if err != nil {
			return nil, err
		}
		disks = append(disks, Disk{Index: i, Name: unNone(inst[p+"name"]), SizeMiB: size,
			Dump: inst[p+"dump"], Mode: inst[p+"mode"]})
	}
	if len(disks) != want {
		return nil, fmt.Errorf("export config: disk_count is %d but %d disk(s) are described (disk%%d_size)", want, len(disks))
	}
	return disks, nil
}
