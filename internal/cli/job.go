package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

func defaultJobFields() []string { return []string{"id", "status", "summary"} }

// jobInfoFields are what `job info` asks for.
func jobInfoFields() []string {
	return []string{"id", "status", "priority", "received_ts", "start_ts", "end_ts",
		"ops", "opstatus", "opresult", "oplog", "opstart", "opexec", "opend"}
}

// jobTimeLayout shows job times to the microsecond, as Ganeti does.
const jobTimeLayout = "2006-01-02 15:04:05.000000"

func jobHead() *cobra.Command {
	return newGroup("job", "Inspect and control jobs",
		"  corral job list --running\n  corral job watch 42\n  corral job cancel 42")
}

func (a *app) addJobCommands(c *cobra.Command) {
	c.AddCommand(a.jobListCmd(), a.jobInfoCmd(), a.jobWatchCmd(), a.jobCancelCmd(), a.jobArchiveCmd(),
		a.jobAutoArchiveCmd(), a.jobChangePriorityCmd(), a.listFieldsCmd("job", "job", "jobs"))
}

func (a *app) jobListCmd() *cobra.Command {
	var o listOpts
	var sel jobStatusSelection
	cmd := &cobra.Command{
		Use:     "list [ID...]",
		Aliases: []string{"ls"},
		Short:   "List jobs",
		Long: `List the jobs in the queue (not the archived ones) in a table: all, the
ones with the ids given, or those a query filter selects (-F).

Fields: id, status, priority, summary, ops, opstatus, opresult, oplog,
opstart, opexec, opend, oppriority, received_ts, start_ts, end_ts, archived
(corral job list-fields describes them).`,
		Example: "  corral job list\n  corral job list --running -o id,summary,start_ts\n  corral job list --error --no-headers --separator ' '\n" +
			"  corral job list -F 'id > 100 and status == \"error\"'",
		RunE: func(cmd *cobra.Command, args []string) error {
			want, err := sel.statuses()
			if err != nil {
				return err
			}
			fields, err := selectFields(o.output, defaultJobFields())
			if err != nil {
				return err
			}
			f, err := a.newFormatter(&o)
			if err != nil {
				return err
			}
			flt, err := o.listFilter(args, "id", true)
			if err != nil {
				return err
			}
			var ids []int64
			if flt == nil {
				for _, arg := range args {
					id, err := strconv.ParseInt(arg, 10, 64)
					if err != nil {
						return paramErr("Invalid job ID passed: %s", arg)
					}
					ids = append(ids, id)
				}
			}
			query := fields
			statusAt := slices.Index(fields, "status")
			if want != nil && statusAt < 0 {
				query = append(slices.Clone(fields), "status")
				statusAt = len(fields)
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var rows [][]any
				if flt != nil {
					rows, err = queryFiltered(ctx, c, "job", query, flt)
				} else {
					rows, err = c.QueryJobs(ctx, ids, query)
				}
				if err != nil {
					return err
				}
				var shown [][]any
				for _, r := range rows {
					if r == nil || len(r) != len(query) {
						continue
					}
					if want != nil {
						st, _ := r[statusAt].(string)
						if !slices.Contains(want, st) {
							continue
						}
					}
					shown = append(shown, r[:len(fields)])
				}
				return f.writeTable(cmd.OutOrStdout(), &o, jobField, fields, shown)
			})
		},
	}
	addListFlags(cmd, &o, defaultJobFields(), false)
	sel.addFlags(cmd)
	return cmd
}

// jobStatusSelection is job list's --running, --pending, ... flags.
type jobStatusSelection struct {
	running, pending, finished, failed, queued, waiting, succeeded bool
}

func (s *jobStatusSelection) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&s.running, "running", false, "show only running jobs")
	fl.BoolVar(&s.pending, "pending", false, "show only jobs pending execution or being canceled (queued, waiting or canceling)")
	fl.BoolVar(&s.queued, "queued", false, "show only queued jobs")
	fl.BoolVar(&s.waiting, "waiting", false, "show only jobs waiting for locks or an event")
	fl.BoolVar(&s.finished, "finished", false, "show only finished jobs (success, error or canceled)")
	fl.BoolVar(&s.succeeded, "success", false, "show only jobs that succeeded")
	fl.BoolVar(&s.failed, "error", false, "show only failed jobs")
}

