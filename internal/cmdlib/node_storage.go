package cmdlib

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/ganetidropin"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// storageUnits are the units of Ganeti's node storage opcodes.
func (p *Processor) storageUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_NODE_QUERY_STORAGE", func() LU { return &nodeQueryStorageLU{} }),
		p.unit("OP_NODE_MODIFY_STORAGE", func() LU { return &nodeModifyStorageLU{} }),
		p.unit("OP_REPAIR_NODE_STORAGE", func() LU { return &repairNodeStorageLU{} }),
	}
}

// Ganeti's storage types (constants.ST_*) and the disk templates whose
// disks live in each (MAP_DISK_TEMPLATE_STORAGE_TYPE).
const (
	stFile       = nodeapi.StorageTypeFile
	stSharedFile = nodeapi.StorageTypeSharedFile
	stLVMPV      = "lvm-pv"
	stLVMVG      = "lvm-vg"
)

var (
	storageTypes          = []string{"blockdev", "diskless", "ext", stFile, "gluster", stLVMPV, stLVMVG, "rados", stSharedFile}
	templateStorageType   = map[string]string{"blockdev": "blockdev", config.DTDiskless: "diskless", "drbd": stLVMVG, "ext": "ext", config.DTFile: stFile, "gluster": "gluster", "plain": stLVMVG, config.DTRBD: "rados", config.DTSharedFile: stSharedFile}
	storageFields         = []string{"allocatable", "free", "name", "node", "size", "type", "used"} // VALID_STORAGE_FIELDS
	storageReportingTypes = []string{stFile, "gluster", stLVMPV, stLVMVG, stSharedFile}             // STS_REPORT_NODE_STORAGE
	// servedStorageTypes are the types Corral's nodes report.
	servedStorageTypes = []string{stFile, stSharedFile}
	// modifiableStorageFields and storageOperations are Ganeti's
	// MODIFIABLE_STORAGE_FIELDS and VALID_STORAGE_OPERATIONS.
	modifiableStorageFields = map[string][]string{stLVMPV: {"allocatable"}}
	storageOperations       = map[string][]string{stLVMVG: {"fix-consistency"}}
)

// lvmUnavailable is why no LVM storage type is ever enabled on Corral.
const lvmUnavailable = "LVM storage is not available on Corral's nodes: they have no device-mapper, so neither the plain nor the drbd disk template can be enabled"

// checkStorageTypeParam is Ganeti's TStorageType check of the opcode.
func checkStorageTypeParam(opID, st string) error {
	if !slices.Contains(storageTypes, st) {
		return ecode.Errorf(ecode.Inval, "Parameter '%s.storage_type' fails validation", opID)
	}
	return nil
}

// checkStorageTypeEnabled is Ganeti's CheckStorageTypeEnabled: some
// enabled disk template keeps its disks in storage of that type (lvm-pv
// goes with lvm-vg).
func checkStorageTypeEnabled(c *config.Cluster, st string) error {
	if st == stLVMPV {
		return checkStorageTypeEnabled(c, stLVMVG)
	}
	for _, t := range c.EnabledDiskTemplates {
		if templateStorageType[t] == st {
			return nil
		}
	}
	msg := fmt.Sprintf("No disk template of storage type '%s' is enabled in this cluster. Enabled disk templates are: %s", st, strings.Join(c.EnabledDiskTemplates, ","))
	if st == stLVMVG {
		msg += " (" + lvmUnavailable + ")"
	}
	return ecode.Errorf(ecode.Inval, "%s", msg)
}

// nodeQueryStorageLU is Ganeti's LUNodeQueryStorage: each node reports
// its storage units of the type (its file storage directory for file, the
// cluster's shared_file_storage_dir for sharedfile) and the rows come
// back in output_fields order, sorted by node, then by unit name. A node
// that cannot answer is left out with a warning; offline nodes silently.
type nodeQueryStorageLU struct {
	Type   string   `json:"type"`
	Dir    string   `json:"dir,omitempty"`
	Fields []string `json:"fields"`
	Name   string   `json:"name,omitempty"`
	Nodes  []string `json:"nodes"` // names, in Ganeti's NiceSort order
	Rows   [][]any  `json:"rows"`
}

func (lu *nodeQueryStorageLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	names := op.Strings("nodes")
	if len(names) == 0 {
		return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, locking.All)}
	}
	var uuids []string
	for _, name := range names {
		if n, ok := p.Cfg.Node(name); ok {
			uuids = append(uuids, n.UUID)
		}
	}
	return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, uuids...)}
}

