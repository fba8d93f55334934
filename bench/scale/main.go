// Command scale measures corrald's memory and start-up with a large state:
// it builds, through jobs like any client would, a configuration of
// --instances instances (fake hypervisor, diskless, not started, spread
// over fake nodes reporting --fake-mem MiB each) and --jobs further no-op
// jobs, archives every finished job (AutoArchiveJobs(-1)), and then reports
// corrald's RSS, restarts it and reports the time from starting the
// process to its first answered LUXI call, its RSS then, and the latency of
// the first full queries.
//
// Building is measured too (creations and jobs per second, sampled as the
// counts grow). Submissions go in SubmitManyJobs batches, keeping at most
// --window jobs unfinished so the queue's job_queue_size (5000) is never
// hit. Each build phase stops submitting after --limit and reports how far
// it got.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/luxi"
)

type buildStats struct {
	Target    int       `json:"target"`
	Done      int       `json:"done"` // finalized
	Succeeded int       `json:"succeeded"`
	Seconds   float64   `json:"seconds"`
	PerSecond float64   `json:"per_second"`
	Samples   []float64 `json:"rate_samples"` // per-second rate over each 10% of the target
	Stopped   bool      `json:"stopped_at_limit"`
}

type startup struct {
	StopSecs         float64     `json:"stop_seconds"`
	FirstAnswerSecs  float64     `json:"first_answer_seconds"`
	RSSMiB           float64     `json:"rss_mib_after_start"`
	Mem              harness.Mem `json:"mem_after_start"`
	QueryInstancesMs float64     `json:"first_query_instances_ms"`
	QueryJobsMs      float64     `json:"first_query_archived_job_ms"`
	ListJobsMs       float64     `json:"first_list_jobs_ms"`
	RSSAfterQueries  float64     `json:"rss_mib_after_queries"`
	MemAfterQueries  harness.Mem `json:"mem_after_queries"`
}

