package cmdlib

import (
	"context"
	"encoding/pem"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/exportcfg"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
)

// Exports, as Ganeti's gnt-backup: an export is a directory on a node with
// one image per disk and a config.ini describing the instance. A remote
// export streams the disks to another cluster's imports instead.

// backupUnits are the units of the export opcodes.
func (p *Processor) backupUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_BACKUP_QUERY", func() LU { return &backupQueryLU{} }),
		p.unit("OP_BACKUP_PREPARE", func() LU { return &backupPrepareLU{} }),
		p.unit("OP_BACKUP_EXPORT", func() LU { return &backupExportLU{} }),
		p.unit("OP_BACKUP_REMOVE", func() LU { return &backupRemoveLU{} }),
		p.unit("OP_BACKUP_CLEANUP", func() LU { return &backupCleanupLU{} }),
	}
}

// diskIO is where an instance's disk is read or written in a transfer: its
// OS definition's export or import script when it has an OS (as Ganeti
// does), the raw disk otherwise.
func (p *Processor) diskIO(inst *config.Instance, i int, debug int) nodeapi.ImpExpIO {
	kind := nodeapi.IODisk
	if inst.OS != "" {
		kind = nodeapi.IOScript
	}
	return nodeapi.ImpExpIO{Kind: kind, Instance: p.Spec(inst), Disk: i, SizeMiB: inst.Disks[i].SizeMiB, DebugLevel: debug}
}

// dumpName is the file of disk i in an export directory.
func dumpName(i int) string { return "disk" + strconv.Itoa(i) + ".dump" }

// ---- query

type backupQueryLU struct {
	Out map[string]any `json:"out"`
}

func (lu *backupQueryLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *backupQueryLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	nodes, err := p.namedNodes(op.Strings("nodes"))
	if err != nil {
		return err
	}
	lu.Out = map[string]any{}
	for _, n := range nodes {
		if n.Offline {
			lu.Out[n.Name] = false
			continue
		}
		var r nodeapi.ExportListReply
		if err := p.RPC.Call(ctx, n, nodeapi.ExportList, "", struct{}{}, &r); err != nil {
			// As Ganeti: a node that cannot answer is listed as false.
			lu.Out[n.Name] = false
			continue
		}
		slices.Sort(r.Names)
		lu.Out[n.Name] = nonNilStrings(r.Names)
	}
	return nil
}

func (lu *backupQueryLU) Steps() []Step { return nil }
func (lu *backupQueryLU) Result() any   { return lu.Out }