func (lu *nodeQueryStorageLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	lu.Fields = op.Strings("output_fields")
	var unknown []string
	for _, f := range lu.Fields {
		if !slices.Contains(storageFields, f) {
			unknown = append(unknown, f)
		}
	}
	if len(unknown) > 0 {
		return ecode.Errorf(ecode.Inval, "Unknown output fields selected: %s", strings.Join(unknown, ","))
	}
	c := p.Cfg.Cluster()
	st, err := queryStorageType(c, op)
	if err != nil {
		return err
	}
	lu.Type, lu.Name = st, op.Str("name")
	if st == stSharedFile {
		if lu.Dir = c.SharedFileStorageDir; lu.Dir == "" {
			return ecode.Errorf(ecode.Inval, "The sharedfile disk template is enabled but the cluster's shared_file_storage_dir is not set")
		}
	}
	lu.Nodes = nil
	if names := op.Strings("nodes"); len(names) > 0 {
		for _, name := range names {
			n, err := p.Cfg.MustNode(name)
			if err != nil {
				return err
			}
			if !slices.Contains(lu.Nodes, n.Name) {
				lu.Nodes = append(lu.Nodes, n.Name)
			}
		}
	} else {
		for _, n := range p.Cfg.Nodes() {
			lu.Nodes = append(lu.Nodes, n.Name)
		}
	}
	slices.SortFunc(lu.Nodes, ganetidropin.NiceCompare)
	return nil
}

// queryStorageType is the type OP_NODE_QUERY_STORAGE reports: the one
// asked for, which must be enabled, or that of the first enabled disk
// template, which must be one that reports storage.
func queryStorageType(c *config.Cluster, op *opcodes.Op) (string, error) {
	st := op.Str("storage_type")
	if st != "" {
		if err := checkStorageTypeParam(op.ID, st); err != nil {
			return "", err
		}
		if err := checkStorageTypeEnabled(c, st); err != nil {
			return "", err
		}
		if !slices.Contains(servedStorageTypes, st) {
			return "", ecode.Errorf(ecode.Inval, "Storage reporting for storage type '%s' is not supported. Corral's nodes report the storage types %s", st, strings.Join(servedStorageTypes, ", "))
		}
		return st, nil
	}
	if len(c.EnabledDiskTemplates) == 0 {
		return "", ecode.Errorf(ecode.Inval, "No disk template is enabled in this cluster; use the storage_type parameter")
	}
	st = templateStorageType[c.EnabledDiskTemplates[0]]
	if !slices.Contains(storageReportingTypes, st) || !slices.Contains(servedStorageTypes, st) {
		return "", ecode.Errorf(ecode.Inval, "Storage reporting for storage type '%s' is not supported. Please use the --storage-type option to specify one of the supported storage types (%s) or set the default disk template to one that supports storage reporting.", st, strings.Join(servedStorageTypes, ", "))
	}
	return st, nil
}

func (lu *nodeQueryStorageLU) Steps() []Step {
	return []Step{{Name: "query", Run: lu.query}}
}

func (lu *nodeQueryStorageLU) Result() any { return lu.Rows }

// nodeStorageAnswer is one node's reply to StorageList.
type nodeStorageAnswer struct {
	units []nodeapi.StorageUnit
	err   error
}

func (lu *nodeQueryStorageLU) query(ctx context.Context, s *StepCtx) error {
	var nodes []*config.Node
	for _, name := range lu.Nodes {
		if n, ok := s.p.Cfg.Node(name); ok && !n.Offline {
			nodes = append(nodes, n)
		}
	}
	args := nodeapi.StorageListArgs{Type: lu.Type, Dir: lu.Dir, Used: slices.Contains(lu.Fields, "used")}
	answers := make([]nodeStorageAnswer, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].err = s.p.RPC.Call(ctx, n, nodeapi.StorageList, "", args, &answers[i].units)
		}()
	}
	wg.Wait()
	lu.Rows = [][]any{}
	for i, n := range nodes {
		if err := answers[i].err; err != nil {
			s.Logf(ctx, "Warning: Can't get storage data from node %s: %v", n.Name, err)
			continue
		}
		units := answers[i].units
		sort.Slice(units, func(a, b int) bool { return ganetidropin.NiceCompare(units[a].Name, units[b].Name) < 0 })
		for _, u := range units {
			if lu.Name != "" && u.Name != lu.Name {
				continue
			}
			lu.Rows = append(lu.Rows, storageRow(lu.Fields, n.Name, lu.Type, u))
		}
	}
	return nil
}

