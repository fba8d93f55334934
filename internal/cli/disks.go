package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/kvopts"
)

// instanceDiskCmds are gnt-instance's disk commands: activate-disks,
// deactivate-disks and grow-disk.
func (a *app) instanceDiskCmds() []*cobra.Command {
	return []*cobra.Command{a.instanceActivateDisksCmd(), a.instanceDeactivateDisksCmd(), a.instanceGrowDiskCmd()}
}

func (a *app) instanceActivateDisksCmd() *cobra.Command {
	var o jobOpts
	var ignoreSize, wait bool
	cmd := &cobra.Command{
		Use:   "activate-disks NAME",
		Short: "Activate an instance's disks and show where they are",
		Long: `Activate an instance's disks (OP_INSTANCE_ACTIVATE_DISKS): check that each is
present on the primary node and print node:disk/N:path for each, as gnt-instance.
A disk smaller than the configuration says is refused unless --ignore-size.`,
		Example: "  corral instance activate-disks web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_ACTIVATE_DISKS", "instance_name": args[0]}
			if ignoreSize {
				op["ignore_size"] = true
			}
			if wait {
				op["wait_for_sync"] = true
			}
			return a.runJob(cmd, &o, op, printDiskInfo)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.BoolVar(&ignoreSize, "ignore-size", false, "do not check the disks' sizes against the configuration")
	f.BoolVar(&wait, "wait-for-sync", false, "wait for the disks to be in sync")
	return cmd
}

// printDiskInfo prints activate-disks' result, [[node, disk/N, path], …].
func printDiskInfo(w io.Writer, res any) error {
	rows, _ := res.([]any)
	for _, r := range rows {
		l, _ := r.([]any)
		if len(l) != 3 {
			return fmt.Errorf("unexpected disk information %v", r)
		}
		path := l[2]
		if path == nil {
			path = ""
		}
		if _, err := fmt.Fprintf(w, "%v:%v:%v\n", l[0], l[1], path); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) instanceDeactivateDisksCmd() *cobra.Command {
	var o jobOpts
	var force bool
	cmd := &cobra.Command{
		Use:   "deactivate-disks NAME",
		Short: "Deactivate an instance's disks",
		Long: `Deactivate an instance's disks (OP_INSTANCE_DEACTIVATE_DISKS). Refused while
the instance runs unless --force. File disks need no teardown, so for them
this only checks.`,
		Example: "  corral instance deactivate-disks web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_DEACTIVATE_DISKS", "instance_name": args[0]}
			if force {
				op["force"] = true
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "deactivate even while the instance runs")
	return cmd
}

func (a *app) instanceGrowDiskCmd() *cobra.Command {
	var o jobOpts
	var absolute, noWait bool
	cmd := &cobra.Command{
		Use:   "grow-disk NAME DISK AMOUNT",
		Short: "Grow one disk of an instance",
		Long: `Grow disk DISK (its index, from 0) of an instance by AMOUNT, or to AMOUNT
with --absolute (OP_INSTANCE_GROW_DISK). AMOUNT is in MiB unless it has a unit:
m, g or t. Disks never shrink. A running kvm instance with paravirtual disks sees
the new size at once; with other disk types it must be stopped first.`,
		Example: "  corral instance grow-disk web1 0 1G\n  corral instance grow-disk --absolute web1 0 20G",
		Args:    exactArgs(3, "the instance name, the disk index and the amount"),
		RunE: func(cmd *cobra.Command, args []string) error {
			disk, err := strconv.Atoi(args[1])
			if err != nil || disk < 0 {
				return paramErr("invalid disk index %q: expected a number from 0", args[1])
			}
			amount, err := kvopts.ParseUnitMiB(args[2])
			if err != nil {
				return err
			}
			op := map[string]any{"OP_ID": "OP_INSTANCE_GROW_DISK", "instance_name": args[0], "disk": disk, "amount": amount}
			if absolute {
				op["absolute"] = true
			}
			if noWait {
				op["wait_for_sync"] = false
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.BoolVar(&absolute, "absolute", false, "AMOUNT is the new size, not an increment")
	f.BoolVar(&noWait, "no-wait-for-sync", false, "do not wait for the disk to be in sync")
	return cmd
}