// namedNodes returns the named nodes, or all when none are named.
func (p *Processor) namedNodes(names []string) ([]*config.Node, error) {
	if len(names) == 0 {
		return p.Cfg.Nodes(), nil
	}
	var out []*config.Node
	for _, name := range names {
		n, err := p.Cfg.MustNode(name)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func nonNilStrings(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// ---- prepare

type backupPrepareLU struct {
	instanceBase
	Mode      string `json:"mode"`
	Handshake []any  `json:"handshake"`
	KeyName   []any  `json:"x509_key_name"`
	SignedCA  string `json:"x509_ca"`
}

func (lu *backupPrepareLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Exclusive)
}

func (lu *backupPrepareLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	if _, _, err := lu.load(p, op); err != nil {
		return err
	}
	lu.Mode = op.Str("mode")
	switch lu.Mode {
	case "local":
		return nil
	case "remote":
	default:
		return ecode.Errorf(ecode.Inval, "Invalid export mode '%s' (valid: local, remote)", lu.Mode)
	}
	cds, err := p.domainSecret()
	if err != nil {
		return err
	}
	lu.Handshake = pki.ComputeHandshake(cds)
	return nil
}

func (lu *backupPrepareLU) Steps() []Step {
	return []Step{{"create-certificate", func(ctx context.Context, s *StepCtx) error {
		if lu.Mode != "remote" {
			return nil
		}
		_, node, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		cds, err := s.p.domainSecret()
		if err != nil {
			return err
		}
		c, err := s.newCert(ctx, node, remoteCertValidity)
		if err != nil {
			return err
		}
		signed, err := pki.SignX509(cds, []byte(c.CertPEM))
		if err != nil {
			return err
		}
		lu.KeyName, lu.SignedCA = pki.SignKeyName(cds, c.Name), signed
		s.Logf(ctx, "Created a transfer certificate on %s, valid for %s", node.Name, remoteCertValidity)
		return nil
	}}}
}

func (lu *backupPrepareLU) Result() any {
	if lu.Mode != "remote" {
		return nil
	}
	return map[string]any{"handshake": lu.Handshake, "x509_key_name": lu.KeyName, "x509_ca": nilIfEmpty(lu.SignedCA)}
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// ---- cleanup

// backupCleanupLU destroys the transfer key a remote prepare made, for a
// move that failed before its export began. The key name must carry the
// domain secret's signature, so only the key this cluster handed out for
// the move can be named.
type backupCleanupLU struct {
	instanceBase
	KeyName string `json:"key_name"`
}

func (lu *backupCleanupLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return lu.locks(p, op, locking.Shared)
}

func (lu *backupCleanupLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	if _, _, err := lu.load(p, op); err != nil {
		return err
	}
	cds, err := p.domainSecret()
	if err != nil {
		return err
	}
	if lu.KeyName, err = pki.CheckKeyName(cds, op.Params["x509_key_name"]); err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid x509_key_name: %v", err)
	}
	return nil
}

func (lu *backupCleanupLU) Steps() []Step {
	return []Step{{"remove-key", func(ctx context.Context, s *StepCtx) error {
		_, node, err := lu.load(s.p, s.Op())
		if err != nil {
			return err
		}
		if err := s.RPC(ctx, node, nodeapi.X509CertRemove, nodeapi.X509CertRemoveArgs{Name: lu.KeyName}, nil); err != nil {
			return ecode.ExecErrorf("Could not remove transfer key %s on %s: %v", lu.KeyName, node.Name, err)
		}
		s.Logf(ctx, "Removed transfer key %s on %s", lu.KeyName, node.Name)
		return nil
	}}}
}

func (lu *backupCleanupLU) Result() any { return nil }

// ---- remove

type backupRemoveLU struct{}

func (lu *backupRemoveLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *backupRemoveLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	return CheckName("instance", op.Str("instance_name"))
}

func (lu *backupRemoveLU) Steps() []Step {
	return []Step{{"remove-exports", func(ctx context.Context, s *StepCtx) error {
		name := lockName(s.p, s.Op().Str("instance_name"))
		found := false
		for _, n := range s.Cfg().Nodes() {
			if n.Offline {
				continue
			}
			if err := s.removeExport(ctx, n, name); err == nil {
				found = true
				s.Logf(ctx, "Removed the export of %s on %s", name, n.Name)
			} else if ecode.ClassOf(err) != ecode.NoEnt {
				return ecode.ExecErrorf("Could not remove the export of %s on %s: %v", name, n.Name, err)
			}
		}
		if !found {
			s.Logf(ctx, "No export of %s found", name)
		}
		return nil
	}}}
}

func (lu *backupRemoveLU) Result() any { return nil }

func (s *StepCtx) removeExport(ctx context.Context, n *config.Node, name string) error {
	return s.RPC(ctx, n, nodeapi.ExportRemove, nodeapi.ExportNameArgs{Name: name}, nil)
}

// ---- export

type backupExportLU struct {
	instanceBase
	Mode     string `json:"mode"`
	Target   string `json:"target"` // local: the node keeping the export
	Compress string `json:"compress"`
	// WasUp: the instance ran when the export began; it is started again
	// afterwards unless it is removed.
	WasUp bool `json:"was_up"`
	// Live: the instance keeps running (shutdown=false); the export reads
	// point-in-time copies of its disks, Snapshots (by disk index), which
	// are removed when the export ends, whatever the outcome.
	Live      bool     `json:"live,omitempty"`
	Snapshots []string `json:"snapshots,omitempty"`
	// Remote: where each disk goes, the local transfer key and the
	// destination's certificate.
	Dest    []remoteDisk `json:"dest,omitempty"`
	KeyName string       `json:"key_name,omitempty"`
	DestPEM string       `json:"dest_cert,omitempty"`
	Disks   []bool       `json:"disks"`
}

// remoteDisk is one checked destination of a remote export.
type remoteDisk struct {
	Host  string `json:"host"`
	Port  int    `json:"port"`
	Magic string `json:"magic"`
}

func (lu *backupExportLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	reqs := lu.locks(p, op, locking.Exclusive)
	if op.Str("mode") != "remote" {
		if tn, ok := op.Params["target_node"].(string); ok {
			if n, ok := p.Cfg.Node(tn); ok {
				reqs = append(reqs, nodeLock(locking.Shared, n.UUID))
			}
		}
	}
	return reqs
}

func (lu *backupExportLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	inst, node, err := lu.load(p, op)
	if err != nil {
		return err
	}
	if err := checkNodeOnline(node); err != nil {
		return err
	}
	lu.Mode, lu.Compress = op.Str("mode"), op.Str("compress")
	if err := opcodes.CheckCompression(lu.Compress); err != nil {
		return err
	}
	if inst.DiskTemplate == config.DTDiskless {
		return ecode.Errorf(ecode.State, "Instance '%s' is diskless: there is nothing to export", inst.Name)
	}
	if err := refuseInRescue(p, inst, "export it"); err != nil {
		return err
	}
	run, err := p.running(ctx, inst, node)
	if err != nil {
		return err
	}
	if !op.Bool("shutdown") && op.Bool("remove_instance") && inst.AdminState == config.AdminUp {
		return ecode.Errorf(ecode.State, "Instance '%s' cannot be removed without shutting it down first", inst.Name)
	}
	lu.Live = run && !op.Bool("shutdown")
	if lu.Live && inst.DiskTemplate == config.DTRBD {
		// Transfers of rbd disks are refused anyway; an rbd snapshot
		// would be the copy to read.
		return ecode.Errorf(ecode.State, "Instance '%s' is running and its %s disks have no snapshots: export it with shutdown", inst.Name, inst.DiskTemplate)
	}
	lu.WasUp = run && !lu.Live
	switch lu.Mode {
	case "local":
		tn, _ := op.Params["target_node"].(string)
		if tn == "" {
			return ecode.Errorf(ecode.Inval, "A local export needs a target node (target_node)")
		}
		t, err := p.Cfg.MustNode(tn)
		if err != nil {
			return err
		}
		if err := checkNodeOnline(t); err != nil {
			return err
		}
		lu.Target = t.Name
		return nil
	case "remote":
		return lu.prereqRemote(p, op, inst)
	}
	return ecode.Errorf(ecode.Inval, "Invalid export mode '%s' (valid: local, remote)", lu.Mode)
}

// prereqRemote checks everything the destination sent, signed with the
// domain secret, before anything stops or moves.
func (lu *backupExportLU) prereqRemote(p *Processor, op *opcodes.Op, inst *config.Instance) error {
	cds, err := p.domainSecret()
	if err != nil {
		return err
	}
	if lu.KeyName, err = pki.CheckKeyName(cds, op.Params["x509_key_name"]); err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid x509_key_name: %v", err)
	}
	ca := op.Str("destination_x509_ca")
	if ca == "" {
		return ecode.Errorf(ecode.Inval, "A remote export needs the destination's certificate (destination_x509_ca)")
	}
	cert, err := pki.LoadSignedX509(cds, ca, time.Now())
	if err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid destination certificate: %v", err)
	}
	lu.DestPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
	dest, ok := op.Params["target_node"].([]any)
	if !ok || len(dest) != len(inst.Disks) {
		return ecode.Errorf(ecode.Inval, "Remote export needs one destination per disk (%d), got %v", len(inst.Disks), describeLen(op.Params["target_node"]))
	}
	lu.Dest = nil
	for i, d := range dest {
		host, port, magic, err := pki.CheckDiskInfo(cds, i, d)
		if err != nil {
			return ecode.Errorf(ecode.Inval, "Destination of disk %d: %v", i, err)
		}
		lu.Dest = append(lu.Dest, remoteDisk{Host: host, Port: port, Magic: magic})
	}
	return nil
}

