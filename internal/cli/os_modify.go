package cli

import (
	"github.com/spf13/cobra"
)

// osModifyCmd is Ganeti's gnt-os modify: per-OS hypervisor and OS
// parameters and the hidden and blacklisted marks, all through
// OP_CLUSTER_SET_PARAMS as Ganeti does.
func (a *app) osModifyCmd() *cobra.Command {
	var hvSpecs []string
	var osp, hidden, blacklisted string
	cmd := a.jobCmd(&cobra.Command{
		Use:   "modify OS",
		Short: "Change an OS's hypervisor and OS parameters, hide or blacklist it",
		Long: `Change the cluster's settings for one OS (or OS+variant) through
OP_CLUSTER_SET_PARAMS, as gnt-os modify does:
  -H HV:key=val,...   hypervisor parameters instances of this OS get over the
                      cluster's for HV ("-key" resets one); repeatable
  -O key=val,...      the cluster's OS parameters for this OS ("-key" resets)
  --hidden yes|no     hide it from "corral os list" (it stays installable)
  --blacklisted yes|no  refuse new installations of it (existing instances
                      keep it)`,
		Example: "  corral os modify debootstrap -H kvm:kernel_args=console=ttyS0\n" +
			"  corral os modify debootstrap+bookworm -O mirror=http://deb.example.com/debian\n" +
			"  corral os modify oldos --blacklisted yes",
		Args: exactArgs(1, "the OS name"),
	}, func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		name := args[0]
		op := map[string]any{"OP_ID": "OP_CLUSTER_SET_PARAMS"}
		fl := cmd.Flags()
		if len(hvSpecs) > 0 {
			v, err := parseGroups("-H", hvSpecs, true)
			if err != nil {
				return nil, nil, err
			}
			op["os_hvp"] = map[string]any{name: v}
		}
		if fl.Changed("os-parameters") {
			v, err := parseParams("-O", osp, true)
			if err != nil {
				return nil, nil, err
			}
			op["osparams"] = map[string]any{name: v}
		}
		for _, f := range []struct{ flag, param, val string }{
			{"hidden", "hidden_os", hidden}, {"blacklisted", "blacklisted_os", blacklisted}} {
			if !fl.Changed(f.flag) {
				continue
			}
			on, err := parseYesNo(f.flag, f.val)
			if err != nil {
				return nil, nil, err
			}
			action := "remove"
			if on {
				action = "add"
			}
			op[f.param] = []any{[]any{action, name}}
		}
		if len(op) == 1 {
			return nil, nil, paramErr("At least one of OS parameters or hypervisor parameters must be passed")
		}
		return op, nil, nil
	})
	fl := cmd.Flags()
	fl.StringArrayVarP(&hvSpecs, "hypervisor-parameters", "H", nil, "HV:key=val,...: hypervisor parameters for instances of this OS")
	fl.StringVarP(&osp, "os-parameters", "O", "", "key=val,...: the cluster's OS parameters for this OS")
	fl.StringVar(&hidden, "hidden", "", "yes|no: hide the OS from listings")
	fl.StringVar(&blacklisted, "blacklisted", "", "yes|no: refuse new installations of the OS")
	return cmd
}
