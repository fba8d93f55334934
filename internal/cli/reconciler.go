package cli

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// clusterReconcilerCmd is `corral cluster reconciler`: corrald's periodic
// reconcilers, each with its own pause switch (Corral only).
func (a *app) clusterReconcilerCmd() *cobra.Command {
	r := newGroup("reconciler", "List, pause or resume the master's reconcilers",
		"  corral cluster reconciler list\n  corral cluster reconciler pause left-disk-removal --for 2h\n  corral cluster reconciler resume left-disk-removal",
		"reconcilers")
	r.AddCommand(a.reconcilerListCmd(), a.reconcilerPauseCmd(), a.reconcilerResumeCmd())
	return r
}

func (a *app) reconcilerListCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the reconcilers, their intervals, pauses and counters",
		Long: `Show the master's periodic reconcilers: how often each runs, whether it is
paused and until when, when its last round started, and how many rounds it
ran, how many of them failed and how many jobs it submitted since the master
started. "(watcher)" marks a reconciler the watcher pause holds
(corral cluster watcher pause), which holds them all.`,
		Example: "  corral cluster reconciler list\n  corral cluster reconciler list --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				states, err := c.QueryReconcilers(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					b, err := json.MarshalIndent(states, "", "  ")
					if err != nil {
						return err
					}
					_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
					return err
				}
				return writeLines(cmd.OutOrStdout(), a.reconcilerLines(states), []bool{false, false, false, false, true, true, true}, "")
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the reconcilers as JSON")
	return cmd
}

// reconcilerLines is the table of reconciler list, with its header.
func (a *app) reconcilerLines(states []luxi.ReconcilerState) [][]string {
	lines := [][]string{{"Name", "Interval", "PausedUntil", "LastRun", "Runs", "Errors", "Jobs"}}
	for _, s := range states {
		interval := "never"
		if s.Interval > 0 {
			interval = (time.Duration(s.Interval * float64(time.Second))).String()
		}
		pausedUntil := "-"
		if s.PausedUntil != nil {
			pausedUntil = a.pauseEnd(*s.PausedUntil)
		}
		if s.WatcherPaused {
			if pausedUntil == "-" {
				pausedUntil = "(watcher)"
			} else {
				pausedUntil += " (watcher)"
			}
		}
		lastRun := "-"
		if s.LastRun != nil {
			lastRun = a.formatEpoch(*s.LastRun)
		}
		lines = append(lines, []string{s.Name, interval, pausedUntil, lastRun,
			strconv.FormatUint(s.Runs, 10), strconv.FormatUint(s.Errors, 10), strconv.FormatUint(s.JobsSubmitted, 10)})
	}
	return lines
}

// pauseEnd prints when a reconciler's pause ends (0: until resumed).
func (a *app) pauseEnd(until float64) string {
	if until == 0 {
		return "resumed"
	}
	return a.formatEpoch(until)
}

func (a *app) reconcilerPauseCmd() *cobra.Command {
	var duration string
	cmd := &cobra.Command{
		Use:   "pause NAME [--for DURATION]",
		Short: "Pause one reconciler",
		Long: `Pause the named reconciler until it is resumed, or for DURATION: seconds, or a
number with a suffix s, m, h, d or w. The pause is kept in the cluster
configuration: it holds across master restarts and failovers. The other
reconcilers go on; the watcher pause holds them all.`,
		Example: "  corral cluster reconciler pause pending-import-sweep\n  corral cluster reconciler pause left-disk-removal --for 2h",
		Args:    exactArgs(1, "a reconciler name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			until := 0.0
			if duration != "" {
				secs, err := parseTimespec(duration)
				if err != nil {
					return err
				}
				until = float64(a.env.now().Unix() + secs)
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if err := c.SetReconcilerPause(ctx, args[0], &until); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Reconciler %s is paused until %s.\n", args[0], a.pauseEnd(until))
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&duration, "for", "", "pause it for this long instead of until it is resumed")
	return cmd
}

func (a *app) reconcilerResumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "resume NAME",
		Short:   "Resume a paused reconciler",
		Example: "  corral cluster reconciler resume left-disk-removal",
		Args:    exactArgs(1, "a reconciler name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				if err := c.SetReconcilerPause(ctx, args[0], nil); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Reconciler %s is no longer paused.\n", args[0])
				return nil
			})
		},
	}
}
