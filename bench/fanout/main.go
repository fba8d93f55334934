// Command fanout measures WaitForJobChange fan-out: --jobs jobs each log
// --rate entries per second (OP_TEST_DELAY with repeat, --entries rounds),
// and --subs subscribers per job, each on its own LUXI connection, follow
// their job with WaitForJobChange and prev_log_serial the way the command
// line tools do. It reports the latency from each log entry's timestamp to
// its arrival at a subscriber (p50/p99/max), checks that every subscriber
// saw every entry in order, and reports the CPU corrald used; with
// --control the same jobs first run without subscribers, so the CPU the
// fan-out itself costs can be told apart from the jobs' own.
//
// Unless --lockstep, job i's entries are offset by i/jobs of a period, as
// independent jobs would be; with it, every job logs at the same instant.
//
// Each job begins with a --warmup delay that logs nothing, so that all
// subscribers are attached before the first entry; entries older than a
// subscriber's first call would be a backlog, not a notification, and are
// not counted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/luxi"
)

type run struct {
	Subscribers   int     `json:"subscribers"`
	Seconds       float64 `json:"seconds"`
	CorraldCPUSec float64 `json:"corrald_cpu_seconds"`
	CorraldCores  float64 `json:"corrald_cores"` // CPU seconds per wall second
	// LogOverheadMs is how much longer than entries/rate the logging op
	// ran, per entry (mean over jobs): mostly the durable write of each
	// entry, which happens between its timestamp and its publication.
	LogOverheadMs float64 `json:"log_overhead_ms_per_entry"`
}

type result struct {
	Bench         string        `json:"bench"`
	Jobs          int           `json:"jobs"`
	SubsPerJob    int           `json:"subscribers_per_job"`
	EntriesPerJob int           `json:"entries_per_job"`
	Rate          float64       `json:"entries_per_second_per_job"`
	Lockstep      bool          `json:"lockstep"`
	Latency       harness.Stats `json:"latency"`
	// EntrySpacing is the time between consecutive entries of a job beyond
	// the 1/rate sleep: what writing one entry took.
	EntrySpacing  harness.Stats   `json:"entry_spacing_beyond_sleep"`
	Delivered     int             `json:"entries_delivered"`
	Expected      int             `json:"entries_expected"`
	Backlog       int             `json:"entries_backlog"` // logged before the subscriber attached
	Gaps          int             `json:"gaps"`            // serials skipped or repeated
	Calls         int             `json:"wait_calls"`
	Errors        int             `json:"errors"`
	FirstError    string          `json:"first_error,omitempty"`
	WithSubs      run             `json:"with_subscribers"`
	Control       *run            `json:"control,omitempty"`
	ClientCPUSec  float64         `json:"client_cpu_seconds"`
	CorraldRSSMiB float64         `json:"corrald_rss_mib"`
	Machine       harness.Machine `json:"machine"`
}

type subResult struct {
	lat       []float64
	spacing   []float64 // filled by the first subscriber of each job
	delivered int
	backlog   int
	gaps      int
	calls     int
	err       error
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/fanout:", err)
		os.Exit(1)
	}
}

