package cmdlib

import (
	"context"
	"encoding/base64"
	"path/filepath"
	"sort"
	"strings"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
)

// Corral's `cluster command` and `cluster copyfile`: Ganeti's tools run
// them over root SSH from the master; Corral sends them to the node
// daemons (RunCommand, WriteFile), which take calls from the master's
// certificate only. corrald takes the opcodes from root on its LUXI
// socket only (opcodes.Def.RootOnly). They take no lock: a command may run
// for long, and touches nothing of the configuration.

func (p *Processor) maintCommandUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_CLUSTER_COMMAND", func() LU { return &clusterCommandLU{} }),
		p.unit("OP_CLUSTER_COPY_FILE", func() LU { return &clusterCopyFileLU{} }),
		p.unit("OP_CLUSTER_REDIST_CONF", func() LU { return &clusterRedistConfLU{} }),
		p.unit("OP_CLUSTER_RENAME", func() LU { return &clusterRenameLU{} }),
	}
}

// commandNodes resolves the nodes an op names (none: every node), within
// group_name when given, as Ganeti's GetOnlineNodes: offline nodes are
// skipped with a note. The master's node comes last, or is left out with
// skipMaster. Names are returned sorted otherwise.
func (p *Processor) commandNodes(op *opcodes.Op, skipMaster bool) (nodes []string, skipped []string, err error) {
	all, err := p.namedNodes(op.Strings("nodes"))
	if err != nil {
		return nil, nil, err
	}
	var group *config.NodeGroup
	if name := op.Str("group_name"); name != "" {
		if group, err = p.mustGroup(name); err != nil {
			return nil, nil, err
		}
	}
	master := p.Cfg.Cluster().MasterNode
	masterName := ""
	for _, n := range all {
		switch {
		case group != nil && n.Group != group.UUID:
		case n.UUID == master:
			masterName = n.Name
		case n.Offline:
			skipped = append(skipped, n.Name)
		default:
			nodes = append(nodes, n.Name)
		}
	}
	sort.Strings(nodes)
	if masterName != "" && !skipMaster {
		nodes = append(nodes, masterName)
	}
	return nodes, skipped, nil
}

// ---- OP_CLUSTER_COMMAND

// CommandResult is one node's part of OP_CLUSTER_COMMAND's result.
type CommandResult struct {
	Node      string `json:"node"`
	ExitCode  int    `json:"exit_code"`
	Output    string `json:"output"`
	Truncated bool   `json:"truncated,omitempty"`
	TimedOut  bool   `json:"timed_out,omitempty"`
	Error     string `json:"error,omitempty"` // the node could not run it
}

type clusterCommandLU struct {
	Nodes   []string        `json:"nodes"`
	Results []CommandResult `json:"results"`
}

func (lu *clusterCommandLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *clusterCommandLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	nodes, skipped, err := p.commandNodes(op, false)
	if err != nil {
		return err
	}
	if len(skipped) > 0 {
		p.Log.Info("cluster command: skipping offline nodes", "nodes", skipped)
	}
	lu.Nodes = nodes
	return nil
}

func (lu *clusterCommandLU) Steps() []Step {
	return []Step{{"run", func(ctx context.Context, s *StepCtx) error {
		args := nodeapi.RunCommandArgs{Command: s.Op().Str("command"), Timeout: s.Op().Float("timeout")}
		lu.Results = []CommandResult{}
		for _, name := range lu.Nodes {
			r := CommandResult{Node: name, ExitCode: -1}
			n, ok := s.Cfg().Node(name)
			if !ok {
				r.Error = "the node left the cluster"
				lu.Results = append(lu.Results, r)
				continue
			}
			var rep nodeapi.RunCommandReply
			if err := s.RPC(ctx, n, nodeapi.RunCommand, args, &rep); err != nil {
				r.Error = err.Error()
				s.Logf(ctx, "Node %s could not run the command: %v", name, err)
			} else {
				r.ExitCode, r.Output, r.Truncated, r.TimedOut = rep.ExitCode, rep.Output, rep.Truncated, rep.TimedOut
				s.Logf(ctx, "Ran the command on node %s: exit code %d", name, rep.ExitCode)
			}
			lu.Results = append(lu.Results, r)
		}
		return nil
	}}}
}

func (lu *clusterCommandLU) Result() any { return lu.Results }

// ---- OP_CLUSTER_COPY_FILE

// CopyFileResult is one node's part of OP_CLUSTER_COPY_FILE's result.
type CopyFileResult struct {
	Node  string `json:"node"`
	Error string `json:"error,omitempty"`
}

type clusterCopyFileLU struct {
	Nodes   []string         `json:"nodes"`
	Results []CopyFileResult `json:"results"`
}

