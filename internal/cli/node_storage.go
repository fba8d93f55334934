package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// storageListFields are gnt-node list-storage's default columns.
var storageListFields = []string{"node", "type", "name", "size", "used", "free", "allocatable"}

// userStorageTypes are the storage types gnt-node's --storage-type takes.
var userStorageTypes = []string{"file", "lvm-pv", "lvm-vg", "sharedfile", "gluster"}

func storageField(name string) fieldDef {
	switch name {
	case "node":
		return fieldDef{"Node", kindText}
	case "type":
		return fieldDef{"Type", kindText}
	case "name":
		return fieldDef{"Name", kindText}
	case "size":
		return fieldDef{"Size", kindUnit}
	case "used":
		return fieldDef{"Used", kindUnit}
	case "free":
		return fieldDef{"Free", kindUnit}
	case "allocatable":
		return fieldDef{"Allocatable", kindBool}
	}
	return fieldDef{name, kindGuess}
}

// checkUserStorageType is gnt-node's ConvertStorageType.
func checkUserStorageType(st string) error {
	if !slices.Contains(userStorageTypes, st) {
		return paramErr("Unknown storage type: %s", st)
	}
	return nil
}

// nodeListStorageCmd is gnt-node list-storage: OP_NODE_QUERY_STORAGE.
func (a *app) nodeListStorageCmd() *cobra.Command {
	var o jobOpts
	var lo listOpts
	var storageType string
	cmd := &cobra.Command{
		Use:   "list-storage [NODE...]",
		Short: "List the storage units of nodes",
		Long: `List the storage units of the nodes (all when none is named), as gnt-node
list-storage (OP_NODE_QUERY_STORAGE): for --storage-type file each node's file
storage directory, for sharedfile the cluster's shared_file_storage_dir, with
the size and free space of its file system and the size of the files in it.
Without --storage-type, the type of the first enabled disk template. Fields:
node, type, name, size, used, free, allocatable. Corral's nodes have no LVM, so
lvm-pv and lvm-vg are refused.`,
		Example: "  corral node list-storage\n  corral node list-storage --storage-type file -o node,name,free node2",
		RunE: func(cmd *cobra.Command, args []string) error {
			fields, err := selectFields(lo.output, storageListFields)
			if err != nil {
				return err
			}
			f, err := a.newFormatter(&lo)
			if err != nil {
				return err
			}
			op := map[string]any{"OP_ID": "OP_NODE_QUERY_STORAGE", "nodes": stringsToAny(args), "output_fields": stringsToAny(fields)}
			if storageType != "" {
				if err := checkUserStorageType(storageType); err != nil {
					return err
				}
				op["storage_type"] = storageType
			}
			o.quiet = true
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				list, _ := res.([]any)
				rows := make([][]any, 0, len(list))
				for _, r := range list {
					row, _ := r.([]any)
					rows = append(rows, row)
				}
				return f.writeTable(w, &lo, storageField, fields, rows)
			})
		},
	}
	addJobFlags(cmd, &o, false)
	fl := cmd.Flags()
	fl.StringVarP(&storageType, "storage-type", "t", "", "storage type ("+strings.Join(userStorageTypes, ", ")+")")
	fl.StringVarP(&lo.output, "output", "o", "", fmt.Sprintf("comma-separated fields to show; \"+f1,f2\" appends to the defaults (%s)", strings.Join(storageListFields, ",")))
	fl.BoolVar(&lo.noHeaders, "no-headers", false, "do not print the header line")
	fl.StringVar(&lo.separator, "separator", "", "join the fields with this string instead of aligning them in columns")
	fl.StringVar(&lo.units, "units", "", "units of sizes: h (human: 512M, 1.9G, 2.0T), m (MiB), g (GiB) or t (TiB); default h, or m with --separator")
	return cmd
}

// nodeModifyStorageCmd is gnt-node modify-storage: OP_NODE_MODIFY_STORAGE.
func (a *app) nodeModifyStorageCmd() *cobra.Command {
	var o jobOpts
	var allocatable string
	cmd := &cobra.Command{
		Use:   "modify-storage [--allocatable=yes|no] NODE STORAGE_TYPE NAME",
		Short: "Change a storage unit of a node",
		Long: `Change a storage unit of a node, as gnt-node modify-storage
(OP_NODE_MODIFY_STORAGE). Ganeti changes only the allocatable flag of an LVM
physical volume (lvm-pv); Corral's nodes have no LVM, so the job fails: for
lvm-pv because LVM is not available, for the other types with Ganeti's own
refusal. With no change asked, nothing is submitted.`,
		Example: "  corral node modify-storage --allocatable=no node2 lvm-pv /dev/sdb1",
		Args:    exactArgs(3, "the node name, the storage type and the unit name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkUserStorageType(args[1]); err != nil {
				return err
			}
			changes := map[string]any{}
			switch allocatable {
			case "":
			case "yes":
				changes["allocatable"] = true
			case "no":
				changes["allocatable"] = false
			default:
				return paramErr("--allocatable takes yes or no, not %q", allocatable)
			}
			if len(changes) == 0 {
				// As gnt-node: nothing to do is not an error.
				fmt.Fprintln(cmd.ErrOrStderr(), "No changes to perform, exiting.")
				return nil
			}
			op := map[string]any{"OP_ID": "OP_NODE_MODIFY_STORAGE", "node_name": args[0], "storage_type": args[1],
				"name": args[2], "changes": changes}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	cmd.Flags().StringVar(&allocatable, "allocatable", "", "yes or no: whether new disks may be placed on the unit")
	return cmd
}

// nodeRepairStorageCmd is gnt-node repair-storage: OP_REPAIR_NODE_STORAGE.
func (a *app) nodeRepairStorageCmd() *cobra.Command {
	var ignoreConsistency bool
	cmd := &cobra.Command{
		Use:   "repair-storage [--ignore-consistency] NODE STORAGE_TYPE NAME",
		Short: "Repair a storage unit of a node",
		Long: `Repair a storage unit of a node, as gnt-node repair-storage
(OP_REPAIR_NODE_STORAGE). Ganeti repairs only an LVM volume group (lvm-vg);
Corral's nodes have no LVM, so the job fails: for lvm-vg because LVM is not
available, for the other types with Ganeti's own refusal.`,
		Example: "  corral node repair-storage node2 lvm-vg xenvg",
		Args:    exactArgs(3, "the node name, the storage type and the unit name"),
	}
	cmd.Flags().BoolVar(&ignoreConsistency, "ignore-consistency", false, "go on even when an instance of the node has faulty disks")
	return a.jobCmd(cmd, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		if err := checkUserStorageType(args[1]); err != nil {
			return nil, nil, err
		}
		return map[string]any{"OP_ID": "OP_REPAIR_NODE_STORAGE", "node_name": args[0], "storage_type": args[1],
			"name": args[2], "ignore_consistency": ignoreConsistency}, nil, nil
	})
}
