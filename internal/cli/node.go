package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/seconds"
)

// defaultNodeFields are gnt-node list's columns.
func defaultNodeFields() []string {
	return []string{"name", "dtotal", "dfree", "mtotal", "mnode", "mfree", "pinst_cnt", "sinst_cnt"}
}

// nodeInfoFields are what `node info` shows, with their labels.
func nodeInfoFields() []infoField {
	return []infoField{
		{"uuid", "UUID"},
		{"pip", "primary ip"},
		{"sip", "secondary ip"},
		{"group", "node group"},
		{"role", "role"},
		{"master_candidate", "master candidate"},
		{"master_capable", "master capable"},
		{"vm_capable", "vm capable"},
		{"offline", "offline"},
		{"drained", "drained"},
		{"mtotal", "total memory"},
		{"mnode", "memory used by the node"},
		{"mfree", "free memory"},
		{"dtotal", "total disk"},
		{"dfree", "free disk"},
		{"ctotal", "CPUs"},
		{"pinst_list", "primary instances"},
		{"sinst_list", "secondary instances"},
		{"ndparams", "node parameters"},
		{"hv_state", "hypervisor state"},
		{"disk_state", "disk state"},
		{"tags", "tags"},
		{"ctime", "created"},
		{"mtime", "modified"},
		{"serial_no", "serial number"},
		{"status", ""}, // printed as a block, only when set
	}
}

func nodeHead() *cobra.Command {
	return newGroup("node", "Manage the cluster's nodes",
		"  corral node list\n  corral node join-token node2\n  corral node add node2 --ip 192.0.2.12")
}

func (a *app) addNodeCommands(c *cobra.Command) {
	c.AddCommand(a.nodeListCmd(), a.nodeInfoCmd(), a.nodeAddCmd(), a.nodeRemoveCmd(), a.nodeModifyCmd(), a.nodeJoinTokenCmd())
	c.AddCommand(a.nodePowercycleCmd(), a.nodePowerCmd(), a.nodeHealthCmd())
	c.AddCommand(a.nodeMigrateCmd(), a.nodeEvacuateCmd(), a.nodeFailoverCmd())
	c.AddCommand(a.nodeListStorageCmd(), a.nodeModifyStorageCmd(), a.nodeRepairStorageCmd())
	c.AddCommand(tagCommands(a, "node")...)
	c.AddCommand(a.listFieldsCmd("node", "node", "nodes"))
}

func queryNodes(ctx context.Context, c *luxi.Client, names, fields []string) ([][]any, error) {
	return c.QueryNodes(ctx, names, fields, false)
}

func (a *app) nodeListCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use:     "list [NAME...]",
		Aliases: []string{"ls"},
		Short:   "List nodes",
		Long: `List nodes (all, or the ones named) in a table. Sizes are in human units
unless --units says otherwise; a value the master could not get (for example
from an offline node) shows as "-".

Fields: name, uuid, pip, sip, role, group, group.uuid, master, master_candidate,
master_capable, vm_capable, offline, drained, mtotal, mnode, mfree, dtotal,
dfree, ctotal, pinst_cnt, pinst_list, sinst_cnt, sinst_list, ndparams, tags,
ctime, mtime, serial_no.`,
		Example: "  corral node list\n  corral node list -o name,pip,role --no-headers\n  corral node list -o +pip --separator :",
		RunE:    a.listRun(&o, defaultNodeFields(), nodeField, o.filteredRows("node", queryNodes)),
	}
	addListFlags(cmd, &o, defaultNodeFields(), true)
	return cmd
}

func (a *app) nodeInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info [NAME...]",
		Short:   "Show everything about nodes",
		Long:    "Show every field of the named nodes (all nodes without names), one per line.",
		Example: "  corral node info node1",
		RunE:    a.infoRun("Node name", nodeInfoFields(), nodeField, queryNodes),
	}
}

// yesNoFlag is a flag that takes yes or no and, when given, sets a boolean
// opcode parameter.
type yesNoFlag struct{ flag, param, usage, val string }

// yesNoFlags are the yes/no flags of one command. The methods share the
// backing array, so add and fill see the same values.
type yesNoFlags []yesNoFlag

