package cli

import (
	"github.com/spf13/cobra"
)

// instanceRescueCmds are corral instance rescue and unrescue (Corral only).
func (a *app) instanceRescueCmds() []*cobra.Command {
	return []*cobra.Command{a.instanceRescueCmd(), a.instanceUnrescueCmd()}
}

func (a *app) instanceRescueCmd() *cobra.Command {
	var o jobOpts
	var pw rescuePassword
	var timeout int
	cmd := &cobra.Command{
		Use:   "rescue NAME",
		Short: "Start a kvm instance on the rescue ramdisk, its disks attached",
		Long: `Stop the instance and start it on the rescue ramdisk of its node (the bare-metal
agent's, corral-node --agent-ramdisk) with its own disks and NICs
(OP_INSTANCE_RESCUE, Corral only). User "rescue" (uid 0) logs in on the serial
console (corral instance console NAME) with the given password, or with SSH on
the address the instance's NIC gets by DHCP, with the password or one of the
--ssh-public-key keys. The password is hashed here (crypt SHA-256, or SHA-512
with --hash sha512): only the hash leaves this command, and the node removes it
at unrescue. Without --rescue-password or --rescue-password-file the password
is asked for on the terminal, not echoed. corral instance unrescue NAME starts
the instance's own system again.

While the instance is in rescue (instance info: Status rescue; instance list
-o name,rescue_state), start, reboot, reinstall, new hypervisor parameters and
export are refused ("unrescue it first"); shutdown is allowed, and unrescue
then starts its own system.`,
		Example: "  corral instance rescue web1 --rescue-password-file pw.txt --ssh-public-key ~/.ssh/id_ed25519.pub\n  corral instance rescue web1   # asks for the password",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_RESCUE", "instance_name": args[0]}
			if cmd.Flags().Changed("shutdown-timeout") {
				if timeout < 0 {
					return paramErr("--shutdown-timeout must not be negative")
				}
				op["shutdown_timeout"] = timeout
			}
			hash, keys, err := pw.resolve(a, cmd)
			if err != nil {
				return err
			}
			op["rescue_password_hash"] = hash
			if len(keys) > 0 {
				op["ssh_public_keys"] = keys
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	pw.flags(cmd)
	cmd.Flags().IntVar(&timeout, "shutdown-timeout", 120, "seconds the running instance has to power off before it is stopped hard")
	return cmd
}

func (a *app) instanceUnrescueCmd() *cobra.Command {
	var o jobOpts
	var timeout int
	cmd := &cobra.Command{
		Use:   "unrescue NAME",
		Short: "Start a rescued instance's own system again",
		Long: `Stop the rescue ramdisk, remove the instance's rescue files from its node and
start the instance's own system (OP_INSTANCE_UNRESCUE, Corral only).`,
		Example: "  corral instance unrescue web1",
		Args:    exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_INSTANCE_UNRESCUE", "instance_name": args[0]}
			if cmd.Flags().Changed("shutdown-timeout") {
				if timeout < 0 {
					return paramErr("--shutdown-timeout must not be negative")
				}
				op["shutdown_timeout"] = timeout
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	cmd.Flags().IntVar(&timeout, "shutdown-timeout", 120, "seconds the rescue ramdisk has to power off before it is stopped hard")
	return cmd
}
