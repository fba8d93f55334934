package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// defaultInstanceFields are gnt-instance list's columns.
func defaultInstanceFields() []string {
	return []string{"name", "hypervisor", "os", "pnode", "status", "oper_ram"}
}

func instanceHead() *cobra.Command {
	return newGroup("instance", "Manage instances (virtual machines)",
		"  corral instance list\n  corral instance add -t file -o debootstrap -s 10G web1\n  corral instance shutdown web1", "i")
}

func (a *app) addInstanceCommands(c *cobra.Command) {
	c.AddCommand(a.instanceAddCmd(), a.instanceBatchCreateCmd(), a.instanceListCmd(), a.instanceInfoCmd(), a.instanceConsoleCmd(), a.instanceMoveCmd())
	c.AddCommand(a.instanceOpCmds()...)
	c.AddCommand(a.instanceRescueCmds()...)
	c.AddCommand(a.instanceDiskCmds()...)
	c.AddCommand(a.instanceChangeGroupCmd())
	c.AddCommand(tagCommands(a, "instance")...)
	c.AddCommand(a.listFieldsCmd("instance", "instance", "instances"))
}

func (a *app) instanceAddCmd() *cobra.Command {
	var o jobOpts
	var (
		template, osType, node, size, hv, be, osp string
		ospPriv, ialloc                           string
		disks, nets                               []string
		noNICs, noStart, noInstall, forceVariant  bool
		ignoreIPolicy                             bool
	)
	cmd := &cobra.Command{
		Use:     "add -t TEMPLATE -o OS [flags] NAME",
		Aliases: []string{"create"},
		Short:   "Create an instance",
		Long: `Create an instance (OP_INSTANCE_CREATE), install its OS and start it.

Disks are given as --disk N:size=SIZE[,mode=ro|rw] for N = 0, 1, ... (or -s
SIZE for a single disk); sizes take the units M, G and T (plain numbers are
MiB). NICs are given as --net N:mode=bridged|routed,link=BRIDGE,mac=auto|MAC,ip=IP;
without --net the instance gets one NIC with the cluster's defaults, with
--no-nics none. -H names the hypervisor and may set its parameters
(kvm:kernel_path=/boot/vmlinuz,acpi=true); -B sets backend parameters
(memory=1G,vcpus=2) and -O OS parameters, both as key=value,...`,
		Example: `  corral instance add -t file -o debootstrap -s 10G web1
  corral instance add -t file -o debootstrap+bookworm -n node2 --disk 0:size=10G --disk 1:size=1G,mode=ro \
      --net 0:link=br0 -H kvm:acpi=true -B memory=2G,vcpus=2 web2
  corral instance add -t diskless -o none --no-install --no-nics test1`,
		Args: exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if template == "" {
				return usagef("the disk template (-t diskless|file) is required")
			}
			if osType == "" && !noInstall {
				return usagef("the OS (-o OS[+variant]) is required unless --no-install is given")
			}
			diskList, err := parseDisks(disks, size)
			if err != nil {
				return err
			}
			switch {
			case template == "diskless" && len(diskList) > 0:
				return paramErr("a diskless instance takes no disks")
			case template != "diskless" && len(diskList) == 0:
				return paramErr("no disks given: use --disk 0:size=SIZE or -s SIZE")
			}
			nics, err := parseNICs(nets, noNICs)
			if err != nil {
				return err
			}
			op := map[string]any{
				"OP_ID":         "OP_INSTANCE_CREATE",
				"instance_name": args[0],
				"disk_template": template,
				"disks":         diskList,
				"nics":          nics,
				"hvparams":      map[string]any{},
				"beparams":      map[string]any{},
				"osparams":      map[string]any{},
				"start":         !noStart,
				"no_install":    noInstall,
				"force_variant": forceVariant,
			}
			if ignoreIPolicy {
				op["ignore_ipolicy"] = true
			}
			if osType != "" {
				op["os_type"] = osType
			}
			if node != "" && ialloc != "" {
				return usagef("--node and --iallocator exclude each other")
			}
			if node != "" {
				op["pnode"] = node
			}
			if ialloc != "" {
				op["iallocator"] = ialloc
			}
			if err := applyHVBE(op, hv, be); err != nil {
				return err
			}
			if osp != "" {
				if op["osparams"], err = parseParams("-O", osp, false); err != nil {
					return err
				}
			}
			if ospPriv != "" {
				if op["osparams_private"], err = parseParams("--os-parameters-private", ospPriv, false); err != nil {
					return err
				}
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&template, "disk-template", "t", "", "disk template: diskless, file or rbd (required)")
	f.StringVarP(&osType, "os-type", "o", "", "OS to install, OS or OS+variant")
	f.StringVarP(&node, "node", "n", "", "primary node (default: chosen by the master)")
	f.StringArrayVar(&disks, "disk", nil, "a disk: N:size=SIZE[,mode=rw|ro] (repeatable, N from 0)")
	f.StringVarP(&size, "os-size", "s", "", "size of a single disk, e.g. 10G (instead of --disk)")
	f.StringArrayVar(&nets, "net", nil, "a NIC: N:mode=bridged|routed,link=..,mac=auto|MAC,ip=.. or N:network=NAME,ip=pool|ADDR (repeatable, N from 0)")
	f.BoolVar(&noNICs, "no-nics", false, "create the instance without network interfaces")
	f.StringVarP(&hv, "hypervisor-parameters", "H", "", "hypervisor and its parameters: HV[:key=value,...]")
	f.StringVarP(&be, "backend-parameters", "B", "", "backend parameters: memory=SIZE,maxmem=SIZE,minmem=SIZE,vcpus=N,...")
	f.StringVarP(&osp, "os-parameters", "O", "", "OS parameters: key=value,...")
	f.StringVar(&ospPriv, "os-parameters-private", "", "private OS parameters: key=value,... (kept out of job results, logs and queries)")
	f.StringVarP(&ialloc, "iallocator", "I", "", "allocator choosing the primary node (a name in the iallocator search path)")
	f.BoolVar(&noStart, "no-start", false, "do not start the instance after creating it")
	f.BoolVar(&noInstall, "no-install", false, "do not install the OS (the disks stay empty)")
	f.BoolVar(&forceVariant, "force-variant", false, "accept an OS variant the OS does not declare")
	f.BoolVar(&ignoreIPolicy, "ignore-ipolicy", false, "accept memory, vcpus and spindle use outside the instance policy")
	return cmd
}

func (a *app) instanceListCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use:     "list [NAME...]",
		Aliases: []string{"ls"},
		Short:   "List instances",
		Long: `List instances (all, or the ones named) in a table. Sizes are in human units
unless --units says otherwise; a value the master could not get (for example
the memory of an instance on an offline node) shows as "-".

Fields: name, uuid, os, hypervisor, pnode, snodes, status, admin_state,
oper_state, oper_ram, oper_vcpus, disk_template, disk.count, disk.sizes,
disk_usage, nic.count, nic.macs, nic.ips, nic.modes, nic.links, network_port,
be/memory, be/vcpus, beparams, hvparams, osparams, tags, ctime, mtime,
serial_no.`,
		Example: "  corral instance list\n  corral instance list -o name,status --no-headers\n  corral instance list -o +disk.sizes --units g web1 web2",
		RunE: a.listRun(&o, defaultInstanceFields(), instanceField, o.filteredRows("instance", func(ctx context.Context, c *luxi.Client, names, fields []string) ([][]any, error) {
			return c.QueryInstances(ctx, names, fields, false)
		})),
	}
	addListFlags(cmd, &o, defaultInstanceFields(), true)
	return cmd
}

