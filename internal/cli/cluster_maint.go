package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// Cluster maintenance commands, after gnt-cluster's: who is master, which
// versions run, and the disk checks and repairs.

func (a *app) clusterMaintCommands() []*cobra.Command {
	return []*cobra.Command{a.clusterGetMasterCmd(), a.clusterVersionCmd("version"), a.clusterVerifyDisksCmd(), a.clusterRepairDiskSizesCmd(),
		a.clusterCommandCmd(), a.clusterCopyFileCmd(), a.clusterRedistConfCmd(),
		a.clusterRenameCmd(), a.clusterActivateMasterIPCmd(), a.clusterDeactivateMasterIPCmd()}
}

// versionHead is `corral version`, the same as `corral cluster version`.
func (a *app) versionHead() *cobra.Command { return a.clusterVersionCmd("version") }

func (a *app) clusterGetMasterCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "getmaster",
		Short:   "Print the name of the master node",
		Long:    `Print the name of the node corrald runs as master on, as the master reports it.`,
		Example: "  corral cluster getmaster",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				info, err := c.QueryClusterInfo(ctx)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), info["master"])
				return err
			})
		},
	}
}

func (a *app) clusterVersionCmd(use string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: "Print the versions the cluster runs",
		Long: `Print the software, protocol, configuration, OS API and export versions the
master runs, one "name: value" per line as gnt-cluster version does.
--version prints the version of this command without asking the master.`,
		Example: "  corral version\n  corral cluster version",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				info, err := c.QueryClusterInfo(ctx)
				if err != nil {
					return err
				}
				out := cmd.OutOrStdout()
				for _, l := range []struct{ label, key string }{
					{"Software version", "software_version"}, {"Internode protocol", "protocol_version"},
					{"Configuration format", "config_version"}, {"OS api version", "os_api_version"},
					{"Export interface", "export_version"}, {"VCS version", "vcs_version"},
				} {
					if _, err := fmt.Fprintf(out, "%s: %s\n", l.label, formatVersion(info[l.key])); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// formatVersion prints a version as Ganeti's Python does: whole numbers
// without a fraction, lists in brackets.
func formatVersion(v any) string {
	switch x := v.(type) {
	case float64:
		return formatNumber(x)
	case []any:
		s := "["
		for i, e := range x {
			if i > 0 {
				s += ", "
			}
			s += formatVersion(e)
		}
		return s + "]"
	case nil:
		return "None"
	}
	return fmt.Sprint(v)
}

func (a *app) clusterVerifyDisksCmd() *cobra.Command {
	var o jobOpts
	var group string
	cmd := &cobra.Command{
		Use:   "verify-disks",
		Short: "Check that every instance's disks are on their nodes",
		Long: `Check the disks of every instance (OP_CLUSTER_VERIFY_DISKS): one job per node
group (or only --node-group's) lists the disks on the group's nodes and
reports those missing or shorter than the configuration records. The exit
status is 1 when a node could not be asked or a disk is missing or short;
'corral cluster repair-disk-sizes' records the sizes the disks really have.`,
		Example: "  corral cluster verify-disks\n  corral cluster verify-disks --node-group rack2",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			op := map[string]any{"OP_ID": "OP_CLUSTER_VERIFY_DISKS"}
			setNonEmpty(op, "group_name", group)
			var children []int64
			collect := func(w io.Writer, res any) (err error) {
				children, err = childJobIDs(res)
				return err
			}
			o.quiet = true
			if err := a.runJob(cmd, &o, op, collect); err != nil || o.submit || o.dryRun {
				return err
			}
			return a.env.withClient(cmd.Context(), func(c *luxi.Client) error {
				return a.printDiskVerification(cmd, c, children)
			})
		},
	}
	addJobFlags(cmd, &o, false)
	cmd.Flags().StringVar(&group, "node-group", "", "check only this node group")
	return cmd
}

// groupDiskReport is OP_GROUP_VERIFY_DISKS's result: errors per node,
// instances needing activation, and missing disks per instance.
type groupDiskReport struct {
	NodeErrors map[string]string
	Activate   []string
	Missing    map[string][][]string
}

func (r *groupDiskReport) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 3 {
		return fmt.Errorf("the disk verification result %s is not [node errors, instances, missing disks]", b)
	}
	for i, dst := range []any{&r.NodeErrors, &r.Activate, &r.Missing} {
		if err := json.Unmarshal(raw[i], dst); err != nil {
			return fmt.Errorf("reading the disk verification result %s: %w", b, err)
		}
	}
	return nil
}

