package cmdlib

import (
	"context"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/exportcfg"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
)

// Instance creation from an export (mode import) or from another cluster
// (mode remote-import): the disks are created as for a new instance, then
// filled from the export's images or from the source cluster's stream
// instead of by the OS create script; the OS rename script then runs with
// the old name.

const (
	modeCreate       = "create"
	modeImport       = "import"
	modeRemoteImport = "remote-import"
)

// importPlan is what an import decided in Prereq.
type importPlan struct {
	SrcNode    string   `json:"src_node,omitempty"`
	ExportName string   `json:"export_name,omitempty"`
	Dumps      []string `json:"dumps,omitempty"`
	// OldName is the instance's name in the export or on the source
	// cluster (OLD_INSTANCE_NAME of the rename script).
	OldName   string `json:"old_name"`
	SourcePEM string `json:"source_cert,omitempty"`
	Compress  string `json:"compress"`
	Timeout   int    `json:"connect_timeout,omitempty"`
}

// prereqImport checks an import's source and fills what the caller left
// out (disks, NICs, OS, hypervisor and parameters) from the export, before
// the common creation checks run on the completed opcode.
func (lu *instanceCreateLU) prereqImport(ctx context.Context, p *Processor, op *opcodes.Op) error {
	lu.Mode = op.Str("mode")
	switch lu.Mode {
	case modeCreate:
		return nil
	case modeImport:
		return lu.prereqLocalImport(ctx, p, op)
	case modeRemoteImport:
		return lu.prereqRemoteImport(p, op)
	}
	return ecode.Errorf(ecode.Inval, "Invalid instance creation mode '%s' (valid: create, import, remote-import)", lu.Mode)
}

func (lu *instanceCreateLU) prereqRemoteImport(p *Processor, op *opcodes.Op) error {
	compress := op.Str("compress")
	if err := opcodes.CheckCompression(compress); err != nil {
		return err
	}
	old := op.Str("source_instance_name")
	if old == "" {
		return ecode.Errorf(ecode.Inval, "A remote import needs the instance's name on the source cluster (source_instance_name)")
	}
	cds, err := p.domainSecret()
	if err != nil {
		return err
	}
	if err := pki.CheckHandshake(cds, op.Params["source_handshake"]); err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid source handshake: %w", err)
	}
	if op.Str("disk_template") == config.DTDiskless {
		return ecode.Errorf(ecode.Inval, "A remote import needs disks; the diskless template has none")
	}
	lu.Import = &importPlan{OldName: old, Compress: compress, Timeout: rieConnectTimeout + op.Int("source_shutdown_timeout")}
	ca := op.Str("source_x509_ca")
	if ca == "" {
		if op.Bool("dry_run") {
			// A move's preflight: the source made no certificate, and
			// the handshake already proved the shared secret.
			return nil
		}
		return ecode.Errorf(ecode.Inval, "A remote import needs the source's certificate (source_x509_ca)")
	}
	cert, err := pki.LoadSignedX509(cds, ca, time.Now())
	if err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid source certificate: %w", err)
	}
	lu.Import.SourcePEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))
	return nil
}

func (lu *instanceCreateLU) prereqLocalImport(ctx context.Context, p *Processor, op *opcodes.Op) error {
	name := op.Str("src_path")
	if name == "" {
		name = op.Str("instance_name")
	}
	// Ganeti's src_path is the export's directory; its last element is
	// the exported instance's name.
	name = filepath.Base(filepath.Clean(name))
	if err := CheckName("export", name); err != nil {
		return err
	}
	src, info, err := p.findExport(ctx, op.Str("src_node"), name)
	if err != nil {
		return err
	}
	exp, err := exportcfg.Parse([]byte(info.Config))
	if err != nil {
		return ecode.Errorf(ecode.Inval, "The export of %s on %s is unreadable: %w", name, src.Name, err)
	}
	if err := fillFromExport(op, exp); err != nil {
		return err
	}
	plan := &importPlan{SrcNode: src.Name, ExportName: name, OldName: exp.Name, Compress: exp.Compression}
	if plan.Compress == "" || opcodes.CheckCompression(plan.Compress) != nil {
		plan.Compress = "none"
	}
	for _, d := range exp.Disks {
		plan.Dumps = append(plan.Dumps, d.Dump)
	}
	lu.Import = plan
	return nil
}

