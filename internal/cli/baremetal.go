package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/baremetalapi"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/machinewire"
	"github.com/corral/corral/internal/opcodes"
)

// baremetalHead is `corral baremetal`: bare-metal machines (Ironic's
// "nodes"), their ports and the hardware types, with the verbs and state
// names of `openstack baremetal`, over LUXI.
func baremetalHead() *cobra.Command {
	bm := newGroup("baremetal", "Manage bare-metal machines, their ports and drivers (as openstack baremetal)",
		"  corral baremetal node create --driver fake-hardware --name bm1\n  corral baremetal node manage bm1 --wait\n  corral baremetal port create 52:54:00:12:34:56 --node bm1",
		"bm")
	bm.Long = `Bare-metal machines are computers Corral provisions through their BMC. The
commands and provision states are those of "openstack baremetal" (OpenStack's
Bare Metal API, Ironic), where a machine is called a node: the same machines
can be driven with the openstack client against corral-rapi's Bare Metal API.
Every change is a job of an OP_MACHINE_* opcode; provision actions return once
the machine has accepted the action, or with --wait when it reaches its stable
state.`
	return bm
}

// addBaremetalCommands completes the baremetal section.
func (a *app) addBaremetalCommands(bm *cobra.Command) {
	node := newGroup("node", "Enroll, list, change and provision bare-metal machines",
		"  corral baremetal node list\n  corral baremetal node deploy bm1 --wait 600")
	node.AddCommand(a.bmNodeCreateCmd(), a.bmNodeListCmd(), a.bmNodeShowCmd(), a.bmNodeSetCmd(), a.bmNodeUnsetCmd(),
		a.bmNodeDeleteCmd(), a.bmValidateCmd(), a.bmPowerCmd(), a.bmRebootCmd(), a.bmMaintenanceCmd(), a.bmConsoleCmd())
	for _, v := range provisionVerbs {
		node.AddCommand(a.bmProvisionCmd(v))
	}
	port := newGroup("port", "Add, list and remove bare-metal machines' network ports",
		"  corral baremetal port list --node bm1")
	port.AddCommand(a.bmPortCreateCmd(), a.bmPortListCmd(), a.bmPortShowCmd(), a.bmPortDeleteCmd())
	drv := newGroup("driver", "List the hardware types", "  corral baremetal driver list")
	drv.AddCommand(a.bmDriverListCmd())
	bm.AddCommand(node, port, drv)
}

// machineQuery asks corrald for machines by name or uuid, all when none.
func machineQuery(ctx context.Context, c *luxi.Client, names []string) ([]*config.Machine, error) {
	var recs []machinewire.Record
	if names == nil {
		names = []string{}
	}
	if err := c.Call(ctx, machinewire.MethodQuery, []any{names}, &recs); err != nil {
		return nil, err
	}
	out := make([]*config.Machine, 0, len(recs))
	for _, r := range recs {
		if r.Machine != nil {
			out = append(out, r.Machine)
		}
	}
	return out, nil
}

func machineGet(ctx context.Context, c *luxi.Client, name string) (*config.Machine, error) {
	ms, err := machineQuery(ctx, c, []string{name})
	if err != nil {
		return nil, err
	}
	if len(ms) != 1 {
		return nil, fmt.Errorf("machine %s: corrald answered %d machines", name, len(ms))
	}
	return ms[0], nil
}

// machineSubmit submits one OP_MACHINE_* opcode; corrald answers once the
// action is accepted, or with the opcode's error.
func machineSubmit(ctx context.Context, c *luxi.Client, op map[string]any) (int64, error) {
	var r machinewire.SubmitReply
	err := c.Call(ctx, machinewire.MethodSubmit, []any{op}, &r)
	return r.JobID, err
}

// bmListDefaults are a node list's columns, as `openstack baremetal node list`.
var bmListDefaults = []string{"uuid", "name", "instance_uuid", "power_state", "provision_state", "maintenance"}

// bmTitles are the column titles of the openstack client.
var bmTitles = map[string]string{
	"uuid": "UUID", "name": "Name", "instance_uuid": "Instance UUID", "power_state": "Power State",
	"provision_state": "Provisioning State", "maintenance": "Maintenance", "driver": "Driver",
	"target_provision_state": "Target Provision State", "last_error": "Last Error", "reservation": "Reservation",
	"interface": "Interface", "result": "Result", "reason": "Reason", "hosts": "Active host(s)",
	"address": "Address", "node_uuid": "Node UUID", "pxe_enabled": "PXE boot enabled", "physical_network": "Physical Network",
}

