package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// Ganeti's result status codes (constants.RS_*) as gnt-node prints them.
var oobStatusText = map[int]string{1: "(unknown)", 2: "(no data)", 3: "(unavail)", 4: "(offline)"}

// nodePowerCmd is gnt-node power: OP_OOB_COMMAND through the nodes'
// bare-metal machines.
func (a *app) nodePowerCmd() *cobra.Command {
	var o jobOpts
	var yes, ignoreStatus bool
	var timeout int
	var delay float64
	cmd := &cobra.Command{
		Use:   "power on|off|cycle|status [NODE...]",
		Short: "Power nodes on, off or cycle them, or show their power, through their machines",
		Long: `Run an out-of-band power command (OP_OOB_COMMAND) as gnt-node power does:
on, off and cycle drive the BMC of the bare-metal machine each node's node
parameter "machine" names, one node after the other (--power-delay seconds
apart for on); status reads the BMCs. A node without a machine shows
"(unavail)". off and cycle need node names, never take the master's node,
and ask first unless --yes-do-it; off marks the nodes offline in the same
job first unless --ignore-status. Without names, on and status act on
every node.`,
		Example: "  corral node modify node2 -N machine=rack1-u12\n  corral node power status node2\n  corral node power off --yes-do-it node2",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sub, nodes := args[0], args[1:]
			switch sub {
			case "on", "status":
			case "off", "cycle":
				if len(nodes) == 0 {
					return usagef("power %s needs at least one node", sub)
				}
				if !yes {
					if err := a.confirm(cmd, fmt.Sprintf("Are you sure you want to power %s nodes %s?", sub, strings.Join(nodes, ", "))); err != nil {
						return err
					}
				}
			default:
				return usagef("power subcommand %s not supported: use on, off, cycle or status", sub)
			}
			var ops []any
			if sub == "off" && !ignoreStatus {
				for _, n := range nodes {
					ops = append(ops, map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": n, "offline": true})
				}
			}
			ops = append(ops, map[string]any{"OP_ID": "OP_OOB_COMMAND", "node_names": stringsToAny(nodes),
				"command": "power-" + sub, "ignore_status": ignoreStatus, "timeout": timeout, "power_delay": delay})
			return a.runOOB(cmd, &o, ops, func(data any) string {
				if sub != "status" {
					return "invoked"
				}
				if m, _ := data.(map[string]any); m["powered"] == true {
					return "powered"
				}
				return "unpowered"
			})
		},
	}
	addJobFlags(cmd, &o, false)
	f := cmd.Flags()
	f.BoolVar(&yes, "yes-do-it", false, "do not ask for confirmation")
	f.BoolVar(&ignoreStatus, "ignore-status", false, "power off nodes without marking them offline first")
	f.IntVar(&timeout, "oob-timeout", 60, "seconds to wait for each node's machine")
	f.Float64Var(&delay, "power-delay", 2, "seconds between powering on two nodes")
	return cmd
}

// nodeHealthCmd is gnt-node health: the BMC's state of each node's
// machine.
func (a *app) nodeHealthCmd() *cobra.Command {
	var o jobOpts
	var timeout int
	cmd := &cobra.Command{
		Use:   "health [NODE...]",
		Short: "Show the health of nodes' out-of-band control",
		Long: `Read the BMC of each node's bare-metal machine (OP_OOB_COMMAND health), as
gnt-node health does: "bmc" is OK when the BMC answers, CRITICAL when it
does not, WARNING when the machine is in maintenance; "power-sync" is
WARNING when the BMC reported a power state Corral did not expect. A node
without a machine shows "(unavail)". Without names: every node.`,
		Example: "  corral node health node2",
		RunE: func(cmd *cobra.Command, args []string) error {
			op := map[string]any{"OP_ID": "OP_OOB_COMMAND", "node_names": stringsToAny(args), "command": "health", "timeout": timeout}
			return a.runOOB(cmd, &o, []any{op}, func(data any) string {
				var items []string
				l, _ := data.([]any)
				for _, it := range l {
					if p, _ := it.([]any); len(p) == 2 {
						items = append(items, fmt.Sprintf("%v=%v", p[0], p[1]))
					}
				}
				return strings.Join(items, ", ")
			})
		},
	}
	addJobFlags(cmd, &o, false)
	cmd.Flags().IntVar(&timeout, "oob-timeout", 60, "seconds to wait for the BMCs")
	return cmd
}

// runOOB runs a job whose last op is OP_OOB_COMMAND and prints one line
// per node, text rendering a node's data; any node without data fails the
// command.
func (a *app) runOOB(cmd *cobra.Command, o *jobOpts, ops []any, text func(data any) string) error {
	if o.priority != "" {
		p, err := parsePriority(o.priority)
		if err != nil {
			return err
		}
		for _, op := range ops {
			op.(map[string]any)["priority"] = p
		}
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	return a.env.withClient(ctx, func(c *luxi.Client) error {
		id, err := c.SubmitJob(ctx, ops)
		if err != nil {
			return err
		}
		if o.submit {
			fmt.Fprintf(out, "JobID: %d\n", id)
			return nil
		}
		_, res, err := a.follow(cmd, c, id, o.quiet)
		if err != nil {
			return err
		}
		if len(res) == 0 {
			return fmt.Errorf("job %d has no result", id)
		}
		b, err := json.Marshal(res[len(res)-1])
		if err != nil {
			return fmt.Errorf("reading the job result: %w", err)
		}
		var rows [][2][2]any
		if err := json.Unmarshal(b, &rows); err != nil {
			return fmt.Errorf("the job result %s is not a list of node results: %w", b, err)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 1, ' ', 0)
		fmt.Fprintln(tw, "Node\tStatus")
		bad := 0
		for _, r := range rows {
			status, _ := r[1][0].(float64)
			line := text(r[1][1])
			if status != 0 {
				bad++
				line = oobStatusText[int(status)]
			}
			fmt.Fprintf(tw, "%v\t%s\n", r[0][1], line)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if bad > 0 {
			return fmt.Errorf("%d of %d nodes gave no answer", bad, len(rows))
		}
		return nil
	})
}

func stringsToAny(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}