// findExport locates an export by name, on the given node or on any.
func (p *Processor) findExport(ctx context.Context, nodeName, name string) (*config.Node, nodeapi.ExportInfoReply, error) {
	var nodes []*config.Node
	if nodeName != "" {
		n, err := p.Cfg.MustNode(nodeName)
		if err != nil {
			return nil, nodeapi.ExportInfoReply{}, err
		}
		if err := checkNodeOnline(n); err != nil {
			return nil, nodeapi.ExportInfoReply{}, err
		}
		nodes = []*config.Node{n}
	} else {
		for _, n := range p.Cfg.Nodes() {
			if !n.Offline {
				nodes = append(nodes, n)
			}
		}
	}
	for _, n := range nodes {
		var info nodeapi.ExportInfoReply
		err := p.RPC.Call(ctx, n, nodeapi.ExportInfo, "", nodeapi.ExportNameArgs{Name: name}, &info)
		if err == nil {
			return n, info, nil
		}
		if nodeName != "" || ecode.ClassOf(err) != ecode.NoEnt {
			return nil, info, fmt.Errorf("reading the export of %s on %s: %w", name, n.Name, err)
		}
	}
	return nil, nodeapi.ExportInfoReply{}, ecode.Errorf(ecode.NoEnt, "No export of '%s' found on any node", name)
}

// fillFromExport completes an import's opcode from the export's metadata:
// what the caller gave wins.
func fillFromExport(op *opcodes.Op, exp *exportcfg.Export) error {
	if disks := op.List("disks"); len(disks) == 0 {
		var l []any
		for _, d := range exp.Disks {
			m := map[string]any{"size": float64(d.SizeMiB)}
			if d.Mode != "" {
				m["mode"] = d.Mode
			}
			if d.Name != "" {
				m["name"] = d.Name
			}
			l = append(l, m)
		}
		op.Params["disks"] = l
	} else if len(disks) != len(exp.Disks) {
		return ecode.Errorf(ecode.Inval, "The export has %d disk(s), the request %d", len(exp.Disks), len(disks))
	}
	if len(op.List("nics")) == 0 {
		var l []any
		for _, n := range exp.NICs {
			m := map[string]any{}
			fields := map[string]string{"mode": n.Mode, "link": n.Link, "ip": n.IP, "name": n.Name}
			if n.Network != "" {
				// As Ganeti: a NIC on a network (its uuid in the export)
				// takes mode and link from the new node's group.
				fields = map[string]string{"network": n.Network, "ip": n.IP, "name": n.Name}
			}
			for k, v := range fields {
				if v != "" {
					m[k] = v
				}
			}
			l = append(l, m)
		}
		op.Params["nics"] = l
	}
	if op.Str("os_type") == "" && exp.OS != "" {
		op.Params["os_type"] = exp.OS
	}
	if op.Str("hypervisor") == "" && exp.Hypervisor != "" {
		op.Params["hypervisor"] = exp.Hypervisor
	}
	for key, from := range map[string]map[string]string{"beparams": exp.BEParams, "hvparams": exp.HVParams, "osparams": exp.OSParams} {
		merged := map[string]any{}
		for k, v := range from {
			merged[k] = v
		}
		for k, v := range op.Dict(key) {
			merged[k] = v
		}
		op.Params[key] = merged
	}
	return nil
}

// importDisksStep fills the new disks from the export or the source
// cluster.
func (lu *instanceCreateLU) importDisksStep() Step {
	return Step{"import-disks", func(ctx context.Context, s *StepCtx) error {
		if lu.Import == nil {
			return nil
		}
		inst, err := s.Cfg().MustInstance(lu.Inst.UUID)
		if err != nil {
			return err
		}
		node, err := s.Cfg().MustNode(lu.Node)
		if err != nil {
			return err
		}
		if lu.Mode == modeRemoteImport {
			return lu.receiveRemote(ctx, s, inst, node)
		}
		src, err := s.Cfg().MustNode(lu.Import.SrcNode)
		if err != nil {
			return err
		}
		var ts []diskTransfer
		for i := range inst.Disks {
			ts = append(ts, diskTransfer{Component: "disk" + strconv.Itoa(i),
				Src: src, SrcIO: nodeapi.ImpExpIO{Kind: nodeapi.IOFile, ExportName: lu.Import.ExportName, FileName: lu.Import.Dumps[i], SizeMiB: inst.Disks[i].SizeMiB},
				Dst: node, DstIO: s.p.diskIO(inst, i, lu.Debug)})
		}
		s.Logf(ctx, "Importing %d disk(s) from the export of %s on %s", len(ts), lu.Import.ExportName, src.Name)
		return s.runLocalTransfers(ctx, ts, lu.Import.Compress)
	}}
}

