package cli

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// defaultGroupFields are gnt-group list's columns.
func defaultGroupFields() []string {
	return []string{"name", "node_cnt", "pinst_cnt", "alloc_policy", "ndparams"}
}

func groupField(name string) fieldDef {
	switch name {
	case "name":
		return fieldDef{"Group", kindText}
	case "uuid":
		return fieldDef{"UUID", kindText}
	case "alloc_policy":
		return fieldDef{"AllocPolicy", kindText}
	case "node_cnt":
		return fieldDef{"Nodes", kindNumber}
	case "node_list":
		return fieldDef{"NodeList", kindOther}
	case "pinst_cnt":
		return fieldDef{"Instances", kindNumber}
	case "ndparams":
		return fieldDef{"NDParams", kindOther}
	case "custom_ndparams":
		return fieldDef{"CustomNDParams", kindOther}
	case "diskparams":
		return fieldDef{"DiskParameters", kindOther}
	case "custom_diskparams":
		return fieldDef{"CustomDiskParameters", kindOther}
	case "ipolicy":
		return fieldDef{"InstancePolicy", kindOther}
	case "custom_ipolicy":
		return fieldDef{"CustomInstancePolicy", kindOther}
	}
	return commonField(name)
}

// groupInfoFields are what `group info` shows, with their labels.
func groupInfoFields() []infoField {
	return []infoField{
		{"uuid", "UUID"},
		{"alloc_policy", "allocation policy"},
		{"node_cnt", "number of nodes"},
		{"node_list", "nodes"},
		{"pinst_cnt", "number of instances"},
		{"ndparams", "node parameters"},
		{"diskparams", "disk parameters"},
		{"ipolicy", "instance policy"},
		{"hv_state", "hypervisor state"},
		{"disk_state", "disk state"},
		{"tags", "tags"},
		{"ctime", "created"},
		{"mtime", "modified"},
		{"serial_no", "serial number"},
	}
}

func groupHead() *cobra.Command {
	return newGroup("group", "Manage node groups",
		"  corral group list\n  corral group add rack2 --alloc-policy last_resort\n  corral group assign-nodes rack2 node3")
}

func (a *app) addGroupCommands(c *cobra.Command) {
	c.AddCommand(a.groupListCmd(), a.groupInfoCmd(), a.groupAddCmd(), a.groupRemoveCmd(), a.groupModifyCmd(),
		a.groupRenameCmd(), a.groupAssignNodesCmd(), a.groupEvacuateCmd())
	c.AddCommand(tagCommands(a, "nodegroup")...)
	c.AddCommand(a.listFieldsCmd("group", "group", "node groups"))
}

func queryGroups(ctx context.Context, c *luxi.Client, names, fields []string) ([][]any, error) {
	return c.QueryGroups(ctx, names, fields, false)
}

func (a *app) groupListCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use:     "list [NAME...]",
		Aliases: []string{"ls"},
		Short:   "List node groups",
		Long: `List node groups (all, or the ones named) in a table.

Fields: name, uuid, alloc_policy, node_cnt, node_list, pinst_cnt, ndparams,
custom_ndparams, diskparams, custom_diskparams, ipolicy, custom_ipolicy, tags,
ctime, mtime, serial_no.`,
		Example: "  corral group list\n  corral group list -o name,node_list --no-headers\n  corral group list -o +uuid --separator :",
		RunE:    a.listRun(&o, defaultGroupFields(), groupField, o.filteredRows("group", queryGroups)),
	}
	addListFlags(cmd, &o, defaultGroupFields(), false)
	return cmd
}

func (a *app) groupInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info [NAME...]",
		Short:   "Show everything about node groups",
		Long:    "Show every field of the named node groups (all groups without names), one per line.",
		Example: "  corral group info default",
		RunE:    a.infoRun("Node group", groupInfoFields(), groupField, queryGroups),
	}
}

// groupParamFlags are the parameter flags add and modify share, as
// gnt-group's.
type groupParamFlags struct {
	allocPolicy   string
	ndparams      string
	diskparams    []string
	vcpuRatio     string
	spindleRatio  string
	diskTemplates string
	hvState       []string
	diskState     []string
}

func (g *groupParamFlags) add(cmd *cobra.Command, allowReset bool) {
	f := cmd.Flags()
	f.StringVar(&g.allocPolicy, "alloc-policy", "", "allocation policy: preferred, last_resort or unallocable")
	reset := ""
	if allowReset {
		reset = "; -key resets a parameter to the cluster default"
	}
	f.StringVarP(&g.ndparams, "node-parameters", "N", "", "node parameters, key=val,... (e.g. ssh_port=2222,spindle_count=2)"+reset)
	f.StringArrayVarP(&g.diskparams, "disk-parameters", "D", nil, "disk parameters of a template, template:key=val,... (repeatable)"+reset)
	f.StringVar(&g.vcpuRatio, "ipolicy-vcpu-ratio", "", "instance policy: maximum ratio of virtual to physical CPUs")
	f.StringVar(&g.spindleRatio, "ipolicy-spindle-ratio", "", "instance policy: maximum instances per physical spindle")
	f.StringVar(&g.diskTemplates, "ipolicy-disk-templates", "", "instance policy: allowed disk templates, a,b,...")
	addStateFlags(cmd, &g.hvState, &g.diskState)
}