// printDiskVerification follows each group's job and prints what it found
// in gnt-cluster verify-disks's words.
func (a *app) printDiskVerification(cmd *cobra.Command, c *luxi.Client, ids []int64) error {
	out := cmd.OutOrStdout()
	bad := false
	for _, id := range ids {
		_, res, err := a.follow(cmd, c, id, true)
		if err != nil {
			fmt.Fprintf(out, "Job failed: %v\n", err)
			bad = true
			continue
		}
		var r groupDiskReport
		b, err := json.Marshal(res)
		if err == nil {
			var rs []groupDiskReport
			err = json.Unmarshal(b, &rs)
			if err == nil && len(rs) == 1 {
				r = rs[0]
			} else if err == nil {
				err = fmt.Errorf("job %d has %d results, expected one", id, len(rs))
			}
		}
		if err != nil {
			return err
		}
		bad = printGroupDisks(out, r) || bad
	}
	if bad {
		return &exitError{code: ExitError}
	}
	return nil
}

// printGroupDisks prints one group's report; true when it found a problem.
func printGroupDisks(out io.Writer, r groupDiskReport) bool {
	bad := false
	for _, node := range sortedKeys(r.NodeErrors) {
		fmt.Fprintf(out, "Error gathering data on node %s: %s\n", node, r.NodeErrors[node])
		fmt.Fprintln(out, "You need to fix these nodes first before fixing instances")
		bad = true
	}
	for _, inst := range r.Activate {
		fmt.Fprintf(out, "Instance %s needs its disks activated: corral instance activate-disks %s\n", inst, inst)
	}
	if len(r.Missing) == 0 {
		if len(r.Activate) == 0 {
			fmt.Fprintln(out, "No disks need to be activated.")
		}
		return bad
	}
	for _, inst := range sortedKeys(r.Missing) {
		fmt.Fprintf(out, "Instance %s has missing or short disks:\n", inst)
		for _, nd := range r.Missing[inst] {
			if len(nd) == 2 {
				fmt.Fprintf(out, "\t%s %s\n", nd[0], nd[1])
			}
		}
	}
	fmt.Fprintln(out, "You need to replace or recreate disks for all the above instances, or record their sizes with 'corral cluster repair-disk-sizes'.")
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (a *app) clusterRepairDiskSizesCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "repair-disk-sizes [INSTANCE...]",
		Short: "Record the sizes the disks really have",
		Long: `Ask each instance's primary node for the sizes of its disks and record in the
configuration those that differ (OP_CLUSTER_REPAIR_DISK_SIZES); without
names, every instance. The job log lists each correction.`,
		Example: "  corral cluster repair-disk-sizes\n  corral cluster repair-disk-sizes web1 web2",
		RunE: func(cmd *cobra.Command, args []string) error {
			names := []any{}
			for _, n := range args {
				names = append(names, n)
			}
			op := map[string]any{"OP_ID": "OP_CLUSTER_REPAIR_DISK_SIZES", "instances": names}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, false)
	return cmd
}

func (a *app) clusterRedistConfCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "redist-conf",
		Short: "Write again what the nodes keep from the configuration",
		Long: `Write again every node's SSH key files and, in Ganeti drop-in mode, the
ssconf files, each checked on disk (OP_CLUSTER_REDIST_CONF): for files that
were damaged or removed. The configuration itself lives in the store.`,
		Example: "  corral cluster redist-conf",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runJob(cmd, &o, map[string]any{"OP_ID": "OP_CLUSTER_REDIST_CONF"}, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	return cmd
}

func (a *app) clusterRenameCmd() *cobra.Command {
	var o jobOpts
	var force bool
	cmd := &cobra.Command{
		Use:   "rename NEW_NAME",
		Short: "Rename the cluster",
		Long: `Give the cluster a new name (OP_CLUSTER_RENAME). Without -f it asks first, on a
terminal. The certificates keep the name they were issued with: renew RAPI's
(renew-crypto --new-rapi-certificate) if its clients check the new name.`,
		Example: "  corral cluster rename -f prod.example.com",
		Args:    exactArgs(1, "the new name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			var old string
			if err := a.env.withClient(ctx, func(c *luxi.Client) error {
				info, err := c.QueryClusterInfo(ctx)
				old = fmt.Sprint(info["name"])
				return err
			}); err != nil {
				return err
			}
			if !force {
				if err := a.confirm(cmd, fmt.Sprintf("This will rename the cluster from '%s' to '%s'.", old, args[0])); err != nil {
					return err
				}
			}
			op := map[string]any{"OP_ID": "OP_CLUSTER_RENAME", "name": args[0]}
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				_, err := fmt.Fprintf(w, "Cluster renamed from '%s' to '%s'\n", old, res)
				return err
			})
		},
	}
	addJobFlags(cmd, &o, false)
	cmd.Flags().BoolVarP(&force, "force", "f", false, "do not ask for confirmation")
	return cmd
}
