package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/kvopts"
)

// instanceDiskCmds are gnt-instance's disk commands: activate-disks,
// deactivate-disks, grow-disk and recreate-disks.
func (a *app) instanceDiskCmds() []*cobra.Command {
	return []*cobra.Command{a.instanceActivateDisksCmd(), a.instanceDeactivateDisksCmd(), a.instanceGrowDiskCmd(), a.instanceRecreateDisksCmd()}
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

func (a *app) instanceRecreateDisksCmd() *cobra.Command {
	var o jobOpts
	var disks []string
	var nodes, ialloc string
	cmd := &cobra.Command{
		Use:   "recreate-disks NAME",
		Short: "Make an instance's disks again, empty",
		Long: `Remove and make again, empty, the disks of a stopped instance
(OP_INSTANCE_RECREATE_DISKS): every disk, or those given with --disk N, each
with its recorded size and mode unless --disk N:size=SIZE,mode=rw|ro changes
them (SIZE in MiB unless it has a unit: m, g or t). With -n NODE or -I
ALLOCATOR the disks are made on a new primary node; every disk must then be
recreated, and a file instance's old disks stay on its old node. The old
contents are lost.`,
		Example: "  corral instance recreate-disks web1\n  corral instance recreate-disks --disk 0:size=20G web1\n  corral instance recreate-disks -n node2 web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_RECREATE_DISKS", "instance_name": args[0]}
			if len(disks) > 0 {
				l, err := parseRecreateDisks(disks)
				if err != nil {
					return err
				}
				op["disks"] = l
			}
			if nodes != "" && ialloc != "" {
				return paramErr("give either -n (--node) or -I (--iallocator), not both")
			}
			if nodes != "" {
				l, err := kvopts.SplitList(strings.ReplaceAll(nodes, ":", ","))
				if err != nil {
					return err
				}
				op["nodes"] = l
			}
			if ialloc != "" {
				op["iallocator"] = ialloc
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringArrayVar(&disks, "disk", nil, "a disk to recreate: N[:size=SIZE][,mode=rw|ro] (repeatable; every disk when absent)")
	f.StringVarP(&nodes, "node", "n", "", "new primary node")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the new primary node")
	return cmd
}

// parseRecreateDisks turns --disk N[:size=SIZE,mode=M] options into
// Ganeti's [[N, {size, mode}], ...].
func parseRecreateDisks(opts []string) ([]any, error) {
	var out []any
	for _, s := range opts {
		ident, kv, err := kvopts.ParseIdentKV(s)
		if err != nil {
			return nil, err
		}
		idx, err := strconv.Atoi(ident)
		if err != nil || idx < 0 {
			return nil, paramErr("invalid disk index %q: expected a number from 0", ident)
		}
		params := map[string]any{}
		for k, v := range kv {
			switch k {
			case "size":
				size, err := kvopts.ParseUnitMiB(v)
				if err != nil {
					return nil, err
				}
				params["size"] = size
			case "mode":
				params["mode"] = v
			default:
				return nil, paramErr("disk %d: unknown parameter %q (size, mode)", idx, k)
			}
		}
		out = append(out, []any{idx, params})
	}
	return out, nil
}