// statuses are the job statuses selected (nil: all); the flags exclude
// each other.
func (s *jobStatusSelection) statuses() ([]string, error) {
	var want []string
	n := 0
	for _, c := range []struct {
		on       bool
		statuses []string
	}{
		{s.running, []string{"running"}},
		{s.pending, []string{"queued", "waiting", "canceling"}},
		{s.finished, []string{"success", "error", "canceled"}},
		{s.failed, []string{"error"}},
		{s.queued, []string{"queued"}},
		{s.waiting, []string{"waiting"}},
		{s.succeeded, []string{"success"}},
	} {
		if c.on {
			n++
			want = c.statuses
		}
	}
	if n > 1 {
		return nil, usagef("--running, --pending, --queued, --waiting, --finished, --success and --error exclude each other")
	}
	return want, nil
}

func (a *app) jobInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info ID...",
		Short:   "Show everything about jobs",
		Long:    "Show jobs in detail: status, times, and for each opcode its input, status, result and log.",
		Example: "  corral job info 42\n  corral job info 41 42",
		Args:    minArgs(1, "at least one job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				rows, err := c.QueryJobs(ctx, ids, jobInfoFields())
				if err != nil {
					return err
				}
				var b strings.Builder
				var missing []string
				for i, id := range ids {
					if i >= len(rows) || rows[i] == nil {
						missing = append(missing, fmt.Sprint(id))
						continue
					}
					a.jobInfo(&b, rows[i])
				}
				if _, err := io.WriteString(cmd.OutOrStdout(), b.String()); err != nil {
					return err
				}
				if len(missing) > 0 {
					return ecode.New(ecode.JobLost, ecode.NoEnt, "Job(s) not found: "+strings.Join(missing, ", "))
				}
				return nil
			})
		},
	}
}

// jobInfo prints one row of jobInfoFields.
func (a *app) jobInfo(b *strings.Builder, row []any) {
	if len(row) != len(jobInfoFields()) {
		line(b, "", fmt.Sprintf("malformed job row: %v", row))
		return
	}
	f := &formatter{units: "h", loc: a.env.loc()}
	at := func(v any) string {
		if t, ok := parseTimestamp(v); ok {
			return t.In(f.loc).Format(jobTimeLayout)
		}
		return nullText
	}
	line(b, "", "Job ID: "+f.scalar("", row[0]))
	line(b, "  ", "Status: "+f.scalar("", row[1]))
	line(b, "  ", "Priority: "+f.scalar("", row[2]))
	line(b, "  ", "Received:         "+at(row[3]))
	line(b, "  ", "Processing start: "+at(row[4]))
	line(b, "  ", "Processing end:   "+at(row[5]))
	if s, ok1 := parseTimestamp(row[4]); ok1 {
		if e, ok2 := parseTimestamp(row[5]); ok2 {
			line(b, "  ", fmt.Sprintf("Total processing time: %s", e.Sub(s).Round(time.Millisecond)))
		}
	}
	ops, _ := row[6].([]any)
	list := func(i int) []any { l, _ := row[i].([]any); return l }
	elem := func(l []any, i int) any {
		if i < len(l) {
			return l[i]
		}
		return nil
	}
	opstatus, opresult, oplog := list(7), list(8), list(9)
	opstart, opexec, opend := list(10), list(11), list(12)
	line(b, "  ", "Opcodes:"+noneIfEmpty(len(ops)))
	for i, op := range ops {
		m, _ := op.(map[string]any)
		id, _ := m["OP_ID"].(string)
		if id == "" {
			id = "(unknown opcode)"
		}
		line(b, "    ", "- "+id)
		line(b, "      ", "Status: "+f.scalar("", elem(opstatus, i)))
		line(b, "      ", "Processing start: "+at(elem(opstart, i)))
		line(b, "      ", "Execution start:  "+at(elem(opexec, i)))
		line(b, "      ", "Processing end:   "+at(elem(opend, i)))
		input := map[string]any{}
		for k, v := range m {
			if k != "OP_ID" {
				input[k] = v
			}
		}
		f.readable(b, "      ", "Input fields", input)
		f.readable(b, "      ", "Result", elem(opresult, i))
		entries, _ := elem(oplog, i).([]any)
		line(b, "      ", "Execution log:"+noneIfEmpty(len(entries)))
		for _, e := range entries {
			l, _ := e.([]any)
			line(b, "        ", a.formatLogEntry(l))
		}
	}
}