// renameOSStep runs the OS rename script with the instance's old name. As
// in Ganeti, a failing script is a warning in the job log: the disks hold
// the imported data by now, and failing the job would revert the creation
// and delete them (in a move whose source removes its instance, the
// instance's only copy).
func (lu *instanceCreateLU) renameOSStep() Step {
	return Step{"rename-os", func(ctx context.Context, s *StepCtx) error {
		if lu.Import == nil || lu.Inst.OS == "" || lu.NoInstall {
			return nil
		}
		if lu.Mode == modeImport && lu.Import.OldName == lu.Inst.Name {
			return nil
		}
		inst, err := s.Cfg().MustInstance(lu.Inst.UUID)
		if err != nil {
			return err
		}
		node, err := s.Cfg().MustNode(lu.Node)
		if err != nil {
			return err
		}
		s.Logf(ctx, "Running the OS rename script (old name %s)", lu.Import.OldName)
		var r nodeapi.OSReply
		if err := s.RPC(ctx, node, nodeapi.OSRename, nodeapi.OSRenameArgs{Instance: s.p.Spec(inst), OldName: lu.Import.OldName}, &r); err != nil {
			s.Logf(ctx, "Warning: the OS rename script failed for %s on node %s (the imported instance is kept): %v", inst.Name, node.Name, err)
		}
		return nil
	}}
}

// receiveRemote listens for the source cluster's disks: one import per
// disk on the primary node, announced in a remote-import log entry signed
// with the domain secret, then followed until every disk arrived.
func (lu *instanceCreateLU) receiveRemote(ctx context.Context, s *StepCtx, inst *config.Instance, node *config.Node) (err error) {
	cds, err := s.p.domainSecret()
	if err != nil {
		return err
	}
	cert, err := s.newCert(ctx, node, remoteCertValidity)
	if err != nil {
		return err
	}
	// The destination destroys its key once the disks arrived (or failed).
	defer s.removeCert(ctx, node, cert.Name)
	signed, err := pki.SignX509(cds, []byte(cert.CertPEM))
	if err != nil {
		return err
	}
	var ends []transferEnd
	defer func() { s.finishTransfers(ctx, ends, err != nil) }()
	base, salt := pki.NewMagicBase(), pki.NewSalt()
	var disks []any
	var fs []followed
	for i := range inst.Disks {
		magic := pki.ComputeMagic(base, inst.Name, i)
		var r nodeapi.ImportStartReply
		args := nodeapi.ImportStartArgs{Component: "disk" + strconv.Itoa(i), IO: s.p.diskIO(inst, i, lu.Debug),
			Options: nodeapi.ImpExpOptions{KeyName: cert.Name, PeerCertPEM: lu.Import.SourcePEM, Compress: lu.Import.Compress,
				Magic: magic, ConnectTimeout: lu.Import.Timeout}}
		if err := s.RPC(ctx, node, nodeapi.ImportStart, args, &r); err != nil {
			return ecode.ExecErrorf("disk %d: starting the import on %s: %w", i, node.Name, err)
		}
		e := transferEnd{node: node, name: r.Name}
		ends = append(ends, e)
		host := r.Host
		if host == "" {
			host = node.PrimaryIP
		}
		disks = append(disks, pki.SignDiskInfo(cds, i, host, r.Port, magic, salt))
		fs = append(fs, followed{label: fmt.Sprintf("disk %d", i), sizeMiB: inst.Disks[i].SizeMiB, ends: []transferEnd{e}})
	}
	if err := s.LogEntry(ctx, "remote-import", map[string]any{"disks": disks, "x509_ca": signed}); err != nil {
		return err
	}
	s.Logf(ctx, "Waiting for the source cluster to send %d disk(s) (at most %d s for the connections), in %s",
		len(disks), lu.Import.Timeout, peerStreamNote(lu.Import.SourcePEM))
	return s.followTransfers(ctx, fs)
}