func describeLen(v any) string {
	if l, ok := v.([]any); ok {
		return fmt.Sprintf("%d", len(l))
	}
	return fmt.Sprintf("%T", v)
}

func (lu *backupExportLU) Steps() []Step {
	return []Step{
		// A running instance is either shut down or, for a live export,
		// has its disks copied while it runs.
		{"shutdown-or-snapshot", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if lu.Live {
				return lu.snapshot(ctx, s, inst, node)
			}
			if !lu.WasUp {
				return nil
			}
			s.Logf(ctx, "Shutting down instance %s", inst.Name)
			args := nodeapi.ShutdownArgs{Instance: s.p.Spec(inst), Timeout: s.Op().Int("shutdown_timeout")}
			if err := s.RPC(ctx, node, nodeapi.InstanceShutdown, args, nil); err != nil {
				return ecode.ExecErrorf("Could not shut down instance %s: %v", inst.Name, err)
			}
			return nil
		}},
		{"export-disks", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if lu.Mode == "remote" {
				err = lu.sendRemote(ctx, s, inst, node)
			} else {
				err = lu.exportLocal(ctx, s, inst, node)
			}
			if ctx.Err() == nil {
				// A stopping master keeps the copies for the resumed
				// step; a cancelled job's Revert removes them.
				lu.removeSnapshots(ctx, s, node)
			}
			if err != nil {
				lu.restart(ctx, s, inst, node)
				return err
			}
			lu.Disks = make([]bool, len(inst.Disks))
			for i := range lu.Disks {
				lu.Disks[i] = true
			}
			return nil
		}},
		{"finish", func(ctx context.Context, s *StepCtx) error {
			inst, node, err := lu.load(s.p, s.Op())
			if err != nil {
				return err
			}
			if !s.Op().Bool("remove_instance") {
				lu.restart(ctx, s, inst, node)
				return nil
			}
			return lu.removeInstance(ctx, s, inst, node)
		}},
	}
}