func (a *app) jobWatchCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "watch ID",
		Short: "Follow a job until it ends",
		Long: `Follow a job, printing its log as it comes, until it ends. The exit status
tells how it ended: 0 for success, otherwise derived from its error.`,
		Example: "  corral job watch 42",
		Args:    exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				fmt.Fprintf(cmd.OutOrStdout(), "Output from job %d follows\n%s\n", id, strings.Repeat("-", 30))
				_, _, err := a.follow(cmd, c, id, false)
				return err
			})
		},
	}
}

func (a *app) jobCancelCmd() *cobra.Command {
	var kill bool
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job that has not started running",
		Long: `Cancel a queued job, or one waiting for locks. A running job cannot be
cancelled; --kill also stops a job that is waiting at once.`,
		Example: "  corral job cancel 42\n  corral job cancel --kill 42",
		Args:    exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ok, msg, err := c.CancelJob(ctx, id, kill)
				if err != nil {
					return err
				}
				return boolMessage(cmd.OutOrStdout(), ok, msg)
			})
		},
	}
	cmd.Flags().BoolVar(&kill, "kill", false, "stop the job at once even while it waits for locks")
	return cmd
}

// boolMessage prints a [success, message] answer and fails when !ok.
func boolMessage(w io.Writer, ok bool, msg string) error {
	if ok {
		fmt.Fprintln(w, msg)
		return nil
	}
	return &exitError{code: ExitError, msg: "Failure: " + msg}
}

func (a *app) jobArchiveCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "archive ID...",
		Short:   "Archive finished jobs",
		Long:    "Move finished jobs out of the queue into the archive.",
		Example: "  corral job archive 40 41",
		Args:    minArgs(1, "at least one job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids, err := parseJobIDs(args)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				var failed []string
				for _, id := range ids {
					ok, err := c.ArchiveJob(ctx, id)
					if err != nil {
						return err
					}
					if !ok {
						failed = append(failed, fmt.Sprint(id))
					}
				}
				if len(failed) > 0 {
					return &exitError{code: ExitError, msg: "Failure: could not archive job(s) " + strings.Join(failed, ", ") + " (unknown or not finished)"}
				}
				return nil
			})
		},
	}
}

func (a *app) jobAutoArchiveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "autoarchive AGE",
		Short: "Archive finished jobs older than AGE",
		Long: `Archive the finished jobs that ended more than AGE ago. AGE is a number of
seconds, or a number with a suffix s, m, h, d or w; "all" (or -1, written after
"--" so that it is not taken for a flag) archives every finished job.`,
		Example: "  corral job autoarchive 6h\n  corral job autoarchive all\n  corral job autoarchive -- -1",
		Args:    exactArgs(1, "an age"),
		RunE: func(cmd *cobra.Command, args []string) error {
			age := -1
			if args[0] != "all" && args[0] != "-1" {
				secs, err := parseTimespec(args[0])
				if err != nil {
					return err
				}
				if secs > 1<<31 {
					return paramErr("age %q is too large", args[0])
				}
				age = int(secs)
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				n, left, err := c.AutoArchiveJobs(ctx, age, luxi.WaitForJobChangeTimeout)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "Archived %d job(s), %d left unchecked\n", n, left)
				return nil
			})
		},
	}
}

func (a *app) jobChangePriorityCmd() *cobra.Command {
	var prio string
	cmd := &cobra.Command{
		Use:     "change-priority ID --priority PRIORITY",
		Short:   "Change the priority of a pending job",
		Long:    "Change the priority of a job that has not finished: low, normal, high, or a number from -20 (highest) to 19.",
		Example: "  corral job change-priority 42 --priority high",
		Args:    exactArgs(1, "a job id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[0])
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("priority") {
				return usagef("--priority is required")
			}
			p, err := parsePriority(prio)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				ok, msg, err := c.ChangeJobPriority(ctx, id, p)
				if err != nil {
					return err
				}
				return boolMessage(cmd.OutOrStdout(), ok, msg)
			})
		},
	}
	cmd.Flags().StringVar(&prio, "priority", "", "the new priority: low, normal, high or -20..19 (required)")
	return cmd
}
