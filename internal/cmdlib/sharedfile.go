package cmdlib

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// externallyMirrored are the templates whose disks every node of the group
// reaches (Ganeti's DTS_EXT_MIRROR): their instances migrate and fail over
// to any node, with no secondary.
var externallyMirrored = []string{config.DTDiskless, config.DTSharedFile, config.DTRBD, "blockdev", "ext", "gluster"}

func isExternallyMirrored(t string) bool { return slices.Contains(externallyMirrored, t) }

// checkSharedFileDir accepts a new shared_file_storage_dir: an absolute,
// clean path, and not while sharedfile instances keep their disks in the
// old one.
func checkSharedFileDir(p *Processor, dir string) error {
	if dir != "" && (!filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.ContainsAny(dir, "\x00\n")) {
		return ecode.Errorf(ecode.Inval, "shared_file_storage_dir must be a clean absolute path, got '%s'", dir)
	}
	for _, i := range p.Cfg.Instances() {
		if i.DiskTemplate == config.DTSharedFile {
			return ecode.Errorf(ecode.State, "Instance %s keeps its disks in the shared file storage directory; it cannot change", i.Name)
		}
	}
	return nil
}

// verifySharedDirs checks, per node group, that every online vm_capable
// node sees the same files in the shared directory: one node writes a probe
// with random content, every other node must read exactly that.
func (lu *clusterVerifyLU) verifySharedDirs(ctx context.Context, p *Processor) {
	c := p.Cfg.Cluster()
	if !contains(c.EnabledDiskTemplates, config.DTSharedFile) {
		return
	}
	dir := c.SharedFileStorageDir
	if dir == "" {
		lu.errf("cluster: the sharedfile template is enabled but shared_file_storage_dir is not set")
		return
	}
	byGroup := map[string][]*config.Node{}
	for _, n := range p.Cfg.Nodes() {
		if !n.Offline && n.VMCapable {
			byGroup[n.Group] = append(byGroup[n.Group], n)
		}
	}
	for _, nodes := range byGroup {
		if len(nodes) < 2 {
			continue
		}
		lu.probeSharedDir(ctx, p, dir, nodes)
	}
}

func (lu *clusterVerifyLU) probeSharedDir(ctx context.Context, p *Processor, dir string, nodes []*config.Node) {
	token := make([]byte, 12)
	if _, err := rand.Read(token); err != nil {
		lu.errf("cluster: %v", err)
		return
	}
	content := hex.EncodeToString(token)
	name := ".corral-probe-" + content[:12]
	writer := nodes[0]
	args := nodeapi.SharedDirProbeArgs{Dir: dir, Name: name, Op: nodeapi.ProbeWrite, Content: content}
	var wr nodeapi.SharedDirProbeReply
	if err := p.RPC.Call(ctx, writer, nodeapi.SharedDirProbe, "", args, &wr); err != nil {
		lu.errf("node %s: cannot write in the shared directory %s: %v", writer.Name, dir, err)
		return
	}
	if wr.Closed != "" {
		lu.errf("node %s: other users cannot pass through %s, on the way to the shared directory: qemu, which runs unprivileged, cannot open disks there", writer.Name, wr.Closed)
	}
	defer func() {
		args.Op, args.Content = nodeapi.ProbeRemove, ""
		if err := p.RPC.Call(ctx, writer, nodeapi.SharedDirProbe, "", args, nil); err != nil {
			lu.warnf("node %s: cannot remove the probe %s from the shared directory: %v", writer.Name, name, err)
		}
	}()
	for _, n := range nodes[1:] {
		var r nodeapi.SharedDirProbeReply
		read := nodeapi.SharedDirProbeArgs{Dir: dir, Name: name, Op: nodeapi.ProbeRead}
		switch err := p.RPC.Call(ctx, n, nodeapi.SharedDirProbe, "", read, &r); {
		case err != nil:
			lu.errf("node %s: cannot read the shared directory %s: %v", n.Name, dir, err)
		case !r.Found:
			lu.errf("node %s: does not see the file node %s wrote in the shared directory %s: is it mounted there?", n.Name, writer.Name, dir)
		case r.Content != content:
			lu.errf("node %s: sees other content than node %s wrote in the shared directory %s", n.Name, writer.Name, dir)
		}
	}
}