type result struct {
	Bench         string          `json:"bench"`
	Nodes         int             `json:"nodes"`
	FakeMemMiB    int64           `json:"fake_mem_mib"`
	Instances     buildStats      `json:"instances"`
	Jobs          buildStats      `json:"jobs"`
	ArchiveSecs   float64         `json:"archive_seconds"`
	Archived      int             `json:"archived"`
	StoreMiB      float64         `json:"store_mib"`
	RSSBuiltMiB   float64         `json:"rss_mib_after_build"`
	MemBuilt      harness.Mem     `json:"mem_after_build"`
	InstancesSeen int             `json:"instances_in_config"`
	Startup       startup         `json:"startup"`            // the first restart
	Restarts      []startup       `json:"restarts,omitempty"` // every restart, the first included
	Machine       harness.Machine `json:"machine"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/scale:", err)
		os.Exit(1)
	}
}

func run() error {
	cf := harness.Flags{Nodes: 3}
	cf.Register(flag.CommandLine)
	nInst := flag.Int("instances", 10000, "instances in the configuration")
	nJobs := flag.Int("jobs", 100000, "no-op jobs to run and archive (on top of the instance creations)")
	mem := flag.Int("mem", 128, "memory of each instance, MiB")
	batch := flag.Int("batch", 500, "jobs per SubmitManyJobs call")
	window := flag.Int("window", 4000, "most unfinished jobs at a time")
	limit := flag.Duration("limit", 15*time.Minute, "stop submitting in a build phase after this long")
	restarts := flag.Int("restarts", 3, "times to restart corrald and measure its start-up")
	flag.Parse()
	machine := harness.ReadMachine()
	ctx := context.Background()
	start := time.Now()
	if cf.FakeMemMiB == 0 && cf.StateDir == "" && cf.Socket == "" {
		// Room for every instance with a margin: the fake nodes report this
		// much memory and creation checks it.
		cf.FakeMemMiB = max(32768, int64(*nInst)*int64(*mem)*2/int64(cf.Nodes+1))
	}
	cl, err := harness.Start(ctx, cf)
	if err != nil {
		return err
	}
	defer cl.Close()
	pid, err := cl.CorraldPID()
	if err != nil {
		return err
	}
	c, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	nodeRows, err := c.QueryNodes(ctx, nil, []string{"name"}, false)
	if err != nil {
		return err
	}
	nodes := make([]string, len(nodeRows))
	for i, r := range nodeRows {
		nodes[i], _ = r[0].(string)
	}
	res := result{Bench: "scale", Nodes: len(nodes), FakeMemMiB: cf.FakeMemMiB, Machine: machine}
	harness.Progress(start, "dev cluster of %d nodes (%d MiB each) up in %.1fs", len(nodes), cf.FakeMemMiB, cl.SetupTime.Seconds())

	harness.Progress(start, "creating %d instances", *nInst)
	res.Instances, err = build(ctx, c, *nInst, func(i int) []any {
		// Naming the node spreads the work: the allocator would serialise
		// every creation on the node-allocation lock.
		spec := harness.InstanceSpec{Template: "diskless", MemMiB: *mem, Node: nodes[i%len(nodes)]}
		return []any{spec.CreateOp(fmt.Sprintf("inst%05d.bench", i))}
	}, *batch, *window, *limit, start, "instances")
	if err != nil {
		return err
	}
	if err := archive(ctx, c, &res, start); err != nil {
		return err
	}
	harness.Progress(start, "running %d no-op jobs", *nJobs)
	noop := []any{harness.Op("OP_TEST_DELAY", "duration", 0)}
	res.Jobs, err = build(ctx, c, *nJobs, func(int) []any { return noop }, *batch, *window, *limit, start, "jobs")
	if err != nil {
		return err
	}
	if err := archive(ctx, c, &res, start); err != nil {
		return err
	}
	insts, err := c.QueryInstances(ctx, nil, []string{"name"}, false)
	if err != nil {
		return err
	}
	res.InstancesSeen = len(insts)
	if m, err := harness.ReadMem(pid); err == nil {
		res.RSSBuiltMiB, res.MemBuilt = m.RSSMiB, m
	}
	if fi, err := os.Stat(filepath.Join(cl.State.StateDir, "master", "config.db")); err == nil {
		res.StoreMiB = harness.MiB(fi.Size())
	}

	harness.Progress(start, "restarting corrald (RSS %.0f MiB, store %.0f MiB)", res.RSSBuiltMiB, res.StoreMiB)
	c.Close()
	var firsts []float64
	for i := range max(*restarts, 1) {
		st, err := restart(ctx, cl)
		if err != nil {
			return err
		}
		if i == 0 {
			res.Startup = st
		}
		res.Restarts = append(res.Restarts, st)
		firsts = append(firsts, st.FirstAnswerSecs*1000)
	}
	fs := harness.Summarize(firsts)

	s := fmt.Sprintf("corrald with %d instances in the configuration and %d jobs archived by this run (%d fake nodes of %d MiB; store %.0f MiB):\n"+
		"  RSS %s after building\n  restart: stopped in %.2fs, first LUXI answer %.2fs after exec; RSS %s, then %s after the first queries\n"+
		"  first queries after the restart: all instances %.0f ms, one archived job %.1f ms, list all jobs %.1f ms\n"+
		"  first LUXI answer over %d restarts: median %.2fs, max %.2fs\n"+
		"  building: %s\n  building: %s\n  archiving: %.1fs",
		res.InstancesSeen, res.Archived, len(nodes), cf.FakeMemMiB, res.StoreMiB,
		res.MemBuilt, res.Startup.StopSecs, res.Startup.FirstAnswerSecs, res.Startup.Mem, res.Startup.MemAfterQueries,
		res.Startup.QueryInstancesMs, res.Startup.QueryJobsMs, res.Startup.ListJobsMs,
		fs.N, fs.P50/1000, fs.Max/1000,
		describe("instance creations", res.Instances), describe("no-op jobs", res.Jobs), res.ArchiveSecs)
	return harness.Emit(res, s)
}

func describe(what string, b buildStats) string {
	s := fmt.Sprintf("%d of %d %s finalized (%d succeeded) in %.1fs, %.0f/s", b.Done, b.Target, what, b.Succeeded, b.Seconds, b.PerSecond)
	if len(b.Samples) > 0 {
		s += fmt.Sprintf(" (per 10%%: %.0f", b.Samples[0])
		for _, v := range b.Samples[1:] {
			s += fmt.Sprintf(", %.0f", v)
		}
		s += ")"
	}
	if b.Stopped {
		s += "; stopped at the time limit"
	}
	return s
}

// build submits total jobs made by mk in batches, keeping at most window
// unfinished, until all are finalized or limit has passed (then it stops
// submitting and waits for what it submitted).
func build(ctx context.Context, c *luxi.Client, total int, mk func(i int) []any, batch, window int, limit time.Duration, start time.Time, what string) (buildStats, error) {
	b := buildStats{Target: total}
	t0 := time.Now()
	deadline := t0.Add(limit)
	var pending []int64
	submitted := 0
	lastSample, lastSampleAt := 0, t0
	lastReport := t0
	step := max(total/10, 1)
	for {
		stop := time.Now().After(deadline)
		if stop && submitted < total {
			b.Stopped = true
		}
		for submitted < total && !stop && len(pending)+batch <= window {
			k := min(batch, total-submitted)
			jobs := make([][]any, k)
			for i := range jobs {
				jobs[i] = mk(submitted + i)
			}
			ids, err := harness.SubmitBatches(ctx, c, jobs, k)
			if err != nil {
				return b, fmt.Errorf("submitting %s: %w", what, err)
			}
			pending = append(pending, ids...)
			submitted += k
		}
		if len(pending) == 0 && (submitted == total || b.Stopped) {
			break
		}
		// Jobs finish roughly in submission order: asking about the oldest
		// few is enough, and keeps the polling cheap for corrald.
		head := pending[:min(len(pending), 1000)]
		rows, err := c.QueryJobs(ctx, head, []string{"status"})
		if err != nil {
			return b, err
		}
		still := make([]int64, 0, len(pending))
		for i, r := range rows {
			s := ""
			if r != nil {
				s, _ = r[0].(string)
			}
			switch {
			case harness.Finalized(s):
				b.Done++
				if s == "success" {
					b.Succeeded++
				}
			case r == nil:
				return b, fmt.Errorf("job %d vanished", pending[i])
			default:
				still = append(still, pending[i])
			}
		}
		pending = append(still, pending[len(head):]...)
		now := time.Now()
		for b.Done-lastSample >= step {
			b.Samples = append(b.Samples, float64(b.Done-lastSample)/now.Sub(lastSampleAt).Seconds())
			lastSample += step
			lastSampleAt = now
		}
		if now.Sub(lastReport) > 10*time.Second {
			harness.Progress(start, "  %s: %d submitted, %d finalized (%d ok), %.0f/s", what, submitted, b.Done, b.Succeeded, float64(b.Done)/now.Sub(t0).Seconds())
			lastReport = now
		}
		if b.Succeeded < b.Done && b.Done-b.Succeeded > 10 {
			return b, fmt.Errorf("%d %s failed", b.Done-b.Succeeded, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Seconds = time.Since(t0).Seconds()
	b.PerSecond = float64(b.Done) / b.Seconds
	harness.Progress(start, "  %s: %d finalized (%d ok) in %.1fs, %.0f/s", what, b.Done, b.Succeeded, b.Seconds, b.PerSecond)
	return b, nil
}

// archive archives every finished job.
func archive(ctx context.Context, c *luxi.Client, res *result, start time.Time) error {
	t0 := time.Now()
	for {
		n, remaining, err := c.AutoArchiveJobs(ctx, -1, 60)
		if err != nil {
			return fmt.Errorf("archiving: %w", err)
		}
		res.Archived += n
		if remaining == 0 {
			break
		}
	}
	d := time.Since(t0)
	res.ArchiveSecs += d.Seconds()
	harness.Progress(start, "  archived, %d in all (%.1fs)", res.Archived, d.Seconds())
	return nil
}

// restart stops corrald, starts it again and times its first answers.
func restart(ctx context.Context, cl *harness.Cluster) (startup, error) {
	var s startup
	d, err := cl.StopCorrald(ctx, time.Minute)
	if err != nil {
		return s, err
	}
	s.StopSecs = d.Seconds()
	if d, err = cl.RestartCorrald(ctx, 5*time.Minute); err != nil {
		return s, err
	}
	s.FirstAnswerSecs = d.Seconds()
	pid, err := cl.CorraldPID()
	if err != nil {
		return s, err
	}
	if m, err := harness.ReadMem(pid); err == nil {
		s.RSSMiB, s.Mem = m.RSSMiB, m
	}
	c, err := cl.Dial(ctx)
	if err != nil {
		return s, err
	}
	defer c.Close()
	t0 := time.Now()
	if _, err := c.QueryInstances(ctx, nil, []string{"name", "status"}, false); err != nil {
		return s, err
	}
	s.QueryInstancesMs = harness.Ms(time.Since(t0))
	t0 = time.Now()
	if _, err := c.QueryJobs(ctx, []int64{1}, []string{"id", "status"}); err != nil {
		return s, err
	}
	s.QueryJobsMs = harness.Ms(time.Since(t0))
	t0 = time.Now()
	if _, err := c.QueryJobs(ctx, nil, []string{"id", "status"}); err != nil {
		return s, err
	}
	s.ListJobsMs = harness.Ms(time.Since(t0))
	if m, err := harness.ReadMem(pid); err == nil {
		s.RSSAfterQueries, s.MemAfterQueries = m.RSSMiB, m
	}
	return s, nil
}