// snapshot copies every disk of the running instance on its node, which
// keeps running, and records the copies the transfers read.
func (lu *backupExportLU) snapshot(ctx context.Context, s *StepCtx, inst *config.Instance, node *config.Node) error {
	s.Logf(ctx, "Instance %s keeps running: making a point-in-time copy of its %d disk(s) on %s", inst.Name, len(inst.Disks), node.Name)
	var r nodeapi.DiskSnapshotReply
	if err := s.RPC(ctx, node, nodeapi.DiskSnapshot, nodeapi.DiskSnapshotArgs{Instance: s.p.Spec(inst)}, &r); err != nil {
		return ecode.ExecErrorf("Could not snapshot the disks of %s on %s (export it with shutdown instead): %w", inst.Name, node.Name, err)
	}
	lu.Snapshots = make([]string, len(inst.Disks))
	for _, sn := range r.Snapshots {
		if sn.Disk < 0 || sn.Disk >= len(lu.Snapshots) {
			return ecode.ExecErrorf("node %s returned a snapshot of disk %d, which %s does not have", node.Name, sn.Disk, inst.Name)
		}
		lu.Snapshots[sn.Disk] = sn.Name
		s.Logf(ctx, "disk/%d: snapshot %s (%d MiB) made in %.1fs", sn.Disk, sn.Name, sn.SizeMiB, sn.Seconds)
	}
	for i, name := range lu.Snapshots {
		if name == "" {
			return ecode.ExecErrorf("node %s made no snapshot of disk %d of %s", node.Name, i, inst.Name)
		}
	}
	return nil
}

// snapshotOf is the copy the export of disk i reads ("" when the instance
// was shut down and the disk itself is read).
func (lu *backupExportLU) snapshotOf(i int) string {
	if i < len(lu.Snapshots) {
		return lu.Snapshots[i]
	}
	return ""
}

