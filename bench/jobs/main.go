// Command jobs measures job-queue throughput through the real LUXI socket
// of a real corrald: it submits N OP_TEST_DELAY(duration 0) jobs (with
// SubmitManyJobs in batches, or one SubmitJob per job from several
// clients), waits until all are finalized, and reports jobs/s and the
// per-job latency from receipt to end, as JSON and a readable summary.
//
// Without --socket it brings up its own dev cluster (needs root and the
// built binaries in --bin) and tears it down afterwards.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/luxi"
)

type result struct {
	Mode        string  `json:"mode"`
	Jobs        int     `json:"jobs"`
	Batch       int     `json:"batch"`
	Clients     int     `json:"clients"`
	SubmitSecs  float64 `json:"submit_seconds"`
	TotalSecs   float64 `json:"total_seconds"`
	JobsPerSec  float64 `json:"jobs_per_second"`
	LatencyP50  float64 `json:"latency_p50_ms"`
	LatencyP99  float64 `json:"latency_p99_ms"`
	LatencyMax  float64 `json:"latency_max_ms"`
	AllSucceded bool    `json:"all_succeeded"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/jobs:", err)
		os.Exit(1)
	}
}

func run() error {
	socket := flag.String("socket", "", "LUXI socket of a running cluster (default: start a dev cluster)")
	bin := flag.String("bin", "bin", "directory with corrald and corral-node (for the dev cluster)")
	n := flag.Int("jobs", 1000, "number of jobs")
	batch := flag.Int("batch", 100, "jobs per SubmitManyJobs call (mode many)")
	clients := flag.Int("clients", 8, "concurrent clients (mode single)")
	mode := flag.String("mode", "many", "many (SubmitManyJobs in batches) or single (one SubmitJob per job)")
	flag.Parse()
	ctx := context.Background()
	if *socket == "" {
		dir, err := os.MkdirTemp("", "corral-bench-")
		if err != nil {
			return err
		}
		_ = os.Chmod(dir, 0o755)
		absBin, _ := filepath.Abs(*bin)
		st, err := devcluster.Up(ctx, devcluster.Options{StateDir: dir, BinDir: absBin, Hypervisors: []string{"fake"}, OSDir: filepath.Join(absBin, "..", "os")})
		defer func() {
			_ = devcluster.Down(context.Background(), dir, true, func(string, ...any) {})
		}()
		if err != nil {
			return err
		}
		*socket = st.Socket
	}
	op := map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": 0}
	var ids []int64
	var mu sync.Mutex
	start := time.Now()
	switch *mode {
	case "many":
		c, err := luxi.Dial(ctx, *socket)
		if err != nil {
			return err
		}
		defer c.Close()
		for done := 0; done < *n; done += *batch {
			k := min(*batch, *n-done)
			jobs := make([][]any, k)
			for i := range jobs {
				jobs[i] = []any{op}
			}
			res, err := c.SubmitManyJobs(ctx, jobs)
			if err != nil {
				return err
			}
			for _, r := range res {
				if !r.OK {
					return fmt.Errorf("submission refused: %s", r.Err)
				}
				ids = append(ids, r.JobID)
			}
		}
	case "single":
		var wg sync.WaitGroup
		errs := make(chan error, *clients)
		per := *n / *clients
		for w := 0; w < *clients; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := luxi.Dial(ctx, *socket)
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				for i := 0; i < per; i++ {
					id, err := c.SubmitJob(ctx, []any{op})
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					ids = append(ids, id)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", *mode)
	}
	submitted := time.Since(start)
	c, err := luxi.Dial(ctx, *socket)
	if err != nil {
		return err
	}
	defer c.Close()
	// Wait for the last job, then for every job to be finalized.
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var rows [][]any
	for {
		rows, err = c.QueryJobs(ctx, ids, []string{"status", "received_ts", "end_ts"})
		if err != nil {
			return err
		}
		pending := 0
		for _, r := range rows {
			if s, _ := r[0].(string); s != "success" && s != "error" && s != "canceled" {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	total := time.Since(start)
	var lat []float64
	ok := true
	for _, r := range rows {
		if r[0] != "success" {
			ok = false
		}
		lat = append(lat, (ts(r[2])-ts(r[1]))*1000)
	}
	sort.Float64s(lat)
	res := result{Mode: *mode, Jobs: len(ids), Batch: *batch, Clients: *clients, SubmitSecs: submitted.Seconds(),
		TotalSecs: total.Seconds(), JobsPerSec: float64(len(ids)) / total.Seconds(),
		LatencyP50: pct(lat, 50), LatencyP99: pct(lat, 99), LatencyMax: lat[len(lat)-1], AllSucceded: ok}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	fmt.Fprintf(os.Stderr, "%d no-op jobs (%s): %.0f jobs/s, all finalized in %.2fs; latency received->end p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
		res.Jobs, *mode, res.JobsPerSec, res.TotalSecs, res.LatencyP50, res.LatencyP99, res.LatencyMax)
	return nil
}

func ts(v any) float64 {
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return 0
	}
	s, _ := l[0].(float64)
	u, _ := l[1].(float64)
	return s + u/1e6
}

func pct(s []float64, p float64) float64 {
	if len(s) == 0 {
		return 0
	}
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}
