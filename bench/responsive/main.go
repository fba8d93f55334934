// Command responsive measures how quickly corrald answers while it is
// loaded: the p50/p99/max latency of SubmitJob (an OP_TEST_DELAY of 0 s),
// QueryJobs (a few ids; fields id, status) and QueryInstances (all; fields
// name, status), over --requests calls each, interleaved on one LUXI
// connection, in up to three phases:
//
//   - baseline: nothing else going on;
//   - idle: while --idle LUXI connections are held open, idle, by a separate
//     process (this program re-executed with --hold-idle);
//   - long: while --long jobs of OP_TEST_DELAY(--long-duration) are queued
//     or running (max_running_jobs of them run; the rest wait in the queue).
//
// The no-op jobs SubmitJob adds run at once in the baseline and idle phases
// (their execution is part of the load there), but stay queued behind the
// long jobs in the long phase.
//
// Every call goes through the real LUXI socket of a real corrald; without
// --socket or --state-dir a dev cluster with the fake hypervisor is started
// (root, binaries in --bin) and torn down afterwards.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/luxi"
)

type callStats struct {
	SubmitJob      harness.Stats `json:"submit_job"`
	QueryJobs      harness.Stats `json:"query_jobs"`
	QueryInstances harness.Stats `json:"query_instances"`
	Errors         int           `json:"errors"`
	FirstError     string        `json:"first_error,omitempty"`
	Seconds        float64       `json:"seconds"`
}

type phase struct {
	Name string `json:"name"`
	callStats
	CorraldRSSMiB float64 `json:"corrald_rss_mib,omitempty"`
	CorraldFDs    int     `json:"corrald_fds,omitempty"`
	CorraldCPUSec float64 `json:"corrald_cpu_seconds,omitempty"` // during the measurement

	IdleConns    int     `json:"idle_connections,omitempty"`
	IdleOpenSecs float64 `json:"idle_open_seconds,omitempty"`
	IdleRetries  int     `json:"idle_connect_eagain_retries,omitempty"`

	LongJobs       int     `json:"long_jobs,omitempty"`
	LongSubmitSecs float64 `json:"long_submit_seconds,omitempty"`
	RunningBefore  int     `json:"long_running_before,omitempty"`
	QueuedBefore   int     `json:"long_queued_before,omitempty"`
	RunningAfter   int     `json:"long_running_after,omitempty"`
	QueuedAfter    int     `json:"long_queued_after,omitempty"`
	CancelSecs     float64 `json:"cancel_seconds,omitempty"`
}

type result struct {
	Bench         string          `json:"bench"`
	Requests      int             `json:"requests"`
	Instances     int             `json:"instances"`
	MaxRunning    int             `json:"max_running_jobs"`
	CorraldNoFile int64           `json:"corrald_nofile_limit,omitempty"`
	Phases        []phase         `json:"phases"`
	Machine       harness.Machine `json:"machine"`
}

type config struct {
	requests, instances, idle, long, maxRunning int
	longDuration                                float64
	phases                                      []string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/responsive:", err)
		os.Exit(1)
	}
}