func bmField(name string) fieldDef {
	kind := kindText
	switch name {
	case "maintenance", "result", "pxe_enabled", "console_enabled", "protected", "retired":
		kind = kindBool
	case "driver_info", "properties", "instance_info", "extra", "driver_internal_info", "local_link_connection", "hosts":
		kind = kindOther
	}
	if t, ok := bmTitles[name]; ok {
		return fieldDef{t, kind}
	}
	return fieldDef{name, kind}
}

// bmOutput is the -o of the baremetal lists: "json", or columns as the
// other lists take them.
type bmOutput struct {
	listOpts
}

func (o *bmOutput) json() bool { return o.output == "json" }

func addBMOutputFlags(cmd *cobra.Command, o *bmOutput, defaults []string) {
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", fmt.Sprintf(`"json", or comma-separated fields of the API's objects; "+f1,f2" appends to the defaults (%s)`, strings.Join(defaults, ",")))
	f.BoolVar(&o.noHeaders, "no-headers", false, "do not print the header line")
	f.StringVar(&o.separator, "separator", "", "join the fields with this string instead of aligning them in columns")
}

// writeObjects prints objects (API-shaped maps) as a table of fields, or
// as a JSON list of them.
func (a *app) writeObjects(w io.Writer, o *bmOutput, defaults []string, objs []map[string]any) error {
	return a.writeAPIObjects(w, o, bmField, defaults, objs)
}

// writeAPIObjects prints objects as a table of the fields o selects (the
// defaults when none), each of the kind field gives, or as JSON.
func (a *app) writeAPIObjects(w io.Writer, o *bmOutput, field func(string) fieldDef, defaults []string, objs []map[string]any) error {
	if o.json() {
		return writeJSON(w, objs)
	}
	fields, err := selectFields(o.output, defaults)
	if err != nil {
		return err
	}
	rows := make([][]any, len(objs))
	for i, obj := range objs {
		for _, f := range fields {
			rows[i] = append(rows[i], obj[f])
		}
	}
	fm, err := a.newFormatter(&o.listOpts)
	if err != nil {
		return err
	}
	return fm.writeTable(w, &o.listOpts, field, fields, rows)
}

// writeObject prints one object as Field/Value lines, sorted as the
// openstack client does, or as JSON.
func (a *app) writeObject(w io.Writer, asJSON bool, obj map[string]any) error {
	if asJSON {
		return writeJSON(w, obj)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fm := &formatter{units: "m", loc: a.env.loc()}
	lines := [][]string{{"Field", "Value"}}
	for _, k := range keys {
		v := obj[k]
		s := fm.cell(kindText, v)
		switch v.(type) {
		case map[string]any, []any:
			b, _ := json.Marshal(v)
			s = string(b)
		}
		lines = append(lines, []string{k, s})
	}
	return writeLines(w, lines, []bool{false, false}, "")
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// nodeObjects renders machines as the API's node objects (secrets masked).
func nodeObjects(ms []*config.Machine) []map[string]any {
	out := make([]map[string]any, len(ms))
	for i, m := range ms {
		out[i] = baremetalapi.NodeObject(m)
	}
	return out
}

func (a *app) bmNodeListCmd() *cobra.Command {
	var o bmOutput
	var state, driver string
	var maint, noMaint, long bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List bare-metal machines",
		Long: `List the machines with the columns of "openstack baremetal node list"; --long
shows every field, -o json prints the node objects of the Bare Metal API
(secrets masked).`,
		Example: "  corral baremetal node list\n  corral baremetal node list --provision-state active -o uuid,name,last_error\n  corral baremetal node list -o json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ms, err := machineQuery(ctx, c, nil)
				if err != nil {
					return err
				}
				ms = slices.DeleteFunc(ms, func(m *config.Machine) bool {
					return state != "" && m.ProvisionState != state || driver != "" && m.Driver != driver ||
						maint && !m.Maintenance || noMaint && m.Maintenance
				})
				sort.Slice(ms, func(i, j int) bool { return ms[i].UUID < ms[j].UUID })
				objs := nodeObjects(ms)
				defaults := bmListDefaults
				if long {
					defaults = append(slices.Clone(defaults), "driver", "target_provision_state", "reservation", "last_error")
				}
				if o.json() && !long {
					for _, obj := range objs {
						for k := range obj {
							if !slices.Contains(bmListDefaults, k) {
								delete(obj, k)
							}
						}
					}
				}
				return a.writeObjects(cmd.OutOrStdout(), &o, defaults, objs)
			})
		},
	}
	addBMOutputFlags(cmd, &o, bmListDefaults)
	f := cmd.Flags()
	f.StringVar(&state, "provision-state", "", "only machines in this provision state")
	f.StringVar(&driver, "driver", "", "only machines of this hardware type")
	f.BoolVar(&maint, "maintenance", false, "only machines in maintenance")
	f.BoolVar(&noMaint, "no-maintenance", false, "only machines not in maintenance")
	f.BoolVar(&long, "long", false, "more columns; with -o json, the whole node objects")
	return cmd
}

