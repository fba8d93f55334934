// Command jobs measures job-queue throughput through the real LUXI socket
// of a real corrald: it submits N OP_TEST_DELAY(duration 0) jobs (with
// SubmitManyJobs in batches, or one SubmitJob per job from several
// clients), waits until all are finalized, and reports jobs/s and the
// per-job latency from receipt to end, as JSON and a readable summary.
//
// Without --socket or --state-dir it brings up its own dev cluster (needs
// root and the built binaries in --bin) and tears it down afterwards.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/corral/corral/bench/harness"
)

type result struct {
	Bench       string          `json:"bench"`
	Mode        string          `json:"mode"`
	Jobs        int             `json:"jobs"`
	Batch       int             `json:"batch"`
	Clients     int             `json:"clients"`
	SubmitSecs  float64         `json:"submit_seconds"`
	TotalSecs   float64         `json:"total_seconds"`
	JobsPerSec  float64         `json:"jobs_per_second"`
	LatencyP50  float64         `json:"latency_p50_ms"`
	LatencyP99  float64         `json:"latency_p99_ms"`
	LatencyMax  float64         `json:"latency_max_ms"`
	AllSucceded bool            `json:"all_succeeded"`
	Machine     harness.Machine `json:"machine"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/jobs:", err)
		os.Exit(1)
	}
}

func run() error {
	var cf harness.Flags
	cf.Register(flag.CommandLine)
	n := flag.Int("jobs", 1000, "number of jobs")
	batch := flag.Int("batch", 100, "jobs per SubmitManyJobs call (mode many)")
	clients := flag.Int("clients", 8, "concurrent clients (mode single)")
	mode := flag.String("mode", "many", "many (SubmitManyJobs in batches) or single (one SubmitJob per job)")
	flag.Parse()
	if *mode != "many" && *mode != "single" {
		return fmt.Errorf("unknown mode %q", *mode)
	}
	machine := harness.ReadMachine()
	ctx := context.Background()
	cl, err := harness.Start(ctx, cf)
	if err != nil {
		return err
	}
	defer cl.Close()

	if *n > 4000 {
		// All the jobs are submitted before most have run: room for them
		// beyond the default job_queue_size of 5000.
		c, err := cl.Dial(ctx)
		if err != nil {
			return err
		}
		err = harness.SetClusterParams(ctx, c, "job_queue_size", *n+1000)
		c.Close()
		if err != nil {
			return err
		}
	}
	op := harness.Op("OP_TEST_DELAY", "duration", 0)
	var ids []int64
	start := time.Now()
	switch *mode {
	case "many":
		c, err := cl.Dial(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		jobs := make([][]any, *n)
		for i := range jobs {
			jobs[i] = []any{op}
		}
		if ids, err = harness.SubmitBatches(ctx, c, jobs, *batch); err != nil {
			return err
		}
	case "single":
		if ids, err = submitSingly(ctx, cl, op, *n, *clients); err != nil {
			return err
		}
	}
	submitted := time.Since(start)
	c, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	slices.Sort(ids)
	byStatus, err := harness.WaitFinalized(ctx, c, ids, 20*time.Millisecond)
	if err != nil {
		return err
	}
	total := time.Since(start)
	rows, err := harness.QueryJobs(ctx, c, ids, []string{"received_ts", "end_ts"}, 5000)
	if err != nil {
		return err
	}
	lat := make([]float64, 0, len(rows))
	for _, r := range rows {
		lat = append(lat, (harness.TS(r[1])-harness.TS(r[0]))*1000)
	}
	st := harness.Summarize(lat)
	res := result{Bench: "jobs", Mode: *mode, Jobs: len(ids), Batch: *batch, Clients: *clients, SubmitSecs: submitted.Seconds(),
		TotalSecs: total.Seconds(), JobsPerSec: float64(len(ids)) / total.Seconds(),
		LatencyP50: st.P50, LatencyP99: st.P99, LatencyMax: st.Max, AllSucceded: len(byStatus["success"]) == len(ids), Machine: machine}
	return harness.Emit(res, fmt.Sprintf("%d no-op jobs (%s): %.0f jobs/s, all finalized in %.2fs; latency received->end %s",
		res.Jobs, *mode, res.JobsPerSec, res.TotalSecs, st))
}

// submitSingly submits n jobs with one SubmitJob each, from clients
// concurrent connections.
func submitSingly(ctx context.Context, cl *harness.Cluster, op map[string]any, n, clients int) ([]int64, error) {
	var (
		mu   sync.Mutex
		ids  []int64
		wg   sync.WaitGroup
		errs = make(chan error, clients)
	)
	clients = max(clients, 1)
	for w := range clients {
		per := n / clients
		if w < n%clients {
			per++
		}
		wg.Go(func() {
			c, err := cl.Dial(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			for range per {
				id, err := c.SubmitJob(ctx, []any{op})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return ids, nil
}
