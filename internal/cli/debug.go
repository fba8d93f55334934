package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

func debugHead() *cobra.Command {
	return newGroup("debug", "Tools for testing and debugging the cluster",
		"  corral debug delay 10\n  corral debug locks\n  corral debug notify my-event")
}

func (a *app) addDebugCommands(c *cobra.Command) {
	c.AddCommand(a.debugDelayCmd(), a.debugLocksCmd(), a.debugNotifyCmd())
}

func (a *app) debugDelayCmd() *cobra.Command {
	var o jobOpts
	var noMaster, interruptible bool
	var nodes []string
	var repeat int
	var wakeEvent string
	cmd := &cobra.Command{
		Use:   "delay [flags] SECONDS",
		Short: "Run a job that only sleeps",
		Long: `Submit a job that sleeps for SECONDS (OP_TEST_DELAY; fractions and 0 are
allowed) on the master and on the given nodes, to test the job queue, locking
and node communication. It takes no locks.

With --wake-event, the job instead waits suspended (no process or lock held,
across master restarts) until the event is delivered with "corral debug
notify" or SECONDS pass.`,
		Example: "  corral debug delay 5\n  corral debug delay --submit --repeat 3 -n node1 -n node2 0.5\n  corral debug delay --no-master -n node2 --interruptible 60",
		Args:    exactArgs(1, "the delay in seconds"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := strconv.ParseFloat(args[0], 64)
			if err != nil || d < 0 || math.IsInf(d, 0) || math.IsNaN(d) {
				return paramErr("invalid delay %q: expected a non-negative number of seconds", args[0])
			}
			if repeat < 0 {
				return paramErr("--repeat must not be negative")
			}
			on := make([]any, len(nodes))
			for i, n := range nodes {
				on[i] = n
			}
			op := map[string]any{
				"OP_ID":         "OP_TEST_DELAY",
				"duration":      d,
				"on_master":     !noMaster,
				"on_nodes":      on,
				"repeat":        repeat,
				"interruptible": interruptible,
			}
			if wakeEvent != "" {
				op["wake_event"] = wakeEvent
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, false)
	f := cmd.Flags()
	f.BoolVar(&noMaster, "no-master", false, "do not sleep on the master")
	f.StringArrayVarP(&nodes, "node", "n", nil, "also sleep on this node (repeatable)")
	f.IntVar(&repeat, "repeat", 0, "sleep this many more times, logging each")
	f.BoolVar(&interruptible, "interruptible", false, "let the job be cancelled while it sleeps")
	f.StringVar(&wakeEvent, "wake-event", "", "wait suspended for this event instead of sleeping (Corral only)")
	return cmd
}

func (a *app) debugNotifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "notify EVENT",
		Short: "Deliver an event to the jobs waiting for it",
		Long: `Wake every job step suspended until EVENT, as an agent calling back or a
machine reporting it booted would. An event no job waits for is dropped.`,
		Example: "  corral debug delay --submit --wake-event my-event 600\n  corral debug notify my-event",
		Args:    exactArgs(1, "the event name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				return c.NotifyEvent(ctx, args[0])
			})
		},
	}
}

// lockInfo is one entry of the DebugLocks answer.
type lockInfo struct {
	Name    string
	Mode    string
	Owners  []string
	Pending []struct {
		Owner    string
		Mode     string
		Priority int
	}
}

func (a *app) debugLocksCmd() *cobra.Command {
	var noHeaders bool
	var sep string
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "Show the locks held and waited for",
		Long: `Show every lock that is held or waited for, in acquisition order: its name,
the mode it is held in, its owners, and who waits for it, each waiter as
OWNER:MODE@PRIORITY. Empty values show as "-".`,
		Example: "  corral debug locks",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var locks []lockInfo
				if err := c.Call(ctx, "DebugLocks", nil, &locks); err != nil {
					return err
				}
				var lines [][]string
				if !noHeaders {
					lines = append(lines, []string{"Name", "Mode", "Owner", "Pending"})
				}
				for _, l := range locks {
					pending := make([]string, len(l.Pending))
					for i, p := range l.Pending {
						pending[i] = fmt.Sprintf("%s:%s@%d", p.Owner, p.Mode, p.Priority)
					}
					lines = append(lines, []string{l.Name, orDash(l.Mode), orDash(strings.Join(l.Owners, ",")), orDash(strings.Join(pending, ","))})
				}
				return writeLines(cmd.OutOrStdout(), lines, make([]bool, 4), sep)
			})
		},
	}
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "do not print the header line")
	cmd.Flags().StringVar(&sep, "separator", "", "join the fields with this string instead of aligning them in columns")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return nullText
	}
	return s
}
