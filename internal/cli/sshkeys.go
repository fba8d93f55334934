package cli

import (
	"github.com/spf13/cobra"
)

// sshModifyFlags are cluster modify's SSH settings.
func sshModifyFlags() yesNoFlags {
	return yesNoFlags{
		{flag: "modify-ssh-setup", param: "modify_ssh_setup", usage: "yes|no: whether Corral manages the nodes' SSH keys and authorized_keys"},
		{flag: "master-capability-rapi-modifiable", param: "master_capability_rapi_modifiable",
			usage: "yes|no: whether RAPI may change master_capable; when no, only master capable nodes are potential master candidates"},
		{flag: "auto-failover", param: "auto_failover",
			usage: "yes|no: whether the watcher fails over the instances of a node declared offline (off by default)"},
	}
}

// addSSHKeyFlags adds --ssh-key-type and --ssh-key-bits.
func addSSHKeyFlags(cmd *cobra.Command) {
	cmd.Flags().String("ssh-key-type", "", "type of the nodes' SSH keys: rsa, ecdsa or ed25519")
	cmd.Flags().Int("ssh-key-bits", 0, "size of the nodes' SSH keys (rsa: 2048 or more; ecdsa: 256, 384 or 521)")
}

// fillSSHKeyFlags copies --ssh-key-type and --ssh-key-bits into op.
func fillSSHKeyFlags(cmd *cobra.Command, op map[string]any) error {
	fl := cmd.Flags()
	if fl.Changed("ssh-key-type") {
		t, _ := fl.GetString("ssh-key-type")
		switch t {
		case "rsa", "ecdsa", "ed25519":
		default:
			return paramErr("--ssh-key-type must be rsa, ecdsa or ed25519, not %q", t)
		}
		op["ssh_key_type"] = t
	}
	if fl.Changed("ssh-key-bits") {
		b, _ := fl.GetInt("ssh-key-bits")
		if b < 1 {
			return paramErr("--ssh-key-bits must be positive")
		}
		op["ssh_key_bits"] = b
	}
	return nil
}

func (a *app) clusterUpgradeSSHCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "upgrade-ssh",
		Short: "Give every node its own SSH key pair instead of a shared one",
		Long: `Move a cluster whose nodes share one SSH key pair to per-node pairs, as in
Ganeti's node-security design (OP_CLUSTER_RENEW_CRYPTO with renew_ssh_keys
and upgrade_ssh). In one job:

  1. every online node makes a new pair, beside the shared one;
  2. the public-key file of potential master candidates lists the new keys,
     and every node's authorized_keys trusts the new keys of the master and
     the master candidates next to the shared key;
  3. each node switches to its new pair;
  4. the shared key is removed from every authorized_keys, inside and
     outside the block Corral manages.

The master can reach every node at each moment. Offline nodes are skipped:
run it again once they are back online.

To go back to one shared pair (downgrade): copy the master's pair
(<ssh-dir>/id_<type> and .pub) to every node, add its public key to every
node's authorized_keys outside the "corral cluster keys" block, then
'corral cluster modify --modify-ssh-setup no' and remove the block and the
public-key file (ssh_pub_keys in each node daemon's state directory); keep
the per-node pairs as a backup.`,
		Example: "  corral cluster upgrade-ssh\n  corral cluster upgrade-ssh --ssh-key-type ed25519",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			op := map[string]any{"OP_ID": "OP_CLUSTER_RENEW_CRYPTO", "renew_ssh_keys": true, "upgrade_ssh": true}
			if err := fillSSHKeyFlags(cmd, op); err != nil {
				return err
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, false)
	addSSHKeyFlags(cmd)
	return cmd
}