// storageRow is one unit's values in the order of fields.
func storageRow(fields []string, node, st string, u nodeapi.StorageUnit) []any {
	row := make([]any, len(fields))
	for i, f := range fields {
		switch f {
		case "node":
			row[i] = node
		case "type":
			row[i] = st
		case "name":
			row[i] = u.Name
		case "size":
			row[i] = u.SizeMiB
		case "used":
			row[i] = u.UsedMiB
		case "free":
			row[i] = u.FreeMiB
		case "allocatable":
			// As Ganeti: file storage is always allocatable.
			row[i] = true
		}
	}
	return row
}

// storageUnitOp holds what OP_NODE_MODIFY_STORAGE and
// OP_REPAIR_NODE_STORAGE name: one storage unit of one node.
type storageUnitOp struct {
	Node string `json:"node"`
	Type string `json:"type"`
}

func (u *storageUnitOp) locks(p *Processor, op *opcodes.Op) []locking.Request {
	if n, ok := p.Cfg.Node(op.Str("node_name")); ok {
		return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, n.UUID)}
	}
	return []locking.Request{bgl(locking.Shared)}
}

// check resolves the node and the storage type; allowed says whether the
// type supports the operation (Ganeti's CheckArguments).
func (u *storageUnitOp) check(p *Processor, op *opcodes.Op, allowed func(st string) error) error {
	n, err := p.Cfg.MustNode(op.Str("node_name"))
	if err != nil {
		return err
	}
	u.Node, u.Type = n.Name, op.Str("storage_type")
	if err := checkStorageTypeParam(op.ID, u.Type); err != nil {
		return err
	}
	if err := allowed(u.Type); err != nil {
		return err
	}
	if err := checkStorageTypeEnabled(p.Cfg.Cluster(), u.Type); err != nil {
		return err
	}
	// Only the LVM types get here, and none of them can be enabled.
	return ecode.Errorf(ecode.Inval, "%s", lvmUnavailable)
}

// nodeModifyStorageLU is Ganeti's LUNodeModifyStorage. Ganeti changes
// only an LVM physical volume's allocatable flag; Corral's nodes have no
// LVM, so every request is refused, with Ganeti's reason when Ganeti
// would refuse it too.
type nodeModifyStorageLU struct {
	storageUnitOp
}

func (lu *nodeModifyStorageLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op)
}

func (lu *nodeModifyStorageLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	changes, _ := op.Params["changes"].(map[string]any)
	return lu.check(p, op, func(st string) error {
		modifiable, ok := modifiableStorageFields[st]
		if !ok {
			return ecode.Errorf(ecode.Inval, "Storage units of type '%s' can not be modified", st)
		}
		var diff []string
		for k := range changes {
			if !slices.Contains(modifiable, k) {
				diff = append(diff, k)
			}
		}
		if len(diff) > 0 {
			sort.Strings(diff)
			return ecode.Errorf(ecode.Inval, "The following fields can not be modified for storage units of type '%s': %s", st, pythonList(diff))
		}
		return nil
	})
}

func (lu *nodeModifyStorageLU) Steps() []Step { return nil }
func (lu *nodeModifyStorageLU) Result() any   { return nil }

// repairNodeStorageLU is Ganeti's LURepairNodeStorage. Ganeti repairs
// only an LVM volume group; Corral's nodes have none, so every request is
// refused, with Ganeti's reason when Ganeti would refuse it too.
type repairNodeStorageLU struct {
	storageUnitOp
}

func (lu *repairNodeStorageLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op)
}

func (lu *repairNodeStorageLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	return lu.check(p, op, func(st string) error {
		if !slices.Contains(storageOperations[st], "fix-consistency") {
			return ecode.Errorf(ecode.Inval, "Storage units of type '%s' can not be repaired", st)
		}
		return nil
	})
}

func (lu *repairNodeStorageLU) Steps() []Step { return nil }
func (lu *repairNodeStorageLU) Result() any   { return nil }

// pythonList writes names as Python's repr of a list of strings, as
// Ganeti's messages show them: ['a', 'b'].
func pythonList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + strings.ReplaceAll(n, "'", `\'`) + "'"
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
