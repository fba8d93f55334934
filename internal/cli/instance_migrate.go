package cli

import (
	"github.com/spf13/cobra"
)

// migrate and failover: the moves of an instance between nodes with shared
// disks, with gnt-instance's flags.

func (a *app) instanceMigrateCmd() *cobra.Command {
	var o jobOpts
	var target, iallocator, mode string
	var cleanup, nonLive, allowFailover, noRuntimeChanges, ignoreIPolicy, ignoreHVVersions, force bool
	cmd := &cobra.Command{
		Use:   "migrate NAME",
		Short: "Move a running instance to another node without stopping it",
		Long: `Migrate an instance live (OP_INSTANCE_MIGRATE): qemu copies its memory to a
qemu waiting on the target node, over TLS with certificates from the cluster
CA, and the guest pauses only for the final copy (the job log gives the
measured downtime). The instance's disks must be reachable from both nodes
(sharedfile, diskless). Without --target-node the built-in allocator picks a
node of the instance's group. --cleanup finds where the instance really runs
after a migration was interrupted and fixes the configuration.`,
		Example: "  corral instance migrate web1\n  corral instance migrate -n node2 web1\n  corral instance migrate --cleanup web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if nonLive && mode != "" {
				return paramErr("--non-live and --migration-mode exclude each other")
			}
			if nonLive {
				mode = "non-live"
			}
			switch mode {
			case "", "live", "non-live":
			default:
				return paramErr("invalid --migration-mode %q (live or non-live)", mode)
			}
			if target != "" && iallocator != "" {
				return paramErr("--target-node and --iallocator exclude each other")
			}
			op := map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": args[0], "cleanup": cleanup,
				"allow_failover": allowFailover, "allow_runtime_changes": !noRuntimeChanges, "ignore_ipolicy": ignoreIPolicy,
				"ignore_hvversions": ignoreHVVersions}
			setIfNotEmpty(op, "mode", mode)
			setIfNotEmpty(op, "target_node", target)
			setIfNotEmpty(op, "iallocator", iallocator)
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&target, "target-node", "n", "", "node to migrate to (default: the allocator's choice)")
	f.StringVarP(&iallocator, "iallocator", "I", "", "allocator choosing the target node")
	f.StringVar(&mode, "migration-mode", "", "live or non-live (default: the hypervisor's migration_mode)")
	f.BoolVar(&nonLive, "non-live", false, "pause the guest while its memory is copied")
	f.BoolVar(&cleanup, "cleanup", false, "find where the instance runs after an interrupted migration and fix the configuration")
	f.BoolVar(&allowFailover, "allow-failover", false, "fail a stopped instance over instead of refusing")
	f.BoolVar(&noRuntimeChanges, "no-runtime-changes", false, "accepted for gnt-instance compatibility")
	f.BoolVar(&ignoreIPolicy, "ignore-ipolicy", false, "ignore the instance policy of the target's group")
	f.BoolVar(&ignoreHVVersions, "ignore-hvversions", false, "accepted for gnt-instance compatibility")
	f.BoolVarP(&force, "force", "f", false, "do not ask for confirmation (accepted: nothing is asked)")
	return cmd
}

func (a *app) instanceFailoverCmd() *cobra.Command {
	var o jobOpts
	var target, iallocator string
	var ignoreConsistency, ignoreIPolicy, cleanup, force bool
	var timeout int
	cmd := &cobra.Command{
		Use:   "failover NAME",
		Short: "Stop an instance on its node and start it on another",
		Long: `Fail an instance over (OP_INSTANCE_FAILOVER): it is shut down on its node,
recorded on the target node and started there if it was running. When its
node is dead, --ignore-consistency goes on although the shutdown failed
(an offline node is passed over anyway). The instance's disks must be
reachable from both nodes (sharedfile, diskless).`,
		Example: "  corral instance failover web1\n  corral instance failover --ignore-consistency -n node3 web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if target != "" && iallocator != "" {
				return paramErr("--target-node and --iallocator exclude each other")
			}
			op := map[string]any{"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": args[0], "ignore_consistency": ignoreConsistency,
				"ignore_ipolicy": ignoreIPolicy, "shutdown_timeout": timeout, "cleanup": cleanup}
			setIfNotEmpty(op, "target_node", target)
			setIfNotEmpty(op, "iallocator", iallocator)
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&target, "target-node", "n", "", "node to fail over to (default: the allocator's choice)")
	f.StringVarP(&iallocator, "iallocator", "I", "", "allocator choosing the target node")
	f.BoolVar(&ignoreConsistency, "ignore-consistency", false, "go on when the instance cannot be shut down on its (dead) node")
	f.BoolVar(&ignoreIPolicy, "ignore-ipolicy", false, "ignore the instance policy of the target's group")
	f.BoolVar(&cleanup, "cleanup", false, "refused: use migrate --cleanup")
	f.IntVar(&timeout, "shutdown-timeout", 120, "seconds to wait for a clean shutdown")
	f.BoolVarP(&force, "force", "f", false, "do not ask for confirmation (accepted: nothing is asked)")
	return cmd
}

func setIfNotEmpty(op map[string]any, key, v string) {
	if v != "" {
		op[key] = v
	}
}