func (a *app) bmNodeShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "show NODE",
		Short:   "Show a bare-metal machine (secrets masked)",
		Example: "  corral baremetal node show bm1\n  corral baremetal node show bm1 -o json",
		Args:    exactArgs(1, "a machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "json" {
				return paramErr("-o %q: only json is known", output)
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				m, err := machineGet(ctx, c, args[0])
				if err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), output == "json", baremetalapi.NodeObject(m))
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", `"json" prints the API's node object`)
	return cmd
}

// machineFlags are the fields create and set take: plain ones and dicts
// filled from repeated KEY=VALUE.
type machineFlags struct {
	plain map[string]*string
	dicts map[string]*[]string
}

var machinePlainFields = []string{"name", "description", "resource_class", "conductor_group", "owner", "lessee", "instance_uuid"}

var machineDictFields = []string{"driver_info", "properties", "instance_info", "extra"}

// dictFlag is the flag name of a dict field (properties: --property).
func dictFlag(field string) string {
	if field == "properties" {
		return "property"
	}
	return strings.ReplaceAll(field, "_", "-")
}

func addMachineFlags(cmd *cobra.Command) *machineFlags {
	mf := &machineFlags{plain: map[string]*string{}, dicts: map[string]*[]string{}}
	f := cmd.Flags()
	for _, k := range append(slices.Clone(machinePlainFields), opcodes.MachineInterfaceFields...) {
		mf.plain[k] = f.String(strings.ReplaceAll(k, "_", "-"), "", "the machine's "+k)
	}
	for _, k := range machineDictFields {
		mf.dicts[k] = f.StringArray(dictFlag(k), nil, "KEY=VALUE to set in "+k+" (repeatable)")
	}
	return mf
}

// changes are the fields given, dicts merged into base's (nil: new).
func (mf *machineFlags) changes(cmd *cobra.Command, base *config.Machine) (map[string]any, error) {
	out := map[string]any{}
	for k, v := range mf.plain {
		if cmd.Flags().Changed(strings.ReplaceAll(k, "_", "-")) {
			out[k] = *v
		}
	}
	for k, kvs := range mf.dicts {
		if len(*kvs) == 0 {
			continue
		}
		d := map[string]any{}
		if cur := machineDict(base, k); cur != nil {
			d = config.CloneDict(cur)
		}
		for _, kv := range *kvs {
			key, val, ok := strings.Cut(kv, "=")
			if !ok || key == "" {
				return nil, paramErr("--%s %q: want KEY=VALUE", dictFlag(k), kv)
			}
			d[key] = val
		}
		out[k] = d
	}
	return out, nil
}

func (a *app) bmNodeCreateCmd() *cobra.Command {
	var drv, uuid string
	var o bmOutput
	var mf *machineFlags
	cmd := &cobra.Command{
		Use:   "create --driver DRIVER [--name NAME] [--driver-info KEY=VALUE]...",
		Short: "Enroll a bare-metal machine",
		Long: `Enroll a machine; it starts in provision state "enroll". Walk it to
"available" with manage and provide.`,
		Example: "  corral baremetal node create --driver fake-hardware --name bm1\n" +
			"  corral baremetal node create --driver ipmi --name bm2 --driver-info ipmi_address=10.0.0.5 \\\n" +
			"      --driver-info ipmi_username=admin --driver-info ipmi_password=secret --property cpus=4",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if drv == "" {
				return usagef("--driver is required")
			}
			fields, err := mf.changes(cmd, nil)
			if err != nil {
				return err
			}
			if uuid == "" {
				uuid = config.NewUUID()
			}
			op := map[string]any{"OP_ID": "OP_MACHINE_CREATE", "driver": drv, "uuid": uuid}
			for k, v := range fields {
				op[k] = v
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if _, err := machineSubmit(ctx, c, op); err != nil {
					return err
				}
				m, err := machineGet(ctx, c, uuid)
				if err != nil {
					return err
				}
				return a.writeObject(cmd.OutOrStdout(), o.json(), baremetalapi.NodeObject(m))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&drv, "driver", "", "hardware type: fake-hardware, ipmi or redfish (required)")
	f.StringVar(&uuid, "uuid", "", "uuid to give the machine (default: a new one)")
	f.StringVarP(&o.output, "output", "o", "", `"json" prints the API's node object`)
	mf = addMachineFlags(cmd)
	return cmd
}

func (a *app) bmNodeSetCmd() *cobra.Command {
	var drv string
	var mf *machineFlags
	cmd := &cobra.Command{
		Use:     "set NODE [--name NAME] [--driver-info KEY=VALUE]...",
		Short:   "Change fields of a bare-metal machine",
		Long:    "Change fields of a machine; KEY=VALUE flags add or replace keys of its dicts.",
		Example: "  corral baremetal node set bm1 --driver-info ipmi_address=10.0.0.7\n  corral baremetal node set bm1 --instance-info image_source=http://images/disk.raw",
		Args:    exactArgs(1, "a machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				m, err := machineGet(ctx, c, args[0])
				if err != nil {
					return err
				}
				changes, err := mf.changes(cmd, m)
				if err != nil {
					return err
				}
				if cmd.Flags().Changed("driver") {
					changes["driver"] = drv
				}
				if len(changes) == 0 {
					return usagef("nothing to change: give at least one field")
				}
				_, err = machineSubmit(ctx, c, map[string]any{"OP_ID": "OP_MACHINE_MODIFY", "machine": m.UUID,
					"changes": changes, "serial": m.Serial})
				return err
			})
		},
	}
	cmd.Flags().StringVar(&drv, "driver", "", "new hardware type")
	mf = addMachineFlags(cmd)
	return cmd
}