// fill adds the given parameters to op; it reports whether any was given.
func (g *groupParamFlags) fill(cmd *cobra.Command, op map[string]any, allowReset bool) (bool, error) {
	fl := cmd.Flags()
	given := false
	if fl.Changed("alloc-policy") {
		op["alloc_policy"] = g.allocPolicy
		given = true
	}
	if fl.Changed("node-parameters") {
		nd, err := parseParams("-N", g.ndparams, allowReset)
		if err != nil {
			return false, err
		}
		op["ndparams"] = nd
		given = true
	}
	if len(g.diskparams) > 0 {
		dp, err := parseGroups("-D", g.diskparams, allowReset)
		if err != nil {
			return false, err
		}
		op["diskparams"] = dp
		given = true
	}
	st, err := stateParams(g.hvState, g.diskState, allowReset)
	if err != nil {
		return false, err
	}
	for k, v := range st {
		op[k], given = v, true
	}
	ipol := map[string]any{}
	for _, r := range []struct{ flag, key, val string }{
		{"ipolicy-vcpu-ratio", "vcpu-ratio", g.vcpuRatio},
		{"ipolicy-spindle-ratio", "spindle-ratio", g.spindleRatio},
	} {
		if !fl.Changed(r.flag) {
			continue
		}
		v, err := strconv.ParseFloat(r.val, 64)
		if err != nil || v <= 0 {
			return false, paramErr("--%s: expected a positive number, got %q", r.flag, r.val)
		}
		ipol[r.key] = v
	}
	if fl.Changed("ipolicy-disk-templates") {
		l, err := parseNameList("--ipolicy-disk-templates", g.diskTemplates)
		if err != nil {
			return false, err
		}
		ipol["disk-templates"] = l
	}
	if len(ipol) > 0 {
		op["ipolicy"] = ipol
		given = true
	}
	return given, nil
}

func (a *app) groupAddCmd() *cobra.Command {
	var pf groupParamFlags
	cmd := a.jobCmd(&cobra.Command{
		Use:   "add NAME",
		Short: "Add a node group",
		Long: `Add an empty node group (OP_GROUP_ADD). Move nodes into it with
"corral group assign-nodes", or add new nodes to it with "corral node add -g".`,
		Example: "  corral group add rack2\n  corral group add rack3 --alloc-policy last_resort -N ssh_port=2222",
		Args:    exactArgs(1, "the group name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		op := map[string]any{"OP_ID": "OP_GROUP_ADD", "group_name": args[0]}
		if _, err := pf.fill(cmd, op, false); err != nil {
			return nil, nil, err
		}
		return op, nil, nil
	})
	pf.add(cmd, false)
	return cmd
}

func (a *app) groupRemoveCmd() *cobra.Command {
	return a.jobCmd(&cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove an empty node group",
		Long:    "Remove a node group (OP_GROUP_REMOVE). It must hold no nodes, and it cannot be the last group.",
		Example: "  corral group remove rack2",
		Args:    exactArgs(1, "the group name"),
	}, fixedJob(func(args []string) map[string]any {
		return map[string]any{"OP_ID": "OP_GROUP_REMOVE", "group_name": args[0]}
	}))
}

func (a *app) groupModifyCmd() *cobra.Command {
	var pf groupParamFlags
	cmd := a.jobCmd(&cobra.Command{
		Use:   "modify NAME",
		Short: "Change a node group's parameters",
		Long: `Change a node group's parameters (OP_GROUP_SET_PARAMS) and print what
changed, as " - param -> value" lines. Node and disk parameters are merged
into the group's own: "-key" removes one, so the cluster default applies.`,
		Example: "  corral group modify rack2 --alloc-policy unallocable\n  corral group modify rack2 -N ssh_port=22,-spindle_count",
		Args:    exactArgs(1, "the group name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		op := map[string]any{"OP_ID": "OP_GROUP_SET_PARAMS", "group_name": args[0]}
		given, err := pf.fill(cmd, op, true)
		if err != nil {
			return nil, nil, err
		}
		if !given {
			return nil, nil, usagef("give at least one parameter to change")
		}
		return op, changesPrinter("node group", args[0]), nil
	})
	pf.add(cmd, true)
	return cmd
}

func (a *app) groupRenameCmd() *cobra.Command {
	return a.jobCmd(&cobra.Command{
		Use:     "rename NAME NEW_NAME",
		Short:   "Rename a node group",
		Long:    "Rename a node group (OP_GROUP_RENAME). Its nodes stay in it.",
		Example: "  corral group rename rack2 rack-b",
		Args:    exactArgs(2, "the group name and the new name"),
	}, fixedJob(func(args []string) map[string]any {
		return map[string]any{"OP_ID": "OP_GROUP_RENAME", "group_name": args[0], "new_name": args[1]}
	}))
}

func (a *app) groupAssignNodesCmd() *cobra.Command {
	var force bool
	cmd := a.jobCmd(&cobra.Command{
		Use:   "assign-nodes GROUP NODE...",
		Short: "Move nodes into a node group",
		Long: `Move nodes into a node group (OP_GROUP_ASSIGN_NODES). A move that would
leave an instance with its nodes in different groups needs --force.`,
		Example: "  corral group assign-nodes rack2 node3 node4",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("expected the group name and at least one node name, got %d argument(s)", len(args))
			}
			return nil
		},
	}, func(_ *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		nodes := make([]any, 0, len(args)-1)
		for _, n := range args[1:] {
			nodes = append(nodes, n)
		}
		op := map[string]any{"OP_ID": "OP_GROUP_ASSIGN_NODES", "group_name": args[0], "nodes": nodes}
		if force {
			op["force"] = true
		}
		return op, nil, nil
	})
	cmd.Flags().BoolVar(&force, "force", false, "move the nodes even if instances get split between groups")
	return cmd
}