func run() error {
	var cf harness.Flags
	cf.Register(flag.CommandLine)
	var cfg config
	flag.IntVar(&cfg.requests, "requests", 1000, "calls of each kind per phase")
	flag.IntVar(&cfg.instances, "instances", 20, "diskless fake instances to create first, so QueryInstances has rows to return")
	flag.IntVar(&cfg.idle, "idle", 10000, "idle LUXI connections held open during the idle phase")
	flag.IntVar(&cfg.long, "long", 1000, "long jobs queued or running during the long phase")
	flag.Float64Var(&cfg.longDuration, "long-duration", 30, "seconds each long job sleeps")
	flag.IntVar(&cfg.maxRunning, "max-running", 0, "set the cluster's max_running_jobs first (0: leave the default, 20)")
	phases := flag.String("phases", "baseline,idle,long", "phases to run, in order")
	raise := flag.Bool("raise-nofile", true, "raise the open-file limit corrald inherits to --idle plus a margin before starting the dev cluster")
	holder := flag.Int("hold-idle", 0, "internal: act as the holder of this many idle connections to --socket")
	flag.Parse()
	ctx := context.Background()
	if *holder > 0 {
		return holdIdle(ctx, cf.Socket, *holder)
	}
	cfg.phases = strings.Split(*phases, ",")
	machine := harness.ReadMachine()
	start := time.Now()

	// corrald inherits our limits: raise them before it starts, so that it
	// can hold the idle connections (Go raises its soft limit to the hard
	// one by itself).
	if *raise {
		// corrald needs a few descriptors of its own besides the idle
		// connections and the measuring one.
		if _, err := harness.RaiseNoFile(uint64(cfg.idle) + 256); err != nil {
			return err
		}
	}
	cl, err := harness.Start(ctx, cf)
	if err != nil {
		return err
	}
	defer cl.Close()
	res := result{Bench: "responsive", Requests: cfg.requests, Instances: cfg.instances, Machine: machine, MaxRunning: 20}
	pid, pidErr := cl.CorraldPID()
	if pidErr == nil {
		res.CorraldNoFile, _ = harness.NoFileLimit(pid)
	}
	c, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if cfg.maxRunning > 0 {
		if err := harness.SetClusterParams(ctx, c, "max_running_jobs", cfg.maxRunning); err != nil {
			return err
		}
		res.MaxRunning = cfg.maxRunning
	}
	// The measurement's own jobs and the long ones must fit in the queue.
	if need := cfg.long + cfg.requests + 1000; need > 5000 {
		if err := harness.SetClusterParams(ctx, c, "job_queue_size", need); err != nil {
			return err
		}
	}
	// An attached cluster may have instances already: they are all listed.
	existing, err := c.QueryInstances(ctx, nil, []string{"name"}, false)
	if err != nil {
		return err
	}
	if cfg.instances > 0 {
		harness.Progress(start, "creating %d diskless instances", cfg.instances)
		spec := harness.InstanceSpec{Template: "diskless", Start: true, MemMiB: 128}
		jobs := make([][]any, cfg.instances)
		for i := range jobs {
			jobs[i] = []any{spec.CreateOp(fmt.Sprintf("resp%d.bench", i))}
		}
		if _, err := harness.RunAll(ctx, c, jobs, 100); err != nil {
			return fmt.Errorf("creating instances: %w", err)
		}
	}
	cfg.instances += len(existing)
	res.Instances = cfg.instances

	for _, name := range cfg.phases {
		harness.Progress(start, "phase %s", name)
		var p phase
		var err error
		switch name {
		case "baseline":
			p = measured(ctx, c, cfg, pid, &phase{})
		case "idle":
			p, err = idlePhase(ctx, cl, c, cfg, pid)
		case "long":
			p, err = longPhase(ctx, c, cfg, pid, start)
		default:
			err = fmt.Errorf("unknown phase %q", name)
		}
		if err != nil {
			return fmt.Errorf("phase %s: %w", name, err)
		}
		p.Name = name
		res.Phases = append(res.Phases, p)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "corrald responsiveness, %d calls of each kind per phase, %d instances (corrald open-file limit %d):\n", cfg.requests, cfg.instances, res.CorraldNoFile)
	for _, p := range res.Phases {
		load := "nothing else running (but its own no-op jobs)"
		switch p.Name {
		case "idle":
			load = fmt.Sprintf("%d idle connections (opened in %.1fs, %d connects retried on a full backlog; corrald %d fds, %.0f MiB RSS)",
				p.IdleConns, p.IdleOpenSecs, p.IdleRetries, p.CorraldFDs, p.CorraldRSSMiB)
		case "long":
			load = fmt.Sprintf("%d long jobs (%d running, %d queued at start; %d/%d at end; submitted in %.2fs)", p.LongJobs, p.RunningBefore, p.QueuedBefore, p.RunningAfter, p.QueuedAfter, p.LongSubmitSecs)
		}
		fmt.Fprintf(&b, "  %s — %s, corrald CPU %.1fs over %.1fs:\n", p.Name, load, p.CorraldCPUSec, p.Seconds)
		fmt.Fprintf(&b, "    SubmitJob       %s\n    QueryJobs       %s\n    QueryInstances  %s\n", p.SubmitJob, p.QueryJobs, p.QueryInstances)
		if p.Errors > 0 {
			fmt.Fprintf(&b, "    %d calls failed, first: %s\n", p.Errors, p.FirstError)
		}
	}
	return harness.Emit(res, b.String())
}

// measured runs the calls and records them in p with corrald's figures.
func measured(ctx context.Context, c *luxi.Client, cfg config, pid int, p *phase) phase {
	var cpu0 time.Duration
	if pid > 0 {
		if st, err := harness.ReadStat(pid); err == nil {
			cpu0 = st.CPU()
		}
	}
	p.callStats = measure(ctx, c, cfg.requests, cfg.instances)
	if pid > 0 {
		if st, err := harness.ReadStat(pid); err == nil {
			p.CorraldCPUSec = (st.CPU() - cpu0).Seconds()
		}
		if rss, err := harness.RSS(pid); err == nil {
			p.CorraldRSSMiB = harness.MiB(rss)
		}
		p.CorraldFDs, _ = harness.OpenFDs(pid)
	}
	return *p
}