// removeSnapshots deletes the disk copies, if any. It runs when the
// transfers end, however they end, and from Revert; removing a copy that
// is already gone succeeds, and a copy that cannot be removed now is swept
// when its node daemon next starts.
func (lu *backupExportLU) removeSnapshots(ctx context.Context, s *StepCtx, node *config.Node) {
	var names []string
	for _, n := range lu.Snapshots {
		if n != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.RPC(ctx, node, nodeapi.DiskSnapshotRemove, nodeapi.DiskSnapshotRemoveArgs{Names: names}, nil); err != nil {
		s.Logf(ctx, "Warning: could not remove the disk snapshots %v on %s: %v", names, node.Name, err)
		return
	}
	s.Logf(ctx, "Removed the disk snapshots on %s", node.Name)
	lu.Snapshots = nil
}

// Revert removes disk copies a failed export left.
func (lu *backupExportLU) Revert(ctx context.Context, s *StepCtx, failed error) {
	if len(lu.Snapshots) == 0 {
		return
	}
	if _, node, err := lu.load(s.p, s.Op()); err == nil {
		lu.removeSnapshots(ctx, s, node)
	}
}

// restart starts the instance again if the export stopped it.
func (lu *backupExportLU) restart(ctx context.Context, s *StepCtx, inst *config.Instance, node *config.Node) {
	if !lu.WasUp || inst.AdminState != config.AdminUp {
		return
	}
	s.Logf(ctx, "Starting instance %s again", inst.Name)
	if err := s.RPC(ctx, node, nodeapi.InstanceStart, nodeapi.InstanceArgs{Instance: s.p.Spec(inst)}, nil); err != nil {
		s.Logf(ctx, "Warning: could not start instance %s again: %v", inst.Name, err)
	}
}

func (lu *backupExportLU) removeInstance(ctx context.Context, s *StepCtx, inst *config.Instance, node *config.Node) error {
	ignore := s.Op().Bool("ignore_remove_failures")
	s.Logf(ctx, "Removing instance %s", inst.Name)
	for i, d := range inst.Disks {
		args := nodeapi.DiskArgs{InstanceUUID: inst.UUID, Template: inst.DiskTemplate, SharedFileDir: s.Cfg().Cluster().SharedFileStorageDir,
			Disk: nodeapi.DiskSpec{UUID: d.UUID, Index: i, SizeMiB: d.SizeMiB, Mode: d.Mode, Params: s.p.nodeDiskParams(inst.DiskTemplate, node.UUID)}}
		if err := s.RPC(ctx, node, nodeapi.DiskRemove, args, nil); err != nil {
			if !ignore {
				return ecode.ExecErrorf("Could not remove disk %d of instance %s: %v", i, inst.Name, err)
			}
			s.Logf(ctx, "Warning: could not remove disk %d (ignored): %v", i, err)
		}
	}
	s.Tx().DeleteInstance(inst)
	return nil
}

// exportLocal copies every disk into an export directory on the target
// node, writes the metadata beside them and removes the instance's older
// exports on other nodes.
func (lu *backupExportLU) exportLocal(ctx context.Context, s *StepCtx, inst *config.Instance, node *config.Node) error {
	target, err := s.Cfg().MustNode(lu.Target)
	if err != nil {
		return err
	}
	debug := s.Op().Int("debug_level")
	var ts []diskTransfer
	for i := range inst.Disks {
		src := s.p.diskIO(inst, i, debug)
		src.Snapshot = lu.snapshotOf(i)
		ts = append(ts, diskTransfer{Component: "disk" + strconv.Itoa(i),
			Src: node, SrcIO: src,
			Dst: target, DstIO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: inst.Name, FileName: dumpName(i), SizeMiB: inst.Disks[i].SizeMiB}})
	}
	s.Logf(ctx, "Exporting %d disk(s) of %s to %s", len(ts), inst.Name, target.Name)
	if err := s.runLocalTransfers(ctx, ts, lu.Compress); err != nil {
		return err
	}
	meta := lu.metadata(s.p, inst, node)
	if err := s.RPC(ctx, target, nodeapi.ExportFinalize, nodeapi.ExportFinalizeArgs{Name: inst.Name, Config: string(meta.Marshal())}, nil); err != nil {
		return ecode.ExecErrorf("Could not finalize the export on %s: %v", target.Name, err)
	}
	for _, n := range s.Cfg().Nodes() {
		if n.UUID == target.UUID || n.Offline {
			continue
		}
		if err := s.removeExport(ctx, n, inst.Name); err == nil {
			s.Logf(ctx, "Removed the older export of %s on %s", inst.Name, n.Name)
		}
	}
	return nil
}