func mainErr() error {
	var cf harness.Flags
	cf.Register(flag.CommandLine)
	nJobs := flag.Int("jobs", 100, "jobs logging at the same time")
	subs := flag.Int("subs", 10, "WaitForJobChange subscribers per job, each on its own connection")
	rate := flag.Float64("rate", 10, "log entries per second per job")
	entries := flag.Int("entries", 100, "log entries per job")
	warmup := flag.Float64("warmup", 2, "seconds each job sleeps, silently, before logging")
	lockstep := flag.Bool("lockstep", false, "start every job's entries at the same instant (a burst of jobs×subs deliveries each period) instead of spreading the jobs' phases evenly over one period")
	control := flag.Bool("control", true, "first run the same jobs without subscribers, for the CPU comparison")
	flag.Parse()
	machine := harness.ReadMachine()
	ctx := context.Background()
	start := time.Now()
	total := *nJobs * *subs
	if _, err := harness.RaiseNoFile(uint64(total) + 256); err != nil {
		return err
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
	if *nJobs > 20 {
		// Every job must run at once for the rate to be what it says.
		if err := harness.SetClusterParams(ctx, c, "max_running_jobs", *nJobs); err != nil {
			return err
		}
	}
	jobs := make([][]any, *nJobs)
	for i := range jobs {
		w := *warmup
		if !*lockstep {
			w += float64(i) / float64(*nJobs) / *rate
		}
		jobs[i] = []any{
			harness.Op("OP_TEST_DELAY", "duration", w),
			harness.Op("OP_TEST_DELAY", "duration", 1 / *rate, "repeat", *entries),
		}
	}
	res := result{Bench: "fanout", Jobs: *nJobs, SubsPerJob: *subs, EntriesPerJob: *entries, Rate: *rate, Lockstep: *lockstep, Machine: machine}

	if *control {
		harness.Progress(start, "control: %d jobs without subscribers", *nJobs)
		cpu0, err := harness.ReadStat(pid)
		if err != nil {
			return err
		}
		t0 := time.Now()
		ids, err := harness.RunAll(ctx, c, jobs, len(jobs))
		if err != nil {
			return err
		}
		r, err := window(pid, cpu0, t0, 0)
		if err != nil {
			return err
		}
		if r.LogOverheadMs, err = logOverhead(ctx, c, ids, *entries, *rate); err != nil {
			return err
		}
		res.Control = &r
	}

	harness.Progress(start, "opening %d subscriber connections", total)
	conns := make([]*luxi.Client, total)
	for i := range conns {
		if conns[i], err = cl.Dial(ctx); err != nil {
			return fmt.Errorf("subscriber connection %d: %w", i, err)
		}
		defer conns[i].Close()
	}
	harness.Progress(start, "%d jobs with %d subscribers each", *nJobs, *subs)
	self0 := harness.SelfCPU()
	cpu0, err := harness.ReadStat(pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	ids, err := harness.SubmitBatches(ctx, c, jobs, len(jobs))
	if err != nil {
		return err
	}
	results := make([]subResult, total)
	var wg sync.WaitGroup
	wctx, cancel := context.WithTimeout(ctx, time.Duration(*warmup + float64(*entries) / *rate + 120)*time.Second)
	defer cancel()
	for i := range total {
		wg.Go(func() { results[i] = follow(wctx, conns[i], ids[i / *subs], i%*subs == 0, 1 / *rate) })
	}
	wg.Wait()
	if res.WithSubs, err = window(pid, cpu0, t0, total); err != nil {
		return err
	}
	res.ClientCPUSec = (harness.SelfCPU() - self0).Seconds()
	if rss, err := harness.RSS(pid); err == nil {
		res.CorraldRSSMiB = harness.MiB(rss)
	}
	by, err := harness.WaitFinalized(ctx, c, ids, 50*time.Millisecond)
	if err != nil {
		return err
	}
	if len(by["success"]) != len(ids) {
		return fmt.Errorf("%d of %d jobs did not succeed: %s", len(ids)-len(by["success"]), len(ids), harness.Failed(ctx, c, append(by["error"], by["canceled"]...)))
	}

	if res.WithSubs.LogOverheadMs, err = logOverhead(ctx, c, ids, *entries, *rate); err != nil {
		return err
	}
	var lat, spacing []float64
	for _, r := range results {
		lat = append(lat, r.lat...)
		spacing = append(spacing, r.spacing...)
		res.Delivered += r.delivered
		res.Backlog += r.backlog
		res.Gaps += r.gaps
		res.Calls += r.calls
		if r.err != nil {
			res.Errors++
			if res.FirstError == "" {
				res.FirstError = r.err.Error()
			}
		}
	}
	res.Expected = total * *entries
	res.Latency = harness.Summarize(lat)
	res.EntrySpacing = harness.Summarize(spacing)
	s := fmt.Sprintf("%d jobs × %d entries at %g/s, %d subscribers each (%d connections): log entry → subscriber %s\n"+
		"  delivered %d of %d entries (%d backlog, %d gaps, %d errors) in %d WaitForJobChange calls\n"+
		"  corrald CPU %.1fs over %.1fs (%.2f cores), RSS %.0f MiB; benchmark client CPU %.1fs\n"+
		"  writing an entry (spacing of a job's entries beyond the sleep) %s; mean %.1f ms per entry by the op's run time",
		*nJobs, *entries, *rate, *subs, total, res.Latency, res.Delivered, res.Expected, res.Backlog, res.Gaps, res.Errors, res.Calls,
		res.WithSubs.CorraldCPUSec, res.WithSubs.Seconds, res.WithSubs.CorraldCores, res.CorraldRSSMiB, res.ClientCPUSec,
		res.EntrySpacing, res.WithSubs.LogOverheadMs)
	if res.Control != nil {
		s += fmt.Sprintf("\n  without subscribers: corrald CPU %.1fs over %.1fs (%.2f cores), %.1f ms per entry by the op's run time: the fan-out costs %.1f CPU-s, %.0f µs per delivered entry",
			res.Control.CorraldCPUSec, res.Control.Seconds, res.Control.CorraldCores, res.Control.LogOverheadMs, res.WithSubs.CorraldCPUSec-res.Control.CorraldCPUSec,
			(res.WithSubs.CorraldCPUSec-res.Control.CorraldCPUSec)*1e6/float64(max(res.Delivered, 1)))
	}
	if res.FirstError != "" {
		s += "\n  first error: " + res.FirstError
	}
	return harness.Emit(res, s)
}

// window reports corrald's CPU use since cpu0 and t0.
func window(pid int, cpu0 harness.Stat, t0 time.Time, subs int) (run, error) {
	st, err := harness.ReadStat(pid)
	if err != nil {
		return run{}, err
	}
	wall := time.Since(t0).Seconds()
	cpu := (st.CPU() - cpu0.CPU()).Seconds()
	return run{Subscribers: subs, Seconds: wall, CorraldCPUSec: cpu, CorraldCores: cpu / wall}, nil
}

// follow waits for changes of job id until it ends, as luxi.WaitForJob
// does, timing each log entry from its timestamp to its arrival.
func follow(ctx context.Context, c *luxi.Client, id int64, first bool, sleep float64) (r subResult) {
	var prevInfo []any
	var prevSerial *int64
	var prevTS float64
	attached := harness.Now()
	for {
		ch, err := c.WaitForJobChange(ctx, id, []string{"status"}, prevInfo, prevSerial, 30)
		arrived := harness.Now()
		if err != nil {
			r.err = fmt.Errorf("job %d: %w", id, err)
			return r
		}
		r.calls++
		if ch.NoChange {
			continue
		}
		if len(ch.JobInfo) != 1 {
			r.err = errors.New("WaitForJobChange: want one field value")
			return r
		}
		for _, e := range ch.LogEntries {
			if len(e) < 2 {
				r.err = fmt.Errorf("job %d: malformed log entry %v", id, e)
				return r
			}
			f, _ := e[0].(float64)
			serial := int64(f)
			if prevSerial != nil && serial != *prevSerial+1 {
				r.gaps++
			}
			prevSerial = &serial
			r.delivered++
			ts := harness.TS(e[1])
			if first && prevTS > 0 {
				r.spacing = append(r.spacing, (ts-prevTS-sleep)*1000)
			}
			prevTS = ts
			if ts < attached {
				r.backlog++
				continue
			}
			r.lat = append(r.lat, (arrived-ts)*1000)
		}
		status, _ := ch.JobInfo[0].(string)
		if len(ch.LogEntries) == 0 && harness.Finalized(status) {
			return r
		}
		prevInfo = ch.JobInfo
	}
}

// logOverhead returns, averaged over the jobs, how much longer than
// entries/rate their logging op (the second) ran, per entry, in ms.
func logOverhead(ctx context.Context, c *luxi.Client, ids []int64, entries int, rate float64) (float64, error) {
	rows, err := c.QueryJobs(ctx, ids, []string{"opexec", "opend"})
	if err != nil {
		return 0, err
	}
	var sum float64
	for i, r := range rows {
		exec, _ := r[0].([]any)
		end, _ := r[1].([]any)
		if len(exec) != 2 || len(end) != 2 {
			return 0, fmt.Errorf("job %d: no op times in %v", ids[i], r)
		}
		sum += harness.TS(end[1]) - harness.TS(exec[1]) - float64(entries)/rate
	}
	return sum / float64(len(rows)) / float64(entries) * 1000, nil
}
