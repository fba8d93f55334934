package cli

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/baremetalapi"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/machinewire"
)

// bmPortDefaults are a port list's columns, as `openstack baremetal port list`.
var bmPortDefaults = []string{"uuid", "address"}

func portQuery(cmd *cobra.Command, c *luxi.Client, f machinewire.PortFilter) ([]*config.MachinePort, error) {
	var out []*config.MachinePort
	if err := c.Call(cmd.Context(), machinewire.MethodPorts, []any{f}, &out); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UUID < out[j].UUID })
	return out, nil
}

func portObjects(ps []*config.MachinePort) []map[string]any {
	out := make([]map[string]any, len(ps))
	for i, p := range ps {
		out[i] = baremetalapi.PortObject(p)
	}
	return out
}

func (a *app) bmPortCreateCmd() *cobra.Command {
	var node, uuid, physnet, output string
	var pxe bool
	var llc, extra []string
	cmd := &cobra.Command{
		Use:     "create ADDRESS --node NODE",
		Short:   "Add a network port (by MAC address) to a machine",
		Example: "  corral baremetal port create 52:54:00:12:34:56 --node bm1\n  corral baremetal port create 52:54:00:12:34:57 --node bm1 --pxe-enabled=false",
		Args:    exactArgs(1, "a MAC address"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usagef("--node is required")
			}
			if uuid == "" {
				uuid = config.NewUUID()
			}
			op := map[string]any{"OP_ID": "OP_MACHINE_PORT_CREATE", "machine": node, "address": strings.ToLower(args[0]),
				"uuid": uuid, "pxe_enabled": pxe}
			if physnet != "" {
				op["physical_network"] = physnet
			}
			for _, kv := range []struct {
				flag, param string
				vals        []string
			}{{"local-link-connection", "local_link_connection", llc}, {"extra", "extra", extra}} {
				if len(kv.vals) == 0 {
					continue
				}
				d := map[string]any{}
				for _, s := range kv.vals {
					k, v, ok := strings.Cut(s, "=")
					if !ok || k == "" {
						return paramErr("--%s %q: want KEY=VALUE", kv.flag, s)
					}
					d[k] = v
				}
				op[kv.param] = d
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if _, err := machineSubmit(ctx, c, op); err != nil {
					return err
				}
				ps, err := portQuery(cmd, c, machinewire.PortFilter{UUIDs: []string{uuid}})
				if err != nil {
					return err
				}
				if len(ps) != 1 {
					return fmt.Errorf("port %s: corrald answered %d ports", uuid, len(ps))
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", baremetalapi.PortObject(ps[0]))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&node, "node", "", "the machine (name or uuid) the port belongs to (required)")
	f.StringVar(&uuid, "uuid", "", "uuid to give the port (default: a new one)")
	f.StringVar(&physnet, "physical-network", "", "physical network the port is wired to")
	f.BoolVar(&pxe, "pxe-enabled", true, "the machine may PXE boot from this port")
	f.StringArrayVar(&llc, "local-link-connection", nil, "KEY=VALUE of the switch port it is wired to (switch_id, port_id, switch_info; repeatable)")
	f.StringArrayVar(&extra, "extra", nil, "KEY=VALUE to set in extra (repeatable)")
	f.StringVarP(&output, "output", "o", "", `"json" prints the API's port object`)
	return cmd
}

func (a *app) bmPortListCmd() *cobra.Command {
	var o bmOutput
	var node, address string
	cmd := &cobra.Command{
		Use:     "list [--node NODE] [--address MAC]",
		Short:   "List machines' network ports",
		Example: "  corral baremetal port list\n  corral baremetal port list --node bm1 -o uuid,address,pxe_enabled\n  corral baremetal port list -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ps, err := portQuery(cmd, c, machinewire.PortFilter{Machine: node, Address: strings.ToLower(address)})
				if err != nil {
					return err
				}
				return a.writeObjects(cmd.OutOrStdout(), &o, bmPortDefaults, portObjects(ps))
			})
		},
	}
	addBMOutputFlags(cmd, &o, bmPortDefaults)
	cmd.Flags().StringVar(&node, "node", "", "only the ports of this machine")
	cmd.Flags().StringVar(&address, "address", "", "only the port of this MAC address")
	return cmd
}

func (a *app) bmPortShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "show PORT",
		Short:   "Show a port (by uuid)",
		Example: "  corral baremetal port show 1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
		Args:    exactArgs(1, "a port uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ps, err := portQuery(cmd, c, machinewire.PortFilter{UUIDs: []string{args[0]}})
				if err != nil {
					return err
				}
				if len(ps) != 1 {
					return paramErr("Port %s could not be found.", args[0])
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", baremetalapi.PortObject(ps[0]))
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `"json" prints the API's port object`)
	return cmd
}

func (a *app) bmPortDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete PORT...",
		Short:   "Remove ports (by uuid)",
		Example: "  corral baremetal port delete 1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
		Args:    minArgs(1, "at least one port uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				for _, p := range args {
					if _, err := machineSubmit(ctx, c, map[string]any{"OP_ID": "OP_MACHINE_PORT_REMOVE", "port": p}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted port %s\n", p)
				}
				return nil
			})
		},
	}
}

func (a *app) bmDriverListCmd() *cobra.Command {
	var o bmOutput
	defaults := []string{"name", "hosts"}
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the hardware types and the nodes that can conduct them",
		Example: "  corral baremetal driver list\n  corral baremetal driver list -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var hts []machinewire.HardwareType
				if err := c.Call(ctx, machinewire.MethodDrivers, nil, &hts); err != nil {
					return err
				}
				objs := make([]map[string]any, len(hts))
				for i, h := range hts {
					hosts := make([]any, len(h.Hosts))
					for j, n := range h.Hosts {
						hosts[j] = n
					}
					enabled := map[string]any{}
					for k, v := range h.Enabled {
						enabled[k] = v
					}
					objs[i] = map[string]any{"name": h.Name, "hosts": hosts, "enabled": enabled}
				}
				return a.writeObjects(cmd.OutOrStdout(), &o, defaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, defaults)
	return cmd
}
