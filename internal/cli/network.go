package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/opcodes"
)

// defaultNetworkFields are gnt-network list's columns.
func defaultNetworkFields() []string {
	return []string{"name", "network", "gateway", "mac_prefix", "group_list", "tags"}
}

func networkField(name string) fieldDef {
	switch name {
	case "name":
		return fieldDef{"Network", kindText}
	case "uuid":
		return fieldDef{"UUID", kindText}
	case "network":
		return fieldDef{"Subnet", kindText}
	case "gateway":
		return fieldDef{"Gateway", kindOther}
	case "network6":
		return fieldDef{"IPv6Subnet", kindOther}
	case "gateway6":
		return fieldDef{"IPv6Gateway", kindOther}
	case "mac_prefix":
		return fieldDef{"MacPrefix", kindOther}
	case "free_count":
		return fieldDef{"FreeCount", kindNumber}
	case "reserved_count":
		return fieldDef{"ReservedCount", kindNumber}
	case "map":
		return fieldDef{"Map", kindText}
	case "external_reservations":
		return fieldDef{"ExternalReservations", kindText}
	case "group_cnt":
		return fieldDef{"NodeGroups", kindNumber}
	case "group_list":
		return fieldDef{"GroupList", kindOther}
	case "inst_cnt":
		return fieldDef{"Instances", kindNumber}
	case "inst_list":
		return fieldDef{"InstanceList", kindOther}
	}
	return commonField(name)
}

func networkHead() *cobra.Command {
	return newGroup("network", "Manage networks and their IP address pools",
		"  corral network add --network 192.0.2.0/24 --gateway 192.0.2.1 net1\n"+
			"  corral network connect -N mode=bridged,link=br0 net1 default\n"+
			"  corral instance add ... --net 0:network=net1,ip=pool web1")
}

func (a *app) addNetworkCommands(c *cobra.Command) {
	c.AddCommand(a.networkListCmd(), a.networkInfoCmd(), a.networkAddCmd(), a.networkModifyCmd(),
		a.networkRemoveCmd(), a.networkConnectCmd(), a.networkDisconnectCmd())
	c.AddCommand(tagCommands(a, opcodes.TagNetwork)...)
	c.AddCommand(a.listFieldsCmd("network", "network", "networks"))
}

func queryNetworks(ctx context.Context, c *luxi.Client, names, fields []string) ([][]any, error) {
	return c.QueryNetworks(ctx, names, fields, false)
}

func (a *app) networkListCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use:     "list [NAME...]",
		Aliases: []string{"ls"},
		Short:   "List networks",
		Long: `List networks (all, or the ones named) in a table.

Fields: name, uuid, network, gateway, network6, gateway6, mac_prefix,
free_count, reserved_count, map, external_reservations, group_cnt,
group_list, inst_cnt, inst_list, tags, ctime, mtime, serial_no.`,
		Example: "  corral network list\n  corral network list -o +free_count,inst_list\n  corral network list -F 'free_count < 10'",
		RunE:    a.listRun(&o, defaultNetworkFields(), networkField, o.filteredRows("network", queryNetworks)),
	}
	addListFlags(cmd, &o, defaultNetworkFields(), false)
	return cmd
}

// networkInfoFields are what gnt-network info reads.
var networkInfoFields = []string{"name", "network", "gateway", "network6", "gateway6", "mac_prefix",
	"free_count", "reserved_count", "map", "group_list", "inst_list", "external_reservations", "serial_no", "uuid"}

func (a *app) networkInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info [NAME...]",
		Short:   "Show a network's pool, connections and users",
		Long:    "Show the named networks (all without names) as gnt-network info does: subnet, gateways, the pool's usage map, external reservations, connected node groups and the instances' addresses on it.",
		Example: "  corral network info net1",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				rows, err := c.QueryNetworks(ctx, args, networkInfoFields, false)
				if err != nil {
					return err
				}
				for _, r := range rows {
					if err := printNetworkInfo(ctx, cmd.OutOrStdout(), c, r); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
}

// pyStr renders a value as Ganeti's "%s" does (None for null).
func pyStr(v any) string {
	if v == nil {
		return "None"
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return fmt.Sprint(int64(f))
	}
	return fmt.Sprint(v)
}