func (fs yesNoFlags) add(cmd *cobra.Command) {
	for i := range fs {
		cmd.Flags().StringVar(&fs[i].val, fs[i].flag, "", fs[i].usage)
	}
}

// fill sets op's parameters of the flags given; it reports whether any was.
func (fs yesNoFlags) fill(cmd *cobra.Command, op map[string]any) (bool, error) {
	given := false
	for _, f := range fs {
		if !cmd.Flags().Changed(f.flag) {
			continue
		}
		b, err := parseYesNo(f.flag, f.val)
		if err != nil {
			return false, err
		}
		op[f.param] = b
		given = true
	}
	return given, nil
}

func (a *app) nodeAddCmd() *cobra.Command {
	var ip, sip, group string
	var readd bool
	yn := yesNoFlags{
		{flag: "master-capable", param: "master_capable", usage: "yes|no: whether the node may become a master candidate"},
		{flag: "vm-capable", param: "vm_capable", usage: "yes|no: whether the node may run instances"},
	}
	cmd := a.jobCmd(&cobra.Command{
		Use:   "add NAME",
		Short: "Add a node that has joined with a token",
		Long: `Add a node to the cluster (OP_NODE_ADD). The node must first have joined with
a token from "corral node join-token", which gave it its certificate.`,
		Example: "  corral node add node2 --ip 192.0.2.12\n  corral node add node3 --ip 192.0.2.13 --vm-capable no",
		Args:    exactArgs(1, "the node name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		op := map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": args[0]}
		fl := cmd.Flags()
		if fl.Changed("ip") {
			op["primary_ip"] = ip
		}
		if fl.Changed("secondary-ip") {
			op["secondary_ip"] = sip
		}
		if fl.Changed("group") {
			op["group"] = group
		}
		if readd {
			op["readd"] = true
		}
		if _, err := yn.fill(cmd, op); err != nil {
			return nil, nil, err
		}
		return op, nil, nil
	})
	f := cmd.Flags()
	f.StringVar(&ip, "ip", "", "the node's primary IP address")
	f.StringVar(&sip, "secondary-ip", "", "the node's secondary (replication) IP address")
	f.StringVarP(&group, "group", "g", "", "node group to put the node in (default: the default group)")
	f.BoolVar(&readd, "readd", false, "bring back a node that is in the configuration (offline, or reinstalled and joined again with 'join-token --readd')")
	yn.add(cmd)
	return cmd
}

func (a *app) nodeRemoveCmd() *cobra.Command {
	return a.jobCmd(&cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a node from the cluster",
		Long:    "Remove a node from the cluster (OP_NODE_REMOVE). It must hold no instances.",
		Example: "  corral node remove node3",
		Args:    exactArgs(1, "the node name"),
	}, fixedJob(func(args []string) map[string]any {
		return map[string]any{"OP_ID": "OP_NODE_REMOVE", "node_name": args[0]}
	}))
}

