package cli

import (
	"bufio"
	"fmt"
	"github.com/corral/corral/internal/kvopts"
	"strings"

	"github.com/spf13/cobra"
)

// instanceOpCmds are the instance commands that submit one opcode on a
// named instance.
func (a *app) instanceOpCmds() []*cobra.Command {
	return []*cobra.Command{a.instanceStartupCmd(), a.instanceShutdownCmd(), a.instanceRebootCmd(),
		a.instanceRemoveCmd(), a.instanceReinstallCmd(), a.instanceRenameCmd(), a.instanceModifyCmd(),
		a.instanceMigrateCmd(), a.instanceFailoverCmd()}
}

func (a *app) instanceStartupCmd() *cobra.Command {
	var o jobOpts
	var hv, be string
	var noRemember, paused bool
	cmd := &cobra.Command{
		Use:     "startup NAME",
		Aliases: []string{"start"},
		Short:   "Start an instance",
		Long: `Start an instance (OP_INSTANCE_STARTUP) and mark it to be up. -H and -B give
parameters for this start only, without changing the configuration.`,
		Example: "  corral instance startup web1\n  corral instance start web1 -B memory=4G",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": args[0]}
			var err error
			if hv != "" {
				if op["hvparams"], err = parseParams("-H", hv, false); err != nil {
					return err
				}
			}
			if be != "" {
				if op["beparams"], err = parseBEParams("-B", be, false); err != nil {
					return err
				}
			}
			if noRemember {
				op["no_remember"] = true
			}
			if paused {
				op["startup_paused"] = true
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&hv, "hypervisor-parameters", "H", "", "hypervisor parameters for this start only: key=value,...")
	f.StringVarP(&be, "backend-parameters", "B", "", "backend parameters for this start only: memory=SIZE,vcpus=N,...")
	f.BoolVar(&noRemember, "no-remember", false, "do not record that the instance should be up")
	f.BoolVar(&paused, "paused", false, "start the instance with its CPUs paused")
	return cmd
}

func (a *app) instanceShutdownCmd() *cobra.Command {
	var o jobOpts
	var timeout int
	var force, noRemember bool
	cmd := &cobra.Command{
		Use:     "shutdown NAME",
		Aliases: []string{"stop"},
		Short:   "Stop an instance",
		Long: `Stop an instance (OP_INSTANCE_SHUTDOWN) and mark it to be down: ask it to power
off, and stop it hard when it has not within --timeout seconds.`,
		Example: "  corral instance shutdown web1\n  corral instance stop --timeout 30 web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": args[0]}
			if cmd.Flags().Changed("timeout") {
				if timeout < 0 {
					return paramErr("--timeout must not be negative")
				}
				op["timeout"] = timeout
			}
			if force {
				op["force"] = true
			}
			if noRemember {
				op["no_remember"] = true
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.IntVar(&timeout, "timeout", 120, "seconds to wait for a clean shutdown before stopping the instance hard")
	f.BoolVarP(&force, "force", "f", false, "skip the checks that would refuse the shutdown")
	f.BoolVar(&noRemember, "no-remember", false, "do not record that the instance should be down")
	return cmd
}

func (a *app) instanceRebootCmd() *cobra.Command {
	var o jobOpts
	var rebootType string
	var timeout int
	cmd := &cobra.Command{
		Use:   "reboot NAME",
		Short: "Reboot an instance",
		Long: `Reboot an instance (OP_INSTANCE_REBOOT): soft asks the guest to reboot, hard
resets it, full stops and starts it again.`,
		Example: "  corral instance reboot web1\n  corral instance reboot --type hard web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch rebootType {
			case "soft", "hard", "full":
			default:
				return paramErr("invalid --type %q (soft, hard or full)", rebootType)
			}
			op := map[string]any{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": args[0], "reboot_type": rebootType}
			if cmd.Flags().Changed("shutdown-timeout") {
				op["shutdown_timeout"] = timeout
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVar(&rebootType, "type", "soft", "reboot type: soft, hard or full")
	f.IntVar(&timeout, "shutdown-timeout", 120, "seconds to wait for a clean shutdown (full reboot)")
	return cmd
}

func (a *app) instanceRemoveCmd() *cobra.Command {
	var o jobOpts
	var ignoreFailures, force bool
	var timeout int
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Remove an instance and its disks",
		Long: `Remove an instance (OP_INSTANCE_REMOVE), stopping it first, and destroy its
disks. It asks for confirmation on a terminal; without a terminal it refuses
unless -f is given.`,
		Example: "  corral instance remove web1\n  corral instance remove -f web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !force {
				if err := a.confirm(cmd, fmt.Sprintf("This will remove the instance %s and destroy all its data.", args[0])); err != nil {
					return err
				}
			}
			op := map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": args[0]}
			if ignoreFailures {
				op["ignore_failures"] = true
			}
			if cmd.Flags().Changed("shutdown-timeout") {
				op["shutdown_timeout"] = timeout
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.BoolVar(&ignoreFailures, "ignore-failures", false, "remove the instance from the configuration even if its disks cannot be removed")
	f.BoolVarP(&force, "force", "f", false, "do not ask for confirmation")
	f.IntVar(&timeout, "shutdown-timeout", 120, "seconds to wait for a clean shutdown")
	return cmd
}

func (a *app) instanceReinstallCmd() *cobra.Command {
	var o jobOpts
	var osType, osp, ospPriv string
	var forceVariant, force bool
	cmd := &cobra.Command{
		Use:   "reinstall NAME",
		Short: "Reinstall an instance's OS",
		Long: `Reinstall the OS of a stopped instance (OP_INSTANCE_REINSTALL), erasing its
disks' contents, optionally with another OS or OS parameters. It asks for
confirmation on a terminal; without a terminal it refuses unless -f is given.`,
		Example: "  corral instance reinstall -f web1\n  corral instance reinstall -o debootstrap+trixie -O dhcp=yes web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": args[0]}
			if osType != "" {
				op["os_type"] = osType
			}
			if osp != "" {
				p, err := parseParams("-O", osp, false)
				if err != nil {
					return err
				}
				op["osparams"] = p
			}
			if ospPriv != "" {
				p, err := parseParams("--os-parameters-private", ospPriv, false)
				if err != nil {
					return err
				}
				op["osparams_private"] = p
			}
			if forceVariant {
				op["force_variant"] = true
			}
			if !force {
				if err := a.confirm(cmd, fmt.Sprintf("This will reinstall the instance %s and erase all its data.", args[0])); err != nil {
					return err
				}
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&osType, "os-type", "o", "", "install this OS (OS or OS+variant) instead of the current one")
	f.StringVarP(&osp, "os-parameters", "O", "", "OS parameters: key=value,...")
	f.StringVar(&ospPriv, "os-parameters-private", "", "private OS parameters: key=value,... (kept out of job results, logs and queries)")
	f.BoolVar(&forceVariant, "force-variant", false, "accept an OS variant the OS does not declare")
	f.BoolVarP(&force, "force", "f", false, "do not ask for confirmation")
	return cmd
}

func (a *app) instanceRenameCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:     "rename NAME NEW_NAME",
		Short:   "Rename a stopped instance",
		Long:    "Rename a stopped instance (OP_INSTANCE_RENAME).",
		Example: "  corral instance rename web1 web-frontend1",
		Args:    exactArgs(2, "the instance name and its new name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": args[0], "new_name": args[1]}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	return cmd
}

func (a *app) instanceModifyCmd() *cobra.Command {
	var o jobOpts
	var hv, be, osp, ospPriv, osName, template string
	var forceVariant, force, ignoreIPolicy, hotplug, hotplugIfPossible bool
	var disks, nets []string
	var runtimeMem, newPrimary string
	cmd := &cobra.Command{
		Use:   "modify [flags] NAME",
		Short: "Change an instance's parameters",
		Long: `Change an instance's parameters (OP_INSTANCE_SET_PARAMS) and print what changed.
In -H, -B and -O, "-key" drops the instance's own value so the cluster default
applies again. Most changes take effect at the next start.

--disk and --net add, remove and change devices: "add:size=1G" or "add:link=br0"
adds one at the end, "N:add,..." at index N, "N:remove" removes device N,
"N:mode=ro" or "N:modify,ip=192.0.2.7" changes it. With --hotplug a running kvm
instance gets the change at once; otherwise it takes effect at the next start.
-m sets the memory of the running instance (balloon), within minmem..maxmem.`,
		Example: "  corral instance modify -B memory=2G,vcpus=2 web1\n  corral instance modify --hotplug --disk add:size=1G --net add:link=br0 web1\n  corral instance modify --hotplug --disk 1:remove web1\n  corral instance modify -m 512M web1\n  corral instance modify -H -kernel_path web1\n  corral instance modify --os-type debootstrap+trixie web1\n  corral instance modify -t rbd web1   # stopped; copies the disks into Ceph",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": args[0]}
			var err error
			if hv != "" {
				if op["hvparams"], err = parseParams("-H", hv, true); err != nil {
					return err
				}
			}
			if be != "" {
				if op["beparams"], err = parseBEParams("-B", be, true); err != nil {
					return err
				}
			}
			if osp != "" {
				if op["osparams"], err = parseParams("-O", osp, true); err != nil {
					return err
				}
			}
			if ospPriv != "" {
				if op["osparams_private"], err = parseParams("--os-parameters-private", ospPriv, true); err != nil {
					return err
				}
			}
			if osName != "" {
				op["os_name"] = osName
			}
			if template != "" {
				op["disk_template"] = template
			}
			if len(disks) > 0 {
				if op["disks"], err = parseDevModFlags("--disk", disks, true); err != nil {
					return err
				}
			}
			if len(nets) > 0 {
				if op["nics"], err = parseDevModFlags("--net", nets, false); err != nil {
					return err
				}
			}
			if newPrimary != "" {
				op["pnode"] = newPrimary
			}
			if runtimeMem != "" {
				n, err := kvopts.ParseUnitMiB(runtimeMem)
				if err != nil {
					return flagErr("--runtime-memory", err)
				}
				op["runtime_mem"] = n
			}
			if len(op) == 2 {
				return usagef("give at least one parameter to change")
			}
			if forceVariant {
				op["force_variant"] = true
			}
			if force {
				op["force"] = true
			}
			if ignoreIPolicy {
				op["ignore_ipolicy"] = true
			}
			if hotplug {
				op["hotplug"] = true
			}
			if hotplugIfPossible {
				op["hotplug_if_possible"] = true
			}
			return a.runJob(cmd, &o, op, changesPrinter("instance", args[0]))
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&hv, "hypervisor-parameters", "H", "", "hypervisor parameters: key=value,...; -key resets")
	f.StringVarP(&be, "backend-parameters", "B", "", "backend parameters: memory=SIZE,vcpus=N,...; -key resets")
	f.StringVarP(&osp, "os-parameters", "O", "", "OS parameters: key=value,...; -key resets")
	f.StringVar(&ospPriv, "os-parameters-private", "", "private OS parameters: key=value,...; -key resets (values never shown)")
	f.StringVar(&osName, "os-type", "", "change the instance's OS (used at the next reinstall)")
	f.StringVarP(&template, "disk-template", "t", "", "convert a stopped instance's disks to this template (file or rbd)")
	f.BoolVar(&forceVariant, "force-variant", false, "accept an OS variant the OS does not declare")
	f.BoolVarP(&force, "force", "f", false, "skip the free memory check of the primary node")
	f.BoolVar(&ignoreIPolicy, "ignore-ipolicy", false, "accept memory, vcpus and spindle use outside the instance policy")
	f.StringArrayVar(&disks, "disk", nil, "add, remove or change a disk: add:size=SIZE[,mode=rw|ro,name=N], N:remove, N:mode=ro (repeatable)")
	f.StringArrayVar(&nets, "net", nil, "add, remove or change a NIC: add[:mode=M,link=L,ip=IP,mac=MAC], add:network=NAME,ip=pool|IP, N:remove, N:ip=IP, N:network=NAME|none,ip=pool|IP (repeatable)")
	f.BoolVar(&hotplug, "hotplug", false, "apply disk and NIC changes to the running instance at once (kvm)")
	f.BoolVar(&hotplugIfPossible, "hotplug-if-possible", false, "hotplug where the instance allows it, else change at the next start")
	f.StringVarP(&runtimeMem, "runtime-memory", "m", "", "memory of the running instance (balloon), e.g. 512M")
	f.StringVar(&newPrimary, "new-primary", "", "new primary node of a stopped sharedfile, rbd or diskless instance")
	return cmd
}

// confirm asks a yes/no question on a terminal. Without a terminal there is
// nobody to ask, so it refuses, as Ganeti's tools do.
func (a *app) confirm(cmd *cobra.Command, question string) error {
	in := cmd.InOrStdin()
	if !a.env.isTerminal(in) {
		return &exitError{code: ExitError, msg: "Failure: " + question + "\nNot asking for confirmation without a terminal: add -f to go ahead."}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s\nContinue? y/[n]: ", question)
	answer, _ := bufio.NewReader(in).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	return &exitError{code: ExitError, msg: "Aborted."}
}
