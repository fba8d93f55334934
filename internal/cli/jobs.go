package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// Ganeti's submit priorities; lower runs first.
const (
	prioLow    = 10
	prioNormal = 0
	prioHigh   = -10
	prioMin    = -20
	prioMax    = 19
)

// Pacing of the progress line shown while a job is followed on a terminal.
const (
	defaultProgressAfter = 3 * time.Second
	defaultProgressEvery = time.Second
)

// jobOpts are the flags every job-submitting command has.
type jobOpts struct {
	submit   bool
	dryRun   bool
	priority string
	quiet    bool // follow without printing the log: the result says it all
}

func addJobFlags(cmd *cobra.Command, o *jobOpts, dryRun bool) {
	f := cmd.Flags()
	f.BoolVar(&o.submit, "submit", false, `submit the job, print "JobID: N" and return without waiting for it`)
	if dryRun {
		f.BoolVar(&o.dryRun, "dry-run", false, "only check the request (dry_run), change nothing")
	}
	f.StringVar(&o.priority, "priority", "", "job priority: low (10), normal (0, the default), high (-10), or a number from -20 (highest) to 19")
}

// parsePriority reads a priority name or number.
func parsePriority(s string) (int, error) {
	switch strings.ToLower(s) {
	case "low":
		return prioLow, nil
	case "normal":
		return prioNormal, nil
	case "high":
		return prioHigh, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < prioMin || n > prioMax {
		return 0, paramErr("invalid priority %q: use low, normal, high or a number from %d to %d", s, prioMin, prioMax)
	}
	return n, nil
}

// resultPrinter renders an opcode's result once its job has succeeded.
type resultPrinter func(w io.Writer, result any) error

// runJob submits op as a one-opcode job, then either prints its id
// (--submit) or follows it to the end and prints its result with print
// (nil prints nothing).
func (a *app) runJob(cmd *cobra.Command, o *jobOpts, op map[string]any, print resultPrinter) error {
	if o.dryRun {
		op["dry_run"] = true
	}
	if o.priority != "" {
		p, err := parsePriority(o.priority)
		if err != nil {
			return err
		}
		op["priority"] = p
	}
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	return a.env.withClient(ctx, func(c *luxi.Client) error {
		id, err := c.SubmitJob(ctx, []any{op})
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
		if print != nil && len(res) > 0 {
			return print(out, res[0])
		}
		return nil
	})
}

// jobBuild makes the opcode of a one-job command from its flags and
// arguments, with the printer of its result (nil prints nothing).
type jobBuild func(cmd *cobra.Command, args []string) (map[string]any, resultPrinter, error)

// jobCmd completes cmd as a command whose whole work is one job: it adds the
// job flags (--submit, --dry-run, ...) and runs the opcode build makes.
func (a *app) jobCmd(cmd *cobra.Command, build jobBuild) *cobra.Command {
	var o jobOpts
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		op, print, err := build(cmd, args)
		if err != nil {
			return err
		}
		return a.runJob(cmd, &o, op, print)
	}
	addJobFlags(cmd, &o, true)
	return cmd
}

// fixedJob is the jobBuild of a command with no flags of its own: op makes
// the opcode from the arguments alone.
func fixedJob(op func(args []string) map[string]any) jobBuild {
	return func(_ *cobra.Command, args []string) (map[string]any, resultPrinter, error) {
		return op(args), nil, nil
	}
}

// follow waits for job id to end, printing its log entries as they come,
// (unless quiet) and returns its final status and per-opcode results. The error is the
// job's failure (see luxi.WaitForJob) or an interruption.
func (a *app) follow(cmd *cobra.Command, c *luxi.Client, id int64, quiet bool) (string, []any, error) {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	var prog *progress
	if errw := cmd.ErrOrStderr(); a.env.isTerminal(errw) {
		prog = a.startProgress(errw, id)
		defer prog.stop()
	}
	status, res, err := luxi.WaitForJob(ctx, c, id, func(e []any) {
		if quiet {
			return
		}
		prog.clear()
		fmt.Fprintln(out, a.formatLogEntry(e))
	})
	if err != nil && ctx.Err() != nil {
		return "", nil, &interruptedError{job: id}
	}
	return status, res, err
}

// formatLogEntry renders [serial, [sec, usec], type, message] as
// "<time> <message>", as Ganeti's tools do; entries other than plain
// messages show their type and JSON payload.
func (a *app) formatLogEntry(e []any) string {
	var ts, typ string
	var msg any
	if len(e) > 1 {
		if t, ok := parseTimestamp(e[1]); ok {
			ts = t.In(a.env.loc()).Format(time.ANSIC)
		}
	}
	if len(e) > 2 {
		typ, _ = e[2].(string)
	}
	if len(e) > 3 {
		msg = e[3]
	}
	var text string
	if s, ok := msg.(string); ok && (typ == "message" || typ == "") {
		text = s
	} else {
		b, _ := json.Marshal(msg)
		text = typ + ": " + string(b)
	}
	if ts == "" {
		return text
	}
	return ts + " " + text
}

// parseTimestamp reads Ganeti's [sec, usec] pairs and plain epoch seconds.
func parseTimestamp(v any) (time.Time, bool) {
	switch x := v.(type) {
	case []any:
		if len(x) != 2 {
			return time.Time{}, false
		}
		sec, ok1 := x[0].(float64)
		usec, ok2 := x[1].(float64)
		if !ok1 || !ok2 {
			return time.Time{}, false
		}
		return time.Unix(int64(sec), int64(usec)*1000), true
	case float64:
		sec := int64(x)
		return time.Unix(sec, int64((x-float64(sec))*1e9)), true
	}
	return time.Time{}, false
}

// progress keeps a "waiting" line on a terminal's stderr while a job runs
// without logging, so a long wait does not look like a hang. It is erased
// before each log line and at the end.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool
	quit  chan struct{}
	done  chan struct{}
}

func (a *app) startProgress(w io.Writer, id int64) *progress {
	after, every := a.env.progressAfter, a.env.progressEvery
	if after <= 0 {
		after = defaultProgressAfter
	}
	if every <= 0 {
		every = defaultProgressEvery
	}
	p := &progress{w: w, quit: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(p.done)
		t := time.NewTimer(after)
		defer t.Stop()
		for {
			select {
			case <-p.quit:
				return
			case <-t.C:
			}
			p.mu.Lock()
			fmt.Fprintf(p.w, "\r\x1b[KWaiting for job %d (%s)...", id, time.Since(start).Round(time.Second))
			p.shown = true
			p.mu.Unlock()
			t.Reset(every)
		}
	}()
	return p
}

// clear erases the progress line if it is shown; p may be nil.
func (p *progress) clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

func (p *progress) stop() {
	close(p.quit)
	<-p.done
	p.clear()
}

// parseJobID reads a job id argument.
// parseJobIDs parses every argument as a job id.
func parseJobIDs(args []string) ([]int64, error) {
	ids := make([]int64, len(args))
	for i, s := range args {
		id, err := parseJobID(s)
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

func parseJobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, paramErr("invalid job id %q", s)
	}
	return id, nil
}
