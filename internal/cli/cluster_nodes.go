package cli

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/opcodes"
)

// `cluster command` and `cluster copyfile`: gnt-cluster's, through the
// node daemons instead of SSH. Both are root's alone (corrald refuses
// them from anyone else on its socket).

// nodeSelection is Ganeti's -n (repeated, or comma-separated) and -g.
type nodeSelection struct {
	nodes []string
	group string
}

func (s *nodeSelection) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringSliceVarP(&s.nodes, "node", "n", nil, "only this node (repeat, or separate with commas; default: every online node)")
	f.StringVarP(&s.group, "nodegroup", "g", "", "only the nodes of this node group")
}

func (s *nodeSelection) fill(op map[string]any) {
	nodes := []any{}
	for _, n := range s.nodes {
		nodes = append(nodes, n)
	}
	op["nodes"] = nodes
	setNonEmpty(op, "group_name", s.group)
}

func (a *app) clusterCommandCmd() *cobra.Command {
	var o jobOpts
	var sel nodeSelection
	var machineNames, failureOnly bool
	var timeout int
	cmd := &cobra.Command{
		Use:   "command [-n NODE]... [-g GROUP] COMMAND...",
		Short: "Run a command as root on every node",
		Long: `Run COMMAND (its words joined by spaces, run by /bin/sh -c) as root on every
online node, or the nodes -n and -g select, the master's node last
(OP_CLUSTER_COMMAND). The node daemons run it, not SSH; only root on the
master may ask. Each node's output is printed as gnt-cluster command does.
The job records the command: do not put secrets on its command line.`,
		Example: "  corral cluster command uptime\n  corral cluster command -n node2 -n node3 -M 'cat /etc/os-release'",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_CLUSTER_COMMAND", "command": strings.Join(args, " ")}
			sel.fill(op)
			if cmd.Flags().Changed("timeout") {
				op["timeout"] = timeout
			}
			o.quiet = true
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				return printCommandResults(w, res, machineNames, failureOnly)
			})
		},
	}
	cmd.Flags().SetInterspersed(false)
	addJobFlags(cmd, &o, false)
	sel.add(cmd)
	f := cmd.Flags()
	f.BoolVarP(&machineNames, "show-machine-names", "M", false, "put the node's name in front of each output line")
	f.BoolVar(&failureOnly, "failure-only", false, "print only the nodes where the command failed")
	f.IntVar(&timeout, "timeout", opcodes.DefaultCommandTimeout, "seconds the command may run on each node")
	return cmd
}

type commandResult struct {
	Node      string `json:"node"`
	ExitCode  int    `json:"exit_code"`
	Output    string `json:"output"`
	Truncated bool   `json:"truncated"`
	TimedOut  bool   `json:"timed_out"`
	Error     string `json:"error"`
}

// printCommandResults prints each node's output in gnt-cluster command's
// layout; a node that could not run the command makes it fail.
func printCommandResults(w io.Writer, res any, machineNames, failureOnly bool) error {
	var rs []commandResult
	if err := remarshal(res, &rs); err != nil {
		return err
	}
	failed := 0
	for _, r := range rs {
		if r.Error != "" {
			failed++
			fmt.Fprintln(w, "------------------------------------------------")
			fmt.Fprintf(w, "node: %s\nFailure: %s\n", r.Node, r.Error)
			continue
		}
		if failureOnly && r.ExitCode == 0 {
			continue
		}
		out := r.Output
		if r.Truncated {
			out += "\n[output cut]"
		}
		if r.TimedOut {
			out += "\n[killed at the timeout]"
		}
		fmt.Fprintln(w, "------------------------------------------------")
		if machineNames {
			for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				fmt.Fprintf(w, "%s: %s\n", r.Node, line)
			}
		} else {
			fmt.Fprintf(w, "node: %s\n%s\n", r.Node, out)
		}
		fmt.Fprintf(w, "return code = %d\n", r.ExitCode)
	}
	if failed > 0 {
		return &exitError{code: ExitError}
	}
	return nil
}

func remarshal(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("reading the job result: %w", err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("reading the job result %s: %w", b, err)
	}
	return nil
}

func (a *app) clusterCopyFileCmd() *cobra.Command {
	var o jobOpts
	var sel nodeSelection
	cmd := &cobra.Command{
		Use:   "copyfile [-n NODE]... [-g GROUP] FILE",
		Short: "Copy a file to every node",
		Long: fmt.Sprintf(`Copy FILE, with its permission bits, to the same path on every online node
but the master's, or the nodes -n and -g select (OP_CLUSTER_COPY_FILE). The
node daemons write it, owned by root, not SSH; only root on the master may
ask. The file (at most %d KiB) travels in the job, which forgets it once
the copy has ended.`, opcodes.MaxCopyFileBytes>>10),
		Example: "  corral cluster copyfile /etc/hosts\n  corral cluster copyfile -g rack2 /etc/ntp.conf",
		Args:    exactArgs(1, "the file to copy"),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return paramErr("%v", err)
			}
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() {
				return paramErr("No such filename '%s'", path)
			}
			if fi.Size() > opcodes.MaxCopyFileBytes {
				return paramErr("%s has %d bytes, more than the %d a copy may have", path, fi.Size(), opcodes.MaxCopyFileBytes)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return paramErr("%v", err)
			}
			op := map[string]any{"OP_ID": "OP_CLUSTER_COPY_FILE", "path": path,
				"content": base64.StdEncoding.EncodeToString(data), "mode": int(fi.Mode().Perm())}
			sel.fill(op)
			o.quiet = true
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				var rs []struct{ Node, Error string }
				if err := remarshal(res, &rs); err != nil {
					return err
				}
				failed := false
				for _, r := range rs {
					if r.Error != "" {
						failed = true
						fmt.Fprintf(cmd.ErrOrStderr(), "Copy of file %s to node %s failed: %s\n", path, r.Node, r.Error)
					}
				}
				if failed {
					return &exitError{code: ExitError}
				}
				return nil
			})
		},
	}
	addJobFlags(cmd, &o, false)
	sel.add(cmd)
	return cmd
}

func (a *app) nodePowercycleCmd() *cobra.Command {
	var o jobOpts
	var yes, force bool
	cmd := &cobra.Command{
		Use:   "powercycle NODE",
		Short: "Power cycle a node through its bare-metal machine",
		Long: `Hard power cycle NODE (OP_NODE_POWERCYCLE): a job of the bare-metal conductor
reboots the machine the node's node parameter "machine" names. A node without
one is refused: Corral has no out-of-band control of it. The master's node
needs --force. Asks first, on a terminal, unless --yes-do-it.`,
		Example: "  corral node modify node2 -N machine=rack1-u12\n  corral node powercycle --yes-do-it node2",
		Args:    exactArgs(1, "the node name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				if err := a.confirm(cmd, fmt.Sprintf("Are you sure you want to hard powercycle node %s?", args[0])); err != nil {
					return err
				}
			}
			op := map[string]any{"OP_ID": "OP_NODE_POWERCYCLE", "node_name": args[0], "force": force}
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				_, err := fmt.Fprintln(w, res)
				return err
			})
		},
	}
	addJobFlags(cmd, &o, false)
	cmd.Flags().BoolVar(&yes, "yes-do-it", false, "do not ask for confirmation")
	cmd.Flags().BoolVarP(&force, "force", "f", false, "power cycle the master's node too")
	return cmd
}