// metadata describes the instance as config.ini records it.
func (lu *backupExportLU) metadata(p *Processor, inst *config.Instance, node *config.Node) *exportcfg.Export {
	c := p.Cfg.Cluster()
	be := config.Fill(c.BEParams, inst.BEParams)
	e := &exportcfg.Export{
		Version: 0, Timestamp: time.Now().Unix(), Source: node.Name, OS: inst.OS, Compression: lu.Compress,
		Name: inst.Name, Hypervisor: inst.Hypervisor, DiskTemplate: inst.DiskTemplate,
		MaxMem: config.MemoryMiB(be), MinMem: config.MemoryMiB(be), VCPUs: config.VCPUs(be), Tags: slices.Clone(inst.Tags),
		HVParams: inst.HVParams.Strings(), BEParams: inst.BEParams.Strings(), OSParams: inst.OSParams.Strings(),
	}
	for i, d := range inst.Disks {
		e.Disks = append(e.Disks, exportcfg.Disk{Index: i, Name: d.Name, SizeMiB: d.SizeMiB, Dump: dumpName(i), Mode: d.Mode})
	}
	for _, n := range inst.NICs {
		e.NICs = append(e.NICs, exportcfg.NIC{MAC: n.MAC, IP: n.IP, Mode: n.Mode, Link: n.Link, Network: n.Network, Name: n.Name})
	}
	return e
}

// sendRemote streams every disk to the destination cluster's imports and
// destroys the local transfer key afterwards, whatever the outcome.
func (lu *backupExportLU) sendRemote(ctx context.Context, s *StepCtx, inst *config.Instance, node *config.Node) (err error) {
	defer s.removeCert(ctx, node, lu.KeyName)
	debug := s.Op().Int("debug_level")
	var ends []transferEnd
	defer func() { s.finishTransfers(ctx, ends, err != nil) }()
	var fs []followed
	for i, d := range lu.Dest {
		var r nodeapi.ExportStartReply
		src := s.p.diskIO(inst, i, debug)
		src.Snapshot = lu.snapshotOf(i)
		args := nodeapi.ExportStartArgs{Component: "disk" + strconv.Itoa(i), IO: src, Host: d.Host, Port: d.Port,
			Options: nodeapi.ImpExpOptions{KeyName: lu.KeyName, PeerCertPEM: lu.DestPEM, Compress: lu.Compress, Magic: d.Magic,
				ConnectTimeout: exportConnectTimeout, ConnectRetries: exportConnectRetries}}
		if err := s.RPC(ctx, node, nodeapi.ExportStart, args, &r); err != nil {
			return ecode.ExecErrorf("disk %d: starting the export to %s:%d: %v", i, d.Host, d.Port, err)
		}
		e := transferEnd{node: node, name: r.Name}
		ends = append(ends, e)
		fs = append(fs, followed{label: fmt.Sprintf("disk %d", i), sizeMiB: inst.Disks[i].SizeMiB, ends: []transferEnd{e}})
		s.Logf(ctx, "disk %d: sending to %s:%d in %s", i, d.Host, d.Port, peerStreamNote(lu.DestPEM))
	}
	return s.followTransfers(ctx, fs)
}

func (lu *backupExportLU) Result() any {
	disks := make([]any, len(lu.Disks))
	for i, ok := range lu.Disks {
		disks[i] = ok
	}
	return []any{len(lu.Disks) > 0, disks}
}