// measure makes n calls of each kind, interleaved, so that each kind sees
// the same load over time.
func measure(ctx context.Context, c *luxi.Client, n, instances int) callStats {
	var sub, qj, qi harness.Latencies
	delay := []any{harness.Op("OP_TEST_DELAY", "duration", 0)}
	fields := []string{"id", "status"}
	var recent []int64 // the last few jobs submitted, for QueryJobs
	t0 := time.Now()
	for range n {
		sub.Time(func() error {
			id, err := c.SubmitJob(ctx, delay)
			if err == nil {
				recent = append(recent, id)
				if len(recent) > 5 {
					recent = recent[1:]
				}
			}
			return err
		})
		qj.Time(func() error {
			rows, err := c.QueryJobs(ctx, recent, fields)
			if err == nil && len(rows) != len(recent) {
				err = fmt.Errorf("QueryJobs: %d rows for %d ids", len(rows), len(recent))
			}
			return err
		})
		qi.Time(func() error {
			rows, err := c.QueryInstances(ctx, nil, []string{"name", "status"}, false)
			if err == nil && len(rows) != instances {
				err = fmt.Errorf("QueryInstances: %d rows, want %d", len(rows), instances)
			}
			return err
		})
	}
	s := callStats{SubmitJob: sub.Stats(), QueryJobs: qj.Stats(), QueryInstances: qi.Stats(), Seconds: time.Since(t0).Seconds()}
	for _, l := range []*harness.Latencies{&sub, &qj, &qi} {
		n, err := l.Errors()
		s.Errors += n
		if err != nil && s.FirstError == "" {
			s.FirstError = err.Error()
		}
	}
	return s
}

func idlePhase(ctx context.Context, cl *harness.Cluster, c *luxi.Client, cfg config, pid int) (phase, error) {
	h, err := startIdleHolder(ctx, cl.Socket, cfg.idle, 5*time.Minute)
	if err != nil {
		return phase{}, err
	}
	p := phase{IdleConns: cfg.idle, IdleOpenSecs: h.Open.Seconds(), IdleRetries: h.Retries}
	res := measured(ctx, c, cfg, pid, &p)
	if err := h.Stop(); err != nil {
		return res, fmt.Errorf("idle-connection holder: %w", err)
	}
	return res, nil
}

func longPhase(ctx context.Context, c *luxi.Client, cfg config, pid int, start time.Time) (phase, error) {
	op := harness.Op("OP_TEST_DELAY", "duration", cfg.longDuration, "interruptible", true)
	jobs := make([][]any, cfg.long)
	for i := range jobs {
		jobs[i] = []any{op}
	}
	t0 := time.Now()
	ids, err := harness.SubmitBatches(ctx, c, jobs, 100)
	if err != nil {
		return phase{}, err
	}
	p := phase{LongJobs: len(ids), LongSubmitSecs: time.Since(t0).Seconds()}
	// Measure once the scheduler has filled its run slots.
	want := min(cfg.long, max(cfg.maxRunning, 20))
	deadline := time.Now().Add(10 * time.Second)
	for {
		run, queued, err := counts(ctx, c, ids)
		if err != nil {
			return p, err
		}
		p.RunningBefore, p.QueuedBefore = run, queued
		if run >= want || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	measured(ctx, c, cfg, pid, &p)
	if p.RunningAfter, p.QueuedAfter, err = counts(ctx, c, ids); err != nil {
		return p, err
	}
	if p.Seconds > cfg.longDuration {
		harness.Progress(start, "warning: the measurement outlasted the long jobs' %gs", cfg.longDuration)
	}
	// Clean up: cancel every long job, the running ones too.
	t1 := time.Now()
	for _, id := range ids {
		if _, _, err := c.CancelJob(ctx, id, true); err != nil {
			return p, fmt.Errorf("cancelling job %d: %w", id, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := harness.WaitFinalized(wctx, c, ids, 50*time.Millisecond); err != nil {
		return p, fmt.Errorf("waiting for the cancelled long jobs: %w", err)
	}
	p.CancelSecs = time.Since(t1).Seconds()
	return p, nil
}

// counts returns how many of ids are running and how many queued.
func counts(ctx context.Context, c *luxi.Client, ids []int64) (running, queued int, err error) {
	rows, err := harness.QueryJobs(ctx, c, ids, []string{"status"}, 5000)
	if err != nil {
		return 0, 0, err
	}
	for _, r := range rows {
		if r == nil {
			continue
		}
		switch r[0] {
		case "running", "waiting":
			running++
		case "queued":
			queued++
		}
	}
	return running, queued, nil
}