func (lu *clusterCopyFileLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *clusterCopyFileLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	path := op.Str("path")
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || path == "/" {
		return ecode.Errorf(ecode.Inval, "The path '%s' must be absolute and normalized", path)
	}
	data, err := base64.StdEncoding.DecodeString(op.Str("content"))
	if err != nil {
		return ecode.Errorf(ecode.Inval, "The content is not base64: %w", err)
	}
	if len(data) > opcodes.MaxCopyFileBytes {
		return ecode.Errorf(ecode.Inval, "The file has %d bytes, more than the %d a copy may have", len(data), opcodes.MaxCopyFileBytes)
	}
	nodes, _, err := p.commandNodes(op, true)
	if err != nil {
		return err
	}
	lu.Nodes = nodes
	return nil
}

func (lu *clusterCopyFileLU) Steps() []Step {
	return []Step{{"copy", func(ctx context.Context, s *StepCtx) error {
		data, err := base64.StdEncoding.DecodeString(s.Op().Str("content"))
		if err != nil {
			return ecode.Errorf(ecode.Inval, "The content is not base64: %w", err)
		}
		path := s.Op().Str("path")
		args := nodeapi.WriteFileArgs{Path: path, Data: data, Mode: uint32(s.Op().Int("mode"))}
		lu.Results = []CopyFileResult{}
		var failed []string
		for _, name := range lu.Nodes {
			r := CopyFileResult{Node: name}
			n, ok := s.Cfg().Node(name)
			switch {
			case !ok:
				r.Error = "the node left the cluster"
			default:
				if err := s.RPC(ctx, n, nodeapi.WriteFile, args, nil); err != nil {
					r.Error = err.Error()
				}
			}
			if r.Error != "" {
				failed = append(failed, name)
				s.Logf(ctx, "Copy of file %s to node %s failed: %s", path, name, r.Error)
			}
			lu.Results = append(lu.Results, r)
		}
		s.Logf(ctx, "Copied %s (%d bytes) to %d of %d node(s)%s", path, len(data), len(lu.Nodes)-len(failed), len(lu.Nodes), failedList(failed))
		return nil
	}}}
}

func failedList(failed []string) string {
	if len(failed) == 0 {
		return ""
	}
	return "; failed: " + strings.Join(failed, ", ")
}

func (lu *clusterCopyFileLU) Result() any { return lu.Results }

// ---- OP_CLUSTER_REDIST_CONF

// clusterRedistConfLU writes again what the nodes keep from the
// configuration, for a node whose files were damaged or lost: every node's
// SSH key files (as a node change does), and in Ganeti drop-in mode the
// ssconf files, each checked on disk. The configuration itself is in the
// store, which the master candidates read: there is no copy to push.
type clusterRedistConfLU struct{}

func (lu *clusterRedistConfLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Shared), nodeLock(locking.Shared, locking.All)}
}

func (lu *clusterRedistConfLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	return nil
}

func (lu *clusterRedistConfLU) Steps() []Step {
	return []Step{sshSyncStep(), {"ssconf", func(ctx context.Context, s *StepCtx) error {
		if s.p.RewriteSsconf == nil {
			return nil
		}
		dropin, err := s.p.RewriteSsconf(ctx)
		switch {
		case err != nil:
			return ecode.ExecErrorf("Rewriting the ssconf files: %w", err)
		case dropin:
			s.Logf(ctx, "Checked and rewrote the ssconf files")
		default:
			s.Logf(ctx, "Not in Ganeti drop-in mode: no ssconf files to write")
		}
		return nil
	}}}
}

func (lu *clusterRedistConfLU) Result() any { return nil }

// ---- OP_CLUSTER_RENAME

// clusterRenameLU changes the cluster's name. Corral's cluster IP is set
// on its own (masterip.go), not resolved from the name, so unlike Ganeti's
// the new name need not resolve and no address moves; the ssconf files follow the
// configuration. The certificates keep the name they were issued with
// (the CA's subject); `renew-crypto --new-rapi-certificate` issues RAPI's
// again for clients that check the new name. The result is the new name.
type clusterRenameLU struct {
	Name string `json:"name"`
}

func (lu *clusterRenameLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Exclusive)}
}

func (lu *clusterRenameLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	name := strings.ToLower(op.Str("name"))
	if err := CheckName("cluster", name); err != nil {
		return err
	}
	if name == p.Cfg.Cluster().ClusterName {
		return ecode.Errorf(ecode.Inval, "Neither the name nor the IP address of the cluster has changed")
	}
	lu.Name = name
	return nil
}

func (lu *clusterRenameLU) Steps() []Step {
	return []Step{{"rename", func(ctx context.Context, s *StepCtx) error {
		c := s.Cfg().Cluster()
		s.Logf(ctx, "Renaming the cluster from '%s' to '%s'", c.ClusterName, lu.Name)
		c.ClusterName = lu.Name
		s.Tx().PutCluster(c)
		return nil
	}}}
}

func (lu *clusterRenameLU) Result() any { return lu.Name }