func (a *app) bmNodeUnsetCmd() *cobra.Command {
	plain := map[string]*bool{}
	dicts := map[string]*[]string{}
	cmd := &cobra.Command{
		Use:     "unset NODE [--description] [--driver-info KEY]...",
		Short:   "Remove fields of a bare-metal machine",
		Example: "  corral baremetal node unset bm1 --driver-info ipmi_password --description",
		Args:    exactArgs(1, "a machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				m, err := machineGet(ctx, c, args[0])
				if err != nil {
					return err
				}
				changes := map[string]any{}
				for k, on := range plain {
					if *on {
						changes[k] = nil
					}
				}
				for k, keys := range dicts {
					if len(*keys) == 0 {
						continue
					}
					d := config.CloneDict(machineDict(m, k))
					for _, key := range *keys {
						if _, ok := d[key]; !ok {
							return paramErr("--%s %s: the machine's %s has no such key", dictFlag(k), key, k)
						}
						delete(d, key)
					}
					changes[k] = d
				}
				if len(changes) == 0 {
					return usagef("nothing to unset: give at least one field")
				}
				_, err = machineSubmit(ctx, c, map[string]any{"OP_ID": "OP_MACHINE_MODIFY", "machine": m.UUID,
					"changes": changes, "serial": m.Serial})
				return err
			})
		},
	}
	f := cmd.Flags()
	for _, k := range append(slices.Clone(machinePlainFields[1:]), opcodes.MachineInterfaceFields...) {
		plain[k] = f.Bool(strings.ReplaceAll(k, "_", "-"), false, "clear the machine's "+k)
	}
	for _, k := range machineDictFields {
		dicts[k] = f.StringArray(dictFlag(k), nil, "KEY to remove from "+k+" (repeatable)")
	}
	return cmd
}

func (a *app) bmNodeDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NODE...",
		Short: "Remove bare-metal machines and their ports",
		Long: `Remove machines in provision state enroll, manageable, available or adopt
failed, or any machine in maintenance.`,
		Example: "  corral baremetal node delete bm1 bm2",
		Args:    minArgs(1, "at least one machine name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				for _, n := range args {
					if _, err := machineSubmit(ctx, c, map[string]any{"OP_ID": "OP_MACHINE_REMOVE", "machine": n}); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "Deleted node %s\n", n)
				}
				return nil
			})
		},
	}
}

// machineDict is one of m's dicts by its API name (nil m: none).
func machineDict(m *config.Machine, field string) map[string]any {
	if m == nil {
		return nil
	}
	switch field {
	case "driver_info":
		return m.DriverInfo
	case "properties":
		return m.Properties
	case "instance_info":
		return m.InstanceInfo
	case "extra":
		return m.Extra
	}
	return nil
}

// bmPoll is how often --wait asks for the machine's state.
const bmPoll = time.Second

// bmConsoleCmd is `corral baremetal node console`: the machine's serial
// console, streamed by the node that conducts it.
func (a *app) bmConsoleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "console NODE",
		Short: "Attach to a machine's serial console (IPMI Serial-over-LAN)",
		Long: `Attach to a bare-metal machine's serial console: what you type goes to the
machine, what it prints comes back; Ctrl-] leaves. The machine's
console_interface must be ipmitool-sol; the node conducting it opens the
Serial-over-LAN session with the BMC. Run it as root on the master (it uses
the master's certificate to reach the node).`,
		Example: "  corral baremetal node console bm1",
		Args:    exactArgs(1, "the machine's name or uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.env.MachineConsole == nil {
				return &exitError{code: ExitError, msg: "Failure: the console is not available in this build of corral"}
			}
			return a.env.MachineConsole(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}
