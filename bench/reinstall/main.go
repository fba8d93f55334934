// Command reinstall replays the master-scaling seed's scenario: while
// --instances OP_INSTANCE_REINSTALL jobs run in the background (fake
// hypervisor, file disks, the tiny OS), one client keeps listing all jobs
// (QueryJobs, fields id and status) and submitting new OP_TEST_DELAY(0)
// jobs, every --interval; it reports the latencies of both calls, and the
// same calls with nothing else running for comparison.
//
// Set-up, timed and reported too: create the instances (started), then shut
// them down, since a reinstall needs a stopped instance.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/luxi"
)

type calls struct {
	List       harness.Stats `json:"list_jobs"`
	Submit     harness.Stats `json:"submit_job"`
	Listed     int           `json:"jobs_listed_last"` // rows in the last listing
	Errors     int           `json:"errors"`
	FirstError string        `json:"first_error,omitempty"`
	Seconds    float64       `json:"seconds"`
}

type result struct {
	Bench          string          `json:"bench"`
	Instances      int             `json:"instances"`
	DiskMiB        int             `json:"disk_mib"`
	OS             string          `json:"os"`
	Nodes          int             `json:"nodes"`
	CreateSecs     float64         `json:"create_seconds"`
	ShutdownSecs   float64         `json:"shutdown_seconds"`
	ReinstallSecs  float64         `json:"reinstall_seconds"`
	ReinstallExec  harness.Stats   `json:"reinstall_job_exec"` // start → end of each job
	IntervalMs     float64         `json:"interval_ms"`
	Baseline       calls           `json:"baseline"`
	DuringReinstal calls           `json:"during_reinstall"`
	CorraldCPUSec  float64         `json:"corrald_cpu_seconds_during_reinstall,omitempty"`
	Machine        harness.Machine `json:"machine"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/reinstall:", err)
		os.Exit(1)
	}
}

func run() error {
	var cf harness.Flags
	cf.Register(flag.CommandLine)
	n := flag.Int("instances", 50, "instances to create and reinstall")
	disk := flag.Int("disk", 16, "size of each instance's file disk, MiB")
	osName := flag.String("os-type", "tiny+default", "guest OS to install")
	interval := flag.Duration("interval", 20*time.Millisecond, "pause between the client's rounds (list, then submit)")
	baseline := flag.Int("baseline", 200, "client rounds with nothing else running, for comparison")
	flag.Parse()
	machine := harness.ReadMachine()
	ctx := context.Background()
	start := time.Now()
	cl, err := harness.Start(ctx, cf)
	if err != nil {
		return err
	}
	defer cl.Close()
	c, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res := result{Bench: "reinstall", Instances: *n, DiskMiB: *disk, OS: *osName, Nodes: cf.Nodes + 1, IntervalMs: harness.Ms(*interval), Machine: machine}

	names := make([]string, *n)
	for i := range names {
		names[i] = fmt.Sprintf("inst%d.bench", i)
	}
	perInstance := func(mk func(name string) map[string]any) [][]any {
		jobs := make([][]any, len(names))
		for i, name := range names {
			jobs[i] = []any{mk(name)}
		}
		return jobs
	}
	harness.Progress(start, "creating %d instances (file disks of %d MiB, OS %s)", *n, *disk, *osName)
	spec := harness.InstanceSpec{Template: "file", DiskMiB: *disk, OS: *osName, MemMiB: 128, Start: true}
	t0 := time.Now()
	if _, err := harness.RunAll(ctx, c, perInstance(spec.CreateOp), 100); err != nil {
		return fmt.Errorf("creating instances: %w", err)
	}
	res.CreateSecs = time.Since(t0).Seconds()
	harness.Progress(start, "shutting them down")
	t0 = time.Now()
	shutdown := func(name string) map[string]any {
		return harness.Op("OP_INSTANCE_SHUTDOWN", "instance_name", name, "timeout", 0)
	}
	if _, err := harness.RunAll(ctx, c, perInstance(shutdown), 100); err != nil {
		return fmt.Errorf("shutting instances down: %w", err)
	}
	res.ShutdownSecs = time.Since(t0).Seconds()

	harness.Progress(start, "baseline: %d rounds with nothing else running", *baseline)
	res.Baseline = client(ctx, c, *interval, func(round int) bool { return round < *baseline })

	harness.Progress(start, "%d reinstall jobs in the background", *n)
	pid, _ := cl.CorraldPID()
	var cpu0 harness.Stat
	if pid > 0 {
		cpu0, _ = harness.ReadStat(pid)
	}
	watcher, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer watcher.Close()
	t0 = time.Now()
	reinstall := func(name string) map[string]any {
		return harness.Op("OP_INSTANCE_REINSTALL", "instance_name", name)
	}
	ids, err := harness.SubmitBatches(ctx, c, perInstance(reinstall), 100)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		by, err := harness.WaitFinalized(ctx, watcher, ids, 20*time.Millisecond)
		if err == nil && len(by["success"]) != len(ids) {
			err = fmt.Errorf("%d of %d reinstall jobs did not succeed; %s", len(ids)-len(by["success"]), len(ids),
				harness.Failed(ctx, watcher, append(by["error"], by["canceled"]...)))
		}
		done <- err
	}()
	var waitErr error
	finished := false
	res.DuringReinstal = client(ctx, c, *interval, func(int) bool {
		select {
		case waitErr = <-done:
			finished = true
			return false
		default:
			return true
		}
	})
	if !finished {
		waitErr = <-done
	}
	res.ReinstallSecs = time.Since(t0).Seconds()
	if waitErr != nil {
		return waitErr
	}
	if pid > 0 {
		if st, err := harness.ReadStat(pid); err == nil {
			res.CorraldCPUSec = (st.CPU() - cpu0.CPU()).Seconds()
		}
	}
	rows, err := c.QueryJobs(ctx, ids, []string{"start_ts", "end_ts"})
	if err != nil {
		return err
	}
	var exec []float64
	for _, r := range rows {
		exec = append(exec, (harness.TS(r[1])-harness.TS(r[0]))*1000)
	}
	res.ReinstallExec = harness.Summarize(exec)

	s := fmt.Sprintf("%d instances (file %d MiB, %s, %d node(s)): created and started in %.1fs, shut down in %.1fs, reinstalled in %.1fs (each job %s)\n",
		*n, *disk, *osName, res.Nodes, res.CreateSecs, res.ShutdownSecs, res.ReinstallSecs, res.ReinstallExec)
	for _, p := range []struct {
		name string
		c    calls
	}{{"nothing else running", res.Baseline}, {"during the reinstalls", res.DuringReinstal}} {
		s += fmt.Sprintf("  %s (%d rounds, every %s; last listing %d jobs):\n    list all jobs  %s\n    submit a job   %s\n",
			p.name, p.c.List.N, *interval, p.c.Listed, p.c.List, p.c.Submit)
		if p.c.Errors > 0 {
			s += fmt.Sprintf("    %d calls failed, first: %s\n", p.c.Errors, p.c.FirstError)
		}
	}
	s += fmt.Sprintf("  corrald CPU during the reinstalls %.1fs", res.CorraldCPUSec)
	return harness.Emit(res, s)
}

// client lists all jobs and submits one no-op job per round, every
// interval, while more(round) holds.
func client(ctx context.Context, c *luxi.Client, interval time.Duration, more func(round int) bool) calls {
	var list, submit harness.Latencies
	var out calls
	op := []any{harness.Op("OP_TEST_DELAY", "duration", 0)}
	t0 := time.Now()
	for round := 0; more(round); round++ {
		list.Time(func() error {
			rows, err := c.QueryJobs(ctx, nil, []string{"id", "status"})
			out.Listed = len(rows)
			return err
		})
		submit.Time(func() error {
			_, err := c.SubmitJob(ctx, op)
			return err
		})
		time.Sleep(interval)
	}
	out.Seconds = time.Since(t0).Seconds()
	out.List, out.Submit = list.Stats(), submit.Stats()
	for _, l := range []*harness.Latencies{&list, &submit} {
		n, err := l.Errors()
		out.Errors += n
		if err != nil && out.FirstError == "" {
			out.FirstError = err.Error()
		}
	}
	return out
}
