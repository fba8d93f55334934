package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// clusterMasterFailoverCmd moves the master role on purpose: the master
// hands it to the named candidate, or resigns so the candidates elect one,
// then exits and comes back as a standby.
func (a *app) clusterMasterFailoverCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "master-failover [--to NAME]",
		Short: "Move the master role to another master candidate",
		Long: `Ask the master to give up its role (MasterFailover). With --to, the master
hands the role to that candidate and the others let it win; without it the
master resigns and the standing-by candidates elect a new master. The old
master stops and, restarted by its supervisor, stands by. Running jobs are
taken over by the new master. Only clusters whose store is on etcd have
master candidates.`,
		Example: "  corral cluster master-failover\n  corral cluster master-failover --to node2",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var arg any
				if to != "" {
					arg = to
				}
				var msg string
				if err := c.Call(ctx, "MasterFailover", []any{arg}, &msg); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), msg)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "the master candidate that should become master")
	return cmd
}
