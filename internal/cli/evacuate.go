package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// Commands that empty a node or a group: each submits one job whose
// result lists one child job per instance (Ganeti's {"jobs": ...}), then
// follows the children to their end, as gnt-node and gnt-group do.

func (a *app) nodeMigrateCmd() *cobra.Command {
	var nonLive bool
	var mode, target, ialloc string
	var noRuntimeChanges, ignoreIPolicy bool
	cmd := a.jobTreeCmd(&cobra.Command{
		Use:   "migrate NODE",
		Short: "Migrate every primary instance off a node",
		Long: `Migrate every primary instance off NODE (OP_NODE_MIGRATE): one job per
instance, to --dst or to the node the allocator (-I, else the cluster's
default, else the built-in one) chooses. Offline and drained nodes are
never targets.`,
		Example: "  corral node migrate node1\n  corral node migrate node1 -I hail\n  corral node migrate node1 --dst node3",
		Args:    exactArgs(1, "the node name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, error) {
		op := map[string]any{"OP_ID": "OP_NODE_MIGRATE", "node_name": args[0]}
		if nonLive && mode != "" {
			return nil, usagef("--non-live and --migration-mode exclude each other")
		}
		if nonLive {
			op["mode"] = "non-live"
		} else if mode != "" {
			op["mode"] = mode
		}
		if target != "" && ialloc != "" {
			return nil, usagef("--dst and --iallocator exclude each other")
		}
		setNonEmpty(op, "target_node", target)
		setNonEmpty(op, "iallocator", ialloc)
		op["allow_runtime_changes"] = !noRuntimeChanges
		op["ignore_ipolicy"] = ignoreIPolicy
		return op, nil
	})
	f := cmd.Flags()
	f.BoolVar(&nonLive, "non-live", false, "migrate non-live (pause, copy, resume)")
	f.StringVar(&mode, "migration-mode", "", "live or non-live (default: the hypervisor's migration_mode)")
	f.StringVarP(&target, "dst", "n", "", "target node for every instance")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the targets (e.g. hail)")
	f.BoolVar(&noRuntimeChanges, "no-runtime-changes", false, "forbid runtime changes (memory ballooning) while migrating")
	f.BoolVar(&ignoreIPolicy, "ignore-ipolicy", false, "ignore instance policy violations on the targets")
	return cmd
}

func (a *app) nodeEvacuateCmd() *cobra.Command {
	var primary, secondary, earlyRelease, ignoreSoft bool
	var remote, ialloc string
	cmd := a.jobTreeCmd(&cobra.Command{
		Use:   "evacuate NODE",
		Short: "Move the instances off a node",
		Long: `Move the instances off NODE (OP_NODE_EVACUATE): one job per instance, to the
nodes the allocator (-I, else the cluster's default, else the built-in one)
chooses in the node's group. Instances whose disks live on the node (the
file template) cannot move and fail the evacuation before anything moves.`,
		Example: "  corral node evacuate node1 --primary-only\n  corral node evacuate node1 -p -I hail",
		Args:    exactArgs(1, "the node name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, error) {
		mode := "all"
		switch {
		case primary && secondary:
			return nil, usagef("--primary-only and --secondary-only exclude each other")
		case primary:
			mode = "primary-only"
		case secondary:
			mode = "secondary-only"
		}
		if remote != "" && ialloc != "" {
			return nil, usagef("--new-secondary and --iallocator exclude each other")
		}
		op := map[string]any{"OP_ID": "OP_NODE_EVACUATE", "node_name": args[0], "mode": mode, "early_release": earlyRelease}
		setNonEmpty(op, "remote_node", remote)
		setNonEmpty(op, "iallocator", ialloc)
		if ignoreSoft {
			op["ignore_soft_errors"] = true
		}
		return op, nil
	})
	f := cmd.Flags()
	f.BoolVarP(&primary, "primary-only", "p", false, "evacuate only the instances whose primary is the node")
	f.BoolVarP(&secondary, "secondary-only", "s", false, "evacuate only the instances whose secondary is the node")
	f.StringVarP(&remote, "new-secondary", "n", "", "new secondary node (secondary-only)")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the targets (e.g. hail)")
	f.BoolVar(&earlyRelease, "early-release", false, "release locks as soon as possible")
	f.BoolVar(&ignoreSoft, "ignore-soft-errors", false, "let the allocator ignore soft restrictions")
	return cmd
}

func (a *app) groupEvacuateCmd() *cobra.Command {
	var to []string
	var ialloc string
	var sequential, forceFailover, earlyRelease bool
	cmd := a.jobTreeCmd(&cobra.Command{
		Use:   "evacuate GROUP",
		Short: "Move every instance of a node group to other groups",
		Long: `Move every instance of GROUP to other node groups (OP_GROUP_EVACUATE): one
job per instance, to the groups given with --to (all others by default),
on the nodes the allocator chooses.`,
		Example: "  corral group evacuate rack1\n  corral group evacuate rack1 --to rack2 -I hail --sequential",
		Args:    exactArgs(1, "the node group name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, error) {
		op := map[string]any{"OP_ID": "OP_GROUP_EVACUATE", "group_name": args[0], "sequential": sequential,
			"force_failover": forceFailover, "early_release": earlyRelease}
		if len(to) > 0 {
			op["target_groups"] = to
		}
		setNonEmpty(op, "iallocator", ialloc)
		return op, nil
	})
	f := cmd.Flags()
	f.StringSliceVar(&to, "to", nil, "target node group (repeat or comma-separate; default: every other group)")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the targets (e.g. hail)")
	f.BoolVar(&sequential, "sequential", false, "run the moves one after the other")
	f.BoolVar(&forceFailover, "force-failover", false, "fail the instances over instead of migrating them")
	f.BoolVar(&earlyRelease, "early-release", false, "release locks as soon as possible")
	return cmd
}

func (a *app) instanceChangeGroupCmd() *cobra.Command {
	var to []string
	var ialloc string
	var earlyRelease bool
	cmd := a.jobTreeCmd(&cobra.Command{
		Use:   "change-group NAME",
		Short: "Move an instance to another node group",
		Long: `Move an instance to a node of another node group (OP_INSTANCE_CHANGE_GROUP):
one job, to the groups given with --to (all others by default), on the node
the allocator (-I, else the cluster's default, else the built-in one)
chooses. A running instance is migrated, a stopped one failed over; an
instance whose disks are on its node (file) cannot change group.`,
		Example: "  corral instance change-group --to rack2 web1\n  corral instance change-group -I hail web1",
		Args:    exactArgs(1, "the instance name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, error) {
		op := map[string]any{"OP_ID": "OP_INSTANCE_CHANGE_GROUP", "instance_name": args[0], "early_release": earlyRelease}
		if len(to) > 0 {
			op["target_groups"] = to
		}
		setNonEmpty(op, "iallocator", ialloc)
		return op, nil
	})
	f := cmd.Flags()
	f.StringSliceVar(&to, "to", nil, "target node group (repeat or comma-separate; default: every other group)")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the target node (e.g. hail)")
	f.BoolVar(&earlyRelease, "early-release", false, "release locks as soon as possible")
	return cmd
}

// nodeFailoverCmd fails over every primary instance of a node, one
// OP_INSTANCE_FAILOVER job each, as gnt-node failover does (no node
// opcode: the jobs are submitted by the client).
func (a *app) nodeFailoverCmd() *cobra.Command {
	var ignoreConsistency bool
	var ialloc string
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "failover NODE",
		Short: "Fail over every primary instance of a node",
		Long: `Fail over every primary instance of NODE: one OP_INSTANCE_FAILOVER job per
instance, to the node the allocator (-I, else the cluster's default, else
the built-in one) chooses. --ignore-consistency goes on when NODE cannot
stop its instances (it is dead).`,
		Example: "  corral node failover node1\n  corral node failover node1 --ignore-consistency -I hail",
		Args:    exactArgs(1, "the node name"),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		return a.env.withClient(ctx, func(c *luxi.Client) error {
			rows, err := queryNodes(ctx, c, args, []string{"name", "pinst_list"})
			if err != nil {
				return err
			}
			var names []string
			if len(rows) == 1 && len(rows[0]) == 2 {
				for _, v := range asList(rows[0][1]) {
					if s, ok := v.(string); ok {
						names = append(names, s)
					}
				}
			}
			sort.Strings(names)
			out := cmd.OutOrStdout()
			if len(names) == 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "No primary instances on node %s, exiting.\n", args[0])
				return nil
			}
			var ids []int64
			for _, n := range names {
				op := map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": n, "ignore_consistency": ignoreConsistency}
				setNonEmpty(op, "iallocator", ialloc)
				if o.priority != "" {
					p, err := parsePriority(o.priority)
					if err != nil {
						return err
					}
					op["priority"] = p
				}
				id, err := c.SubmitJob(ctx, []any{op})
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			if o.submit {
				for _, id := range ids {
					fmt.Fprintf(out, "JobID: %d\n", id)
				}
				return nil
			}
			return a.followChildren(cmd, c, ids, names)
		})
	}
	addJobFlags(cmd, &o, false)
	f := cmd.Flags()
	f.BoolVar(&ignoreConsistency, "ignore-consistency", false, "go on when the node cannot stop its instances")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the targets (e.g. hail)")
	return cmd
}

// jobTreeCmd completes cmd as a command that submits one job and then
// follows the child jobs its result lists.
func (a *app) jobTreeCmd(cmd *cobra.Command, build func(cmd *cobra.Command, args []string) (map[string]any, error)) *cobra.Command {
	var o jobOpts
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		op, err := build(cmd, args)
		if err != nil {
			return err
		}
		var children []int64
		collect := func(w io.Writer, res any) error {
			children, err = childJobIDs(res)
			return err
		}
		if err := a.runJob(cmd, &o, op, collect); err != nil || o.submit || o.dryRun {
			return err
		}
		if len(children) == 0 {
			fmt.Fprintln(cmd.OutOrStdout(), "Nothing to move")
			return nil
		}
		return a.env.withClient(cmd.Context(), func(c *luxi.Client) error {
			return a.followChildren(cmd, c, children, nil)
		})
	}
	addJobFlags(cmd, &o, true)
	return cmd
}

// followChildren follows each job to its end, printing its log, then a
// line per job; any failed job makes the command fail.
func (a *app) followChildren(cmd *cobra.Command, c *luxi.Client, ids []int64, names []string) error {
	out := cmd.OutOrStdout()
	var failed []string
	for i, id := range ids {
		what := fmt.Sprintf("job %d", id)
		if i < len(names) {
			what = fmt.Sprintf("job %d (%s)", id, names[i])
		}
		status, _, err := a.follow(cmd, c, id, false)
		if err != nil {
			if _, interrupted := err.(*interruptedError); interrupted {
				return err
			}
			fmt.Fprintf(out, "%s failed: %v\n", what, err)
			failed = append(failed, fmt.Sprint(id))
			continue
		}
		fmt.Fprintf(out, "%s: %s\n", what, status)
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d jobs failed: %s", len(failed), len(ids), strings.Join(failed, ", "))
	}
	return nil
}

// childJobIDs reads Ganeti's {"jobs": [[true, id] | [false, error], ...]}.
func childJobIDs(res any) ([]int64, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("reading the job result: %w", err)
	}
	var r struct {
		Jobs [][]json.RawMessage `json:"jobs"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("the job result %s is not a list of jobs: %w", b, err)
	}
	var ids []int64
	for _, j := range r.Jobs {
		var ok bool
		var id int64
		if len(j) != 2 || json.Unmarshal(j[0], &ok) != nil {
			return nil, fmt.Errorf("the job result %s is not a list of jobs", b)
		}
		if !ok {
			return nil, fmt.Errorf("a job could not be submitted: %s", j[1])
		}
		if err := json.Unmarshal(j[1], &id); err != nil {
			return nil, fmt.Errorf("the job result %s is not a list of jobs: %w", b, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

func setNonEmpty(op map[string]any, key, v string) {
	if v != "" {
		op[key] = v
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