func (a *app) instanceInfoCmd() *cobra.Command {
	var static bool
	cmd := &cobra.Command{
		Use:   "info NAME...",
		Short: "Show everything about instances",
		Long: `Show the configuration and state of instances (OP_INSTANCE_QUERY_DATA).
Parameters the instance does not set itself show as "default (VALUE)".
--static skips asking the nodes about the running state.`,
		Example: "  corral instance info web1\n  corral instance info --static web1 web2",
		Args:    minArgs(1, "at least one instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			names := make([]any, len(args))
			for i, n := range args {
				names[i] = n
			}
			op := map[string]any{"OP_ID": "OP_INSTANCE_QUERY_DATA", "instances": names, "static": static}
			f := &formatter{units: "h", loc: a.env.loc()}
			return a.runJob(cmd, &jobOpts{quiet: true}, op, func(w io.Writer, res any) error {
				return f.writeInstanceInfo(w, args, res)
			})
		},
	}
	cmd.Flags().BoolVar(&static, "static", false, "show only the configuration, without asking the nodes")
	return cmd
}

// writeInstanceInfo prints OP_INSTANCE_QUERY_DATA's result, a dict by
// instance name, in the order the names were given.
func (f *formatter) writeInstanceInfo(w io.Writer, order []string, res any) error {
	all, _ := res.(map[string]any)
	names := slices.Sorted(maps.Keys(all))
	if len(order) > 0 {
		names = slices.DeleteFunc(slices.Clone(order), func(n string) bool { _, ok := all[n]; return !ok })
		for _, n := range slices.Sorted(maps.Keys(all)) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	var b strings.Builder
	for _, name := range names {
		d, _ := all[name].(map[string]any)
		f.instanceInfo(&b, name, d)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (f *formatter) instanceInfo(b *strings.Builder, name string, d map[string]any) {
	done := map[string]bool{"name": true}
	get := func(k string) any { done[k] = true; return d[k] }
	line(b, "", "Instance name: "+name)
	f.readable(b, "  ", "UUID", get("uuid"))
	f.readable(b, "  ", "Serial number", get("serial_no"))
	f.readable(b, "  ", "Creation time", f.timeOrNil(get("ctime")))
	f.readable(b, "  ", "Modification time", f.timeOrNil(get("mtime")))
	state := fmt.Sprintf("configured to be %s", f.scalar("", get("config_state")))
	if rs := get("run_state"); rs != nil {
		state += ", actual state is " + f.scalar("", rs)
	}
	line(b, "  ", "State: "+state)
	line(b, "  ", "Nodes:")
	primary := f.scalar("", get("pnode"))
	if g := get("pnode_group_name"); g != nil {
		primary += " (group " + f.scalar("", g) + ")"
	}
	get("pnode_group_uuid")
	line(b, "    ", "- primary: "+primary)
	if sn, _ := get("snodes").([]any); len(sn) > 0 {
		line(b, "    ", "- secondaries: "+f.joinScalars(sn))
	}
	get("snodes_group_uuids")
	get("snodes_group_names")
	f.readable(b, "  ", "Operating system", get("os"))
	f.readable(b, "  ", "Hypervisor", get("hypervisor"))
	if p := get("network_port"); p != nil {
		f.readable(b, "  ", "Network port", p)
	}
	f.readable(b, "  ", "Disk template", get("disk_template"))
	f.params(b, "Hypervisor parameters", get("hv_instance"), get("hv_actual"))
	f.params(b, "Back-end parameters", get("be_instance"), get("be_actual"))
	f.params(b, "OS parameters", get("os_instance"), get("os_actual"))

	nics, _ := get("nics").([]any)
	line(b, "  ", "NICs:"+noneIfEmpty(len(nics)))
	for i, n := range nics {
		line(b, "    ", fmt.Sprintf("- nic/%d: %s", i, f.nicText(n)))
	}
	disks, _ := get("disks").([]any)
	line(b, "  ", "Disks:"+noneIfEmpty(len(disks)))
	for i, d := range disks {
		line(b, "    ", fmt.Sprintf("- %s", f.diskText(i, d)))
	}
	if c := get("confinement"); c != nil { // how the node confines the process
		f.readable(b, "  ", "Confinement", c)
	}
	if tags, _ := get("tags").([]any); len(tags) > 0 {
		line(b, "  ", "Tags: "+f.joinScalars(tags))
	} else {
		done["tags"] = true
	}
	f.statusBlock(b, "  ", get("status")) // Corral's, for instances the watcher acted on
	for _, k := range slices.Sorted(maps.Keys(d)) {
		if !done[k] {
			f.readable(b, "  ", k, d[k])
		}
	}
}

func noneIfEmpty(n int) string {
	if n == 0 {
		return " (none)"
	}
	return ""
}

// timeOrNil formats an epoch time for readable output.
func (f *formatter) timeOrNil(v any) any {
	if x, ok := v.(float64); ok {
		return f.time(x)
	}
	return v
}

// params prints the parameters in effect, marking those the instance does
// not set itself as "default (VALUE)".
func (f *formatter) params(b *strings.Builder, title string, custom, actual any) {
	own, _ := custom.(map[string]any)
	eff, _ := actual.(map[string]any)
	keys := slices.Sorted(maps.Keys(eff))
	for k := range own {
		if _, ok := eff[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		line(b, "  ", title+": (none)")
		return
	}
	line(b, "  ", title+":")
	for _, k := range keys {
		if v, ok := own[k]; ok {
			line(b, "    ", k+": "+f.valueText(v))
		} else {
			line(b, "    ", k+": default ("+f.valueText(eff[k])+")")
		}
	}
}

// valueText renders any value on one line.
func (f *formatter) valueText(v any) string {
	switch v.(type) {
	case []any, map[string]any:
		return f.cell(kindOther, v)
	}
	return f.scalar("", v)
}

// nicText renders a NIC as OP_INSTANCE_QUERY_DATA lists it: [name, uuid,
// ip, mac, {mode, link}, ...].
func (f *formatter) nicText(v any) string {
	l, ok := v.([]any)
	if !ok || len(l) < 5 {
		return f.valueText(v)
	}
	// Ganeti's [name, uuid, ip, mac, mode, link, vlan, network, netinfo].
	parts := []string{"MAC: " + f.scalar("", l[3]), "IP: " + f.scalar("", l[2]),
		"mode: " + f.scalar("", l[4])}
	if len(l) > 5 {
		parts = append(parts, "link: "+f.scalar("", l[5]))
	}
	if len(l) > 6 {
		if vlan, _ := l[6].(string); vlan != "" {
			parts = append(parts, "vlan: "+vlan)
		}
	}
	if name, _ := l[0].(string); name != "" {
		parts = append([]string{"name: " + name}, parts...)
	}
	return strings.Join(parts, ", ")
}

// diskText renders a disk dict {iv_name, size, mode, dev_type, ...}.
func (f *formatter) diskText(i int, v any) string {
	d, ok := v.(map[string]any)
	if !ok {
		return fmt.Sprintf("disk/%d: %s", i, f.valueText(v))
	}
	iv, _ := d["iv_name"].(string)
	if iv == "" {
		iv = fmt.Sprintf("disk/%d", i)
	}
	s := iv + ": "
	if t, ok := d["dev_type"].(string); ok && t != "" {
		s += t + ", "
	}
	s += "size " + f.cell(kindUnit, d["size"]) + ", mode " + f.scalar("", d["mode"])
	if n, _ := d["name"].(string); n != "" {
		s += ", name " + n
	}
	return s
}

func (a *app) instanceConsoleCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "console NAME",
		Short: "Attach to an instance's serial console",
		Long: `Attach to an instance's serial console: what you type goes to the instance,
what it prints comes back.`,
		Example: "  corral instance console web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.env.Console == nil {
				return &exitError{code: ExitError, msg: "Failure: the console is not available in this build of corral"}
			}
			return a.env.Console(cmd.Context(), args[0], cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// applyHVBE sets an instance opcode's hypervisor, hvparams and beparams from
// the -H HV[:key=value,...] and -B key=value,... options, when given.
func applyHVBE(op map[string]any, hv, be string) error {
	if hv != "" {
		g, err := parseGroups("-H", []string{hv}, false)
		if err != nil {
			return err
		}
		for name, params := range g {
			op["hypervisor"], op["hvparams"] = name, params
		}
	}
	if be != "" {
		p, err := parseBEParams("-B", be, false)
		if err != nil {
			return err
		}
		op["beparams"] = p
	}
	return nil
}
