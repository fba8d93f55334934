package cli

import (
	"github.com/spf13/cobra"
)

// gnt-cluster's activate-master-ip and deactivate-master-ip: the cluster
// IP on the master's node.

func (a *app) clusterActivateMasterIPCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "activate-master-ip",
		Short: "Put the cluster IP on the master's node",
		Long: `Put the cluster IP (the floating master address set with cluster init or
modify --cluster-ip) on the master network device of the node the master runs
on (OP_CLUSTER_ACTIVATE_MASTER_IP). Nothing changes when it is there already.
The master does this by itself whenever it starts or takes over; this is for
after a deactivate-master-ip. A cluster without a cluster IP refuses it.`,
		Example: "  corral cluster activate-master-ip",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runJob(cmd, &o, map[string]any{"OP_ID": "OP_CLUSTER_ACTIVATE_MASTER_IP"}, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	return cmd
}

func (a *app) clusterDeactivateMasterIPCmd() *cobra.Command {
	var o jobOpts
	var yes bool
	cmd := &cobra.Command{
		Use:   "deactivate-master-ip",
		Short: "Take the cluster IP off the master's node",
		Long: `Take the cluster IP off the master network device of the node the master runs
on (OP_CLUSTER_DEACTIVATE_MASTER_IP), for maintenance of that device.
Connections to the cluster IP break; the master stays reachable on its node's
own address. Without --yes it asks first, on a terminal. The master puts the
address back when it next starts, or with activate-master-ip.`,
		Example: "  corral cluster deactivate-master-ip --yes",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !yes {
				if err := a.confirm(cmd, "This will take the cluster IP off the master's node: open connections to it will break, and the master is then reached at its node's own address."); err != nil {
					return err
				}
			}
			return a.runJob(cmd, &o, map[string]any{"OP_ID": "OP_CLUSTER_DEACTIVATE_MASTER_IP"}, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}