func printNetworkInfo(ctx context.Context, w io.Writer, c *luxi.Client, r []any) error {
	if len(r) != len(networkInfoFields) {
		return fmt.Errorf("malformed answer: %d values for %d fields", len(r), len(networkInfoFields))
	}
	free, _ := r[6].(float64)
	reserved, _ := r[7].(float64)
	size := free + reserved
	mapping, _ := r[8].(string)
	uuid := pyStr(r[13])
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("Network name: %s", pyStr(r[0]))
	p("UUID: %s", uuid)
	p("Serial number: %s", pyStr(r[12]))
	p("  Subnet: %s", pyStr(r[1]))
	p("  Gateway: %s", pyStr(r[2]))
	p("  IPv6 Subnet: %s", pyStr(r[3]))
	p("  IPv6 Gateway: %s", pyStr(r[4]))
	p("  Mac Prefix: %s", pyStr(r[5]))
	p("  Size: %d", int64(size))
	pct := 0.0
	if size > 0 {
		pct = 100 * free / size
	}
	p("  Free: %d (%.2f%%)", int64(free), pct)
	p("  Usage map:")
	for i := 0; i < len(mapping); i += 64 {
		line := mapping[i:min(i+64, len(mapping))]
		p("     %4d %-64s %d", i, line, i+63)
	}
	p("         (X) used    (.) free")
	if ext, _ := r[11].(string); ext != "" {
		p("  externally reserved IPs:")
		for _, l := range wrapWords(ext, 64) {
			p("    %s", l)
		}
	}
	if groups, _ := r[9].([]any); len(groups) > 0 {
		p("  connected to node groups:")
		for _, g := range groups {
			v, _ := g.([]any)
			if len(v) == 4 {
				p("    %s (mode:%s link:%s vlan:%s)", pyStr(v[0]), pyStr(v[1]), pyStr(v[2]), pyStr(v[3]))
			}
		}
	} else {
		p("  not connected to any node group")
	}
	insts, _ := r[10].([]any)
	if len(insts) == 0 {
		p("  not used by any instances")
	} else {
		p("  used by %d instances:", len(insts))
		for _, in := range insts {
			name := pyStr(in)
			rows, err := c.QueryInstances(ctx, []string{name}, []string{"nic.ips", "nic.networks"}, false)
			if err != nil {
				return err
			}
			var addrs []string
			if len(rows) == 1 && len(rows[0]) == 2 {
				ips, _ := rows[0][0].([]any)
				nets, _ := rows[0][1].([]any)
				for k := range min(len(ips), len(nets)) {
					if pyStr(nets[k]) == uuid {
						addrs = append(addrs, fmt.Sprintf("%d:%s", k, pyStr(ips[k])))
					}
				}
			}
			p("    %s: %s", name, strings.Join(addrs, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapWords breaks text into lines of at most width characters at spaces,
// as Python's textwrap does for the reservations list.
func wrapWords(text string, width int) []string {
	var out []string
	cur := ""
	for _, word := range strings.Fields(text) {
		switch {
		case cur == "":
			cur = word
		case len(cur)+1+len(word) <= width:
			cur += " " + word
		default:
			out = append(out, cur)
			cur = word
		}
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// networkParamFlags are the options add and modify share, as gnt-network's.
type networkParamFlags struct {
	gateway, network6, gateway6, macPrefix, addReserved string
}

func (n *networkParamFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&n.gateway, "gateway", "", "IPv4 gateway, inside the network (modify: \"none\" removes it)")
	f.StringVar(&n.network6, "network6", "", "IPv6 subnet")
	f.StringVar(&n.gateway6, "gateway6", "", "IPv6 gateway")
	f.StringVar(&n.macPrefix, "mac-prefix", "", "MAC prefix of the network's NICs, three octets (aa:bb:cc)")
	f.StringVar(&n.addReserved, "add-reserved-ips", "", "addresses to reserve outside the cluster, a,b,...")
}

// fill puts the given options into op; it reports whether any was given.
func (n *networkParamFlags) fill(cmd *cobra.Command, op map[string]any) bool {
	fl := cmd.Flags()
	given := false
	for _, o := range []struct{ flag, key, val string }{
		{"gateway", "gateway", n.gateway}, {"network6", "network6", n.network6},
		{"gateway6", "gateway6", n.gateway6}, {"mac-prefix", "mac_prefix", n.macPrefix},
	} {
		if fl.Changed(o.flag) {
			op[o.key], given = o.val, true
		}
	}
	if fl.Changed("add-reserved-ips") {
		op["add_reserved_ips"], given = addrArg(n.addReserved), true
	}
	return given
}

// addrArg splits a comma-separated address list (empty: none).
func addrArg(s string) []any {
	out := []any{}
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

func (a *app) networkAddCmd() *cobra.Command {
	var pf networkParamFlags
	var subnet, tags string
	var noConflicts bool
	cmd := a.jobCmd(&cobra.Command{
		Use:   "add --network CIDR NAME",
		Short: "Add a network with an IPv4 address pool",
		Long: `Add a network (OP_NETWORK_ADD). Its pool covers the subnet given with
--network (a /16 to a /30); the network and broadcast addresses and the
gateway are reserved, and so are the nodes' addresses inside it unless
--no-conflicts-check. Connect it to node groups with "corral network connect".`,
		Example: "  corral network add --network 192.0.2.0/24 --gateway 192.0.2.1 --add-reserved-ips 192.0.2.10,192.0.2.11 net1",
		Args:    exactArgs(1, "the network name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		if subnet == "" {
			return nil, nil, usagef("--network is required")
		}
		op := map[string]any{"OP_ID": "OP_NETWORK_ADD", "network_name": args[0], "network": subnet}
		pf.fill(cmd, op)
		if noConflicts {
			op["conflicts_check"] = false
		}
		if tags != "" {
			op["tags"] = addrArg(tags)
		}
		return op, nil, nil
	})
	pf.add(cmd)
	cmd.Flags().StringVar(&subnet, "network", "", "the IPv4 subnet, CIDR (required)")
	cmd.Flags().StringVar(&tags, "tags", "", "tags of the network, a,b,...")
	cmd.Flags().BoolVar(&noConflicts, "no-conflicts-check", false, "do not reserve the nodes' addresses inside the network")
	return cmd
}

func (a *app) networkModifyCmd() *cobra.Command {
	var pf networkParamFlags
	var remove string
	cmd := a.jobCmd(&cobra.Command{
		Use:   "modify NAME",
		Short: "Change a network's gateways, IPv6 subnet, MAC prefix or reservations",
		Long: `Change a network (OP_NETWORK_SET_PARAMS). Its subnet cannot change. "none"
removes the gateway, IPv6 values or MAC prefix; the gateway and the
reservations cannot change in one command.`,
		Example: "  corral network modify --add-reserved-ips 192.0.2.20 net1\n  corral network modify --gateway none net1",
		Args:    exactArgs(1, "the network name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		op := map[string]any{"OP_ID": "OP_NETWORK_SET_PARAMS", "network_name": args[0]}
		given := pf.fill(cmd, op)
		if cmd.Flags().Changed("remove-reserved-ips") {
			op["remove_reserved_ips"], given = addrArg(remove), true
		}
		if !given {
			return nil, nil, usagef("Please give at least one of the parameters.")
		}
		return op, nil, nil
	})
	pf.add(cmd)
	cmd.Flags().StringVar(&remove, "remove-reserved-ips", "", "external reservations to release, a,b,...")
	return cmd
}

func (a *app) networkRemoveCmd() *cobra.Command {
	return a.jobCmd(&cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove a network connected to no node group",
		Long:    "Remove a network (OP_NETWORK_REMOVE). It must be disconnected from every node group first.",
		Example: "  corral network remove net1",
		Args:    exactArgs(1, "the network name"),
	}, fixedJob(func(args []string) map[string]any {
		return map[string]any{"OP_ID": "OP_NETWORK_REMOVE", "network_name": args[0]}
	}))
}

// groupsOrAll is the node groups named, or every group (gnt-network's
// default for connect and disconnect).
func groupsOrAll(ctx context.Context, c *luxi.Client, named []string) ([]string, error) {
	if len(named) > 0 {
		return named, nil
	}
	rows, err := c.QueryGroups(ctx, nil, []string{"name"}, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if len(r) == 1 {
			out = append(out, pyStr(r[0]))
		}
	}
	return out, nil
}

// perGroupJobs runs one job per node group, as gnt-network does for
// connect and disconnect.
func (a *app) perGroupJobs(cmd *cobra.Command, o *jobOpts, groups []string, op func(group string) map[string]any) error {
	ctx := cmd.Context()
	var all []string
	if err := a.env.withClient(ctx, func(c *luxi.Client) error {
		var err error
		all, err = groupsOrAll(ctx, c, groups)
		return err
	}); err != nil {
		return err
	}
	for _, g := range all {
		if err := a.runJob(cmd, o, op(g), nil); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) networkConnectCmd() *cobra.Command {
	var o jobOpts
	var nicParams string
	var noConflicts bool
	cmd := &cobra.Command{
		Use:   "connect [-N mode=MODE,link=LINK,vlan=VLAN] NETWORK [GROUP...]",
		Short: "Connect a network to node groups",
		Long: `Connect a network to node groups (OP_NETWORK_CONNECT), all groups when
none is named. The NICs of instances in those groups on the network get the
mode (bridged or routed), link and VLAN given with -N; mode defaults to
bridged and link to the cluster's default NIC link. A VLAN is refused on
these machines (their kernel has no bridge VLAN filtering).`,
		Example: "  corral network connect -N mode=bridged,link=br0,vlan=100 net1 default",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("expected the network name and optionally node groups")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			params, err := parseParams("-N", nicParams, false)
			if err != nil {
				return err
			}
			np := map[string]string{"mode": "bridged", "link": "", "vlan": ""}
			for k, v := range params {
				if _, ok := np[k]; !ok {
					return usagef("-N: unknown NIC parameter %q (mode, link, vlan)", k)
				}
				np[k], _ = v.(string)
			}
			if np["link"] == "" {
				if np["link"], err = a.defaultNICLink(cmd.Context()); err != nil {
					return err
				}
			}
			return a.perGroupJobs(cmd, &o, args[1:], func(g string) map[string]any {
				op := map[string]any{"OP_ID": "OP_NETWORK_CONNECT", "network_name": args[0], "group_name": g,
					"network_mode": np["mode"], "network_link": np["link"], "network_vlan": np["vlan"]}
				if noConflicts {
					op["conflicts_check"] = false
				}
				return op
			})
		},
	}
	addJobFlags(cmd, &o, true)
	cmd.Flags().StringVarP(&nicParams, "nic-parameters", "N", "", "NIC parameters of the connection: mode=bridged|routed,link=LINK,vlan=ID")
	cmd.Flags().BoolVar(&noConflicts, "no-conflicts-check", false, "do not refuse instance addresses inside the network")
	return cmd
}

// defaultNICLink is the cluster's default NIC link.
func (a *app) defaultNICLink(ctx context.Context) (string, error) {
	var link string
	err := a.env.withClient(ctx, func(c *luxi.Client) error {
		info, err := c.QueryClusterInfo(ctx)
		if err != nil {
			return err
		}
		np, _ := info["nicparams"].(map[string]any)
		def, _ := np["default"].(map[string]any)
		link, _ = def["link"].(string)
		return nil
	})
	return link, err
}

func (a *app) networkDisconnectCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:     "disconnect NETWORK [GROUP...]",
		Short:   "Disconnect a network from node groups",
		Long:    "Disconnect a network from node groups (OP_NETWORK_DISCONNECT), all groups when none is named. Instances in a group must have no NIC on the network.",
		Example: "  corral network disconnect net1 default",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("expected the network name and optionally node groups")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.perGroupJobs(cmd, &o, args[1:], func(g string) map[string]any {
				return map[string]any{"OP_ID": "OP_NETWORK_DISCONNECT", "network_name": args[0], "group_name": g}
			})
		},
	}
	addJobFlags(cmd, &o, true)
	return cmd
}
