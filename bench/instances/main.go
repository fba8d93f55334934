// Command instances measures the control-plane cost of instances: it
// submits --instances OP_INSTANCE_CREATE jobs at once (one SubmitManyJobs;
// fake hypervisor, diskless, no NICs, started) and reports the time until
// all are finalized, the time per instance, and each job's queue wait and
// execution time; then it checks every instance runs.
//
// --placement auto lets the cluster choose the node (the allocator takes
// the node-allocation lock, so creations are serialised); spread names the
// primary node, round-robin over the cluster's nodes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/corral/corral/bench/harness"
)

type result struct {
	Bench        string          `json:"bench"`
	Instances    int             `json:"instances"`
	Nodes        int             `json:"nodes"`
	Placement    string          `json:"placement"`
	MaxRunning   int             `json:"max_running_jobs"`
	SubmitSecs   float64         `json:"submit_seconds"`
	TotalSecs    float64         `json:"total_seconds"`
	PerInstance  float64         `json:"per_instance_ms"`
	Wait         harness.Stats   `json:"job_wait"` // received → start
	Exec         harness.Stats   `json:"job_exec"` // start → end
	Running      int             `json:"running"`
	RemoveSecs   float64         `json:"remove_seconds,omitempty"`
	CorraldCPU   float64         `json:"corrald_cpu_seconds,omitempty"`
	CorraldRSS   float64         `json:"corrald_rss_mib,omitempty"`
	AllSucceeded bool            `json:"all_succeeded"`
	Machine      harness.Machine `json:"machine"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/instances:", err)
		os.Exit(1)
	}
}

func run() error {
	cf := harness.Flags{Nodes: 2}
	cf.Register(flag.CommandLine)
	n := flag.Int("instances", 100, "instances to add and start")
	placement := flag.String("placement", "auto", "auto (the cluster picks the node) or spread (pnode round-robin)")
	maxRunning := flag.Int("max-running", 0, "set the cluster's max_running_jobs first (0: leave the default, 20)")
	remove := flag.Bool("remove", false, "also time removing them all (OP_INSTANCE_REMOVE, submitted at once)")
	flag.Parse()
	if *placement != "auto" && *placement != "spread" {
		return fmt.Errorf("unknown placement %q", *placement)
	}
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
	res := result{Bench: "instances", Instances: *n, Placement: *placement, MaxRunning: 20, Machine: machine}
	if *maxRunning > 0 {
		if err := harness.SetClusterParams(ctx, c, "max_running_jobs", *maxRunning); err != nil {
			return err
		}
		res.MaxRunning = *maxRunning
	}
	nodes, err := c.QueryNodes(ctx, nil, []string{"name"}, false)
	if err != nil {
		return err
	}
	res.Nodes = len(nodes)
	harness.Progress(start, "cluster of %d node(s) up in %.1fs; adding %d instances", len(nodes), cl.SetupTime.Seconds(), *n)

	jobs := make([][]any, *n)
	names := make([]string, *n)
	for i := range jobs {
		spec := harness.InstanceSpec{Template: "diskless", MemMiB: 128, Start: true}
		if *placement == "spread" {
			spec.Node, _ = nodes[i%len(nodes)][0].(string)
		}
		names[i] = fmt.Sprintf("inst%d.bench", i)
		jobs[i] = []any{spec.CreateOp(names[i])}
	}
	pid, _ := cl.CorraldPID()
	var cpu0 harness.Stat
	if pid > 0 {
		cpu0, _ = harness.ReadStat(pid)
	}
	t0 := time.Now()
	ids, err := harness.SubmitBatches(ctx, c, jobs, len(jobs))
	if err != nil {
		return err
	}
	res.SubmitSecs = time.Since(t0).Seconds()
	by, err := harness.WaitFinalized(ctx, c, ids, 10*time.Millisecond)
	if err != nil {
		return err
	}
	res.TotalSecs = time.Since(t0).Seconds()
	res.PerInstance = res.TotalSecs * 1000 / float64(*n)
	res.AllSucceeded = len(by["success"]) == len(ids)
	if pid > 0 {
		if st, err := harness.ReadStat(pid); err == nil {
			res.CorraldCPU = (st.CPU() - cpu0.CPU()).Seconds()
		}
		if rss, err := harness.RSS(pid); err == nil {
			res.CorraldRSS = harness.MiB(rss)
		}
	}
	rows, err := c.QueryJobs(ctx, ids, []string{"received_ts", "start_ts", "end_ts"})
	if err != nil {
		return err
	}
	var wait, exec []float64
	for _, r := range rows {
		wait = append(wait, (harness.TS(r[1])-harness.TS(r[0]))*1000)
		exec = append(exec, (harness.TS(r[2])-harness.TS(r[1]))*1000)
	}
	res.Wait, res.Exec = harness.Summarize(wait), harness.Summarize(exec)
	insts, err := c.QueryInstances(ctx, names, []string{"name", "status"}, false)
	if err != nil {
		return err
	}
	for _, r := range insts {
		if r[1] == "running" {
			res.Running++
		}
	}
	if *remove {
		rm := make([][]any, *n)
		for i, name := range names {
			rm[i] = []any{harness.Op("OP_INSTANCE_REMOVE", "instance_name", name, "shutdown_timeout", 0)}
		}
		t1 := time.Now()
		if _, err := harness.RunAll(ctx, c, rm, len(rm)); err != nil {
			return fmt.Errorf("removing: %w", err)
		}
		res.RemoveSecs = time.Since(t1).Seconds()
	}
	s := fmt.Sprintf("%d diskless fake instances added and started at once (%s placement, %d nodes, max_running_jobs %d): %.2fs in all, %.0f ms per instance; %d running, all succeeded: %v\n"+
		"  per job: queue wait %s; execution %s\n  corrald CPU %.1fs, RSS %.0f MiB",
		*n, *placement, res.Nodes, res.MaxRunning, res.TotalSecs, res.PerInstance, res.Running, res.AllSucceeded, res.Wait, res.Exec, res.CorraldCPU, res.CorraldRSS)
	if *remove {
		s += fmt.Sprintf("\n  removed them all in %.2fs", res.RemoveSecs)
	}
	if !res.AllSucceeded {
		s += "\n  " + harness.Failed(ctx, c, append(by["error"], by["canceled"]...))
	}
	return harness.Emit(res, s)
}