func (a *app) nodeModifyCmd() *cobra.Command {
	var force, autoPromote bool
	var ndparams, sip string
	var hvState, diskState []string
	yn := yesNoFlags{
		{flag: "master-candidate", param: "master_candidate", usage: "yes|no: make the node a master candidate, or demote it"},
		{flag: "offline", param: "offline", usage: "yes|no: mark the node offline (unreachable, ignored) or back online"},
		{flag: "drained", param: "drained", usage: "yes|no: drain the node (no new instances) or undrain it"},
		{flag: "master-capable", param: "master_capable", usage: "yes|no: whether the node may become a master candidate"},
		{flag: "vm-capable", param: "vm_capable", usage: "yes|no: whether the node may run instances"},
	}
	cmd := a.jobCmd(&cobra.Command{
		Use:   "modify NAME",
		Short: "Change a node's flags and parameters",
		Long: `Change a node's flags, node parameters (-N) or secondary IP (-s)
(OP_NODE_SET_PARAMS) and print what changed, as " - param -> value" lines.`,
		Example: "  corral node modify node2 --drained yes\n  corral node modify node2 --offline no --master-candidate yes\n  corral node modify node2 -N ssh_port=2222",
		Args:    exactArgs(1, "the node name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		op := map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": args[0]}
		given, err := yn.fill(cmd, op)
		if err != nil {
			return nil, nil, err
		}
		fl := cmd.Flags()
		if fl.Changed("node-parameters") {
			nd, err := parseParams("-N", ndparams, true)
			if err != nil {
				return nil, nil, err
			}
			op["ndparams"] = nd
			given = true
		}
		if fl.Changed("secondary-ip") {
			op["secondary_ip"] = sip
			given = true
		}
		st, err := stateParams(hvState, diskState, true)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range st {
			op[k], given = v, true
		}
		if !given {
			return nil, nil, usagef("give at least one flag to change")
		}
		if force {
			op["force"] = true
		}
		if autoPromote {
			op["auto_promote"] = true
		}
		return op, changesPrinter("node", args[0]), nil
	})
	yn.add(cmd)
	f := cmd.Flags()
	f.BoolVarP(&force, "force", "f", false, "force the change (e.g. demoting the last master candidates)")
	f.BoolVar(&autoPromote, "auto-promote", false, "promote other nodes to keep the candidate pool full")
	f.StringVarP(&ndparams, "node-parameters", "N", "", "node parameters, key=val,... (e.g. ssh_port=2222); -key resets one to the group's or cluster's value")
	f.StringVarP(&sip, "secondary-ip", "s", "", "the node's new secondary IP (the node must own it)")
	addStateFlags(cmd, &hvState, &diskState)
	return cmd
}

// changesPrinter prints a modify result, a list of [param, new value].
func changesPrinter(kind, name string) resultPrinter {
	return func(w io.Writer, res any) error {
		l, _ := res.([]any)
		if len(l) == 0 {
			fmt.Fprintf(w, "Modified %s %s: nothing changed\n", kind, name)
			return nil
		}
		fmt.Fprintf(w, "Modified %s %s\n", kind, name)
		for _, c := range l {
			pair, _ := c.([]any)
			if len(pair) != 2 {
				fmt.Fprintf(w, " - %v\n", c)
				continue
			}
			fmt.Fprintf(w, " - %s -> %s\n", opcodes.ParamText(pair[0]), opcodes.ParamText(pair[1]))
		}
		return nil
	}
}

func (a *app) nodeJoinTokenCmd() *cobra.Command {
	var ttl string
	var readd bool
	cmd := &cobra.Command{
		Use:   "join-token NAME",
		Short: "Make a one-time token for a new node to join with",
		Long: `Make a one-time token that lets the node NAME join the cluster: it carries the
master's address and the fingerprint of the cluster CA, so the node can check
it talks to the right master. Run the printed command on the node, then add
it with "corral node add". The token is a secret: pass it on privately.`,
		Example: "  corral node join-token node2\n  corral node join-token node2 --ttl 30m",
		Args:    exactArgs(1, "the node name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := parseTTL(ttl)
			if err != nil {
				return err
			}
			node := args[0]
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var token string
				args := []any{node, d.Seconds()}
				if readd {
					args = append(args, true)
				}
				if err := c.Call(ctx, "CreateJoinToken", args, &token); err != nil {
					return err
				}
				add := "corral node add " + node + " --ip ADDRESS"
				if readd {
					add = "corral node add --readd " + node
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Join token for node %s (valid for %s, usable once):\n%s\n\n"+
					"On %s, run as root:\n  corral-node join %s\nthen add it to the cluster:\n  %s\n",
					node, d, token, node, token, add)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&ttl, "ttl", "1h", "how long the token stays valid: 90m, 1h30m, 2d, or seconds (at most 7d)")
	cmd.Flags().BoolVar(&readd, "readd", false, "for a node already in the cluster that lost its certificate (reinstalled): add it back with 'node add --readd'")
	return cmd
}

// parseTTL reads a lifetime as a Ganeti time specification ("2d") or a Go
// duration ("1h30m").
func parseTTL(s string) (time.Duration, error) {
	if secs, err := parseTimespec(s); err == nil {
		if secs <= 0 {
			return 0, paramErr("--ttl must be positive")
		}
		return seconds.Int(secs), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, paramErr("invalid --ttl %q: use e.g. 90m, 1h30m, 2d or a number of seconds", s)
	}
	return d, nil
}
