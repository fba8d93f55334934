// Command failover measures how long the cluster is without a master when
// the master dies or hangs: a dev cluster on etcd runs --masters corrald
// candidates; the master is killed with SIGKILL (or frozen with SIGSTOP for
// --stop-for, then resumed), and the time from the kill to the first
// SubmitJob a standby (now master) accepts is recorded. The killed corrald
// is started again (as a standby, as its supervisor would) before the next
// kill; a frozen one stands by again by itself once resumed. Optionally
// --load test-delay jobs are queued and running at each kill, so the figure
// includes the new master's queue recovery.
//
// Meanwhile GET /2/info is polled on the dev cluster's corral-rapi, which
// talks to the first corrald's socket; before each kill the master role is
// moved off that corrald, so RAPI reaches the master through a standby's
// relay as it does after any failover, and its outage (first failed call to
// the first answer after it) and failed calls are recorded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/devcluster"
	devharness "github.com/corral/corral/internal/devcluster/harness"
	"github.com/corral/corral/internal/luxi"
)

// poll is the pause between submission attempts after a kill; it bounds
// the measurement's resolution.
const poll = 20 * time.Millisecond

type sample struct {
	Killed   string  `json:"killed"`
	NewLead  string  `json:"new_master"`
	Ms       float64 `json:"ms"`
	Attempts int     `json:"attempts"`
	// RAPI through a standby: outage from the first failed call after the
	// kill to the first answer after it, and the calls that failed.
	RAPIOutageMs float64 `json:"rapi_outage_ms"`
	RAPIFailed   int     `json:"rapi_failed"`
	RAPICalls    int     `json:"rapi_calls"`
	// Elections counts the times a candidate took over before the killed
	// master was restarted (or, with --stop-for, while it was frozen); 1
	// means no flapping.
	Elections int `json:"elections"`
}

type result struct {
	Bench       string          `json:"bench"`
	Masters     int             `json:"masters"`
	EtcdMembers int             `json:"etcd_members"`
	ElectionTTL string          `json:"election_ttl"`
	Load        int             `json:"load_jobs"`
	Kills       int             `json:"kills"`
	Signal      string          `json:"signal"`
	Takeover    harness.Stats   `json:"kill_to_first_submit"`
	RAPIOutage  harness.Stats   `json:"rapi_outage"`
	Samples     []sample        `json:"samples"`
	SetupSecs   float64         `json:"setup_seconds"`
	Machine     harness.Machine `json:"machine"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/failover:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bin", "bin", "directory with corrald and corral-node (make build)")
	osDir := flag.String("os", "", "OS definitions directory (default <bin>/../os)")
	masters := flag.Int("masters", 3, "corrald master candidates")
	members := flag.Int("etcd-members", 3, "etcd members, 1 or 3")
	kills := flag.Int("kills", 5, "how many times to kill the master")
	ttl := flag.String("election-ttl", "", "corrald --election-ttl (default: corrald's, 5s)")
	load := flag.Int("load", 50, "OP_TEST_DELAY jobs (1 s each) submitted before each kill")
	stopFor := flag.Duration("stop-for", 0, "freeze the master with SIGSTOP for this long instead of SIGKILL")
	keep := flag.Bool("keep", false, "leave the dev cluster running afterwards")
	verbose := flag.Bool("v", false, "log the dev cluster's progress")
	flag.Parse()
	if *masters < 2 {
		return errors.New("--masters must be at least 2: someone has to take over")
	}
	machine := harness.ReadMachine()
	ctx := context.Background()
	start := time.Now()
	st, dir, err := up(ctx, *bin, *osDir, *masters, *members, *ttl, *verbose)
	if dir != "" {
		defer teardown(dir, *keep)
	}
	if err != nil {
		return err
	}
	res := result{Bench: "failover", Masters: *masters, EtcdMembers: *members, ElectionTTL: *ttl, Load: *load,
		Kills: *kills, Signal: "SIGKILL", SetupSecs: time.Since(start).Seconds(), Machine: machine}
	if *stopFor > 0 {
		res.Signal = "SIGSTOP for " + stopFor.String()
	}
	probe, err := devcluster.StartRAPIProbe(st, rapiPoll)
	if err != nil {
		return err
	}
	defer probe.Stop()
	if res.ElectionTTL == "" {
		res.ElectionTTL = "5s (default)"
	}
	harness.Progress(start, "dev cluster up: %d candidates on %d etcd members", *masters, *members)
	var ms, outages []float64
	for k := 1; k <= *kills; k++ {
		if err := moveOffRAPI(ctx, st, *bin); err != nil {
			return fmt.Errorf("kill %d: %w", k, err)
		}
		s, err := killOnce(ctx, st, *load, *stopFor, probe)
		if err != nil {
			return fmt.Errorf("kill %d: %w", k, err)
		}
		harness.Progress(start, "kill %d: %s %s, %s accepted a job after %.0f ms; RAPI out %.0f ms (%d of %d calls failed); %d election(s)",
			k, s.Killed, res.Signal, s.NewLead, s.Ms, s.RAPIOutageMs, s.RAPIFailed, s.RAPICalls, s.Elections)
		res.Samples = append(res.Samples, s)
		ms = append(ms, s.Ms)
		outages = append(outages, s.RAPIOutageMs)
	}
	res.Takeover = harness.Summarize(ms)
	res.RAPIOutage = harness.Summarize(outages)
	return harness.Emit(res, fmt.Sprintf("failover: %d candidates, etcd x%d, TTL %s, %d queued jobs per kill, %s of the master: to the new master's first accepted SubmitJob over %d kills: %s (mean %.0f ms); RAPI through a standby out %s",
		*masters, *members, res.ElectionTTL, *load, res.Signal, *kills, res.Takeover, res.Takeover.Mean, res.RAPIOutage))
}

func up(ctx context.Context, bin, osDir string, masters, members int, ttl string, verbose bool) (*devcluster.State, string, error) {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return nil, "", err
	}
	if osDir == "" {
		osDir = filepath.Join(bin, "..", "os")
	}
	dir, err := os.MkdirTemp("", "corral-bench-")
	if err != nil {
		return nil, "", err
	}
	// The daemons run as other users and must reach their directories.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, dir, err
	}
	var args []string
	if ttl != "" {
		args = []string{"--election-ttl", ttl}
	}
	logf := func(string, ...any) {}
	if verbose {
		logf = func(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }
	}
	st, err := devcluster.Up(ctx, devcluster.Options{StateDir: dir, BinDir: bin, OSDir: osDir, Hypervisors: []string{"fake"},
		WatcherEvery: time.Hour, Store: "etcd", EtcdMembers: members, Masters: masters, CorraldArgs: args, Log: logf})
	return st, dir, err
}

func teardown(dir string, keep bool) {
	if keep {
		fmt.Fprintf(os.Stderr, "dev cluster left running: state %s (corral dev down --state-dir %s --purge)\n", dir, dir)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := devcluster.Down(ctx, dir, true, func(string, ...any) {}); err != nil {
		fmt.Fprintf(os.Stderr, "tearing down the dev cluster in %s: %v\n", dir, err)
	}
	_ = os.RemoveAll(dir)
}

// killOnce kills (or freezes, for stopFor) the current master, times the
// takeover and RAPI's outage, and starts the killed corrald again as a
// standby (a frozen one is resumed and stands by by itself).
func killOnce(ctx context.Context, st *devcluster.State, load int, stopFor time.Duration, probe *devcluster.RAPIProbe) (sample, error) {
	lead, err := devcluster.WaitLeader(ctx, st, time.Minute)
	if err != nil {
		return sample{}, err
	}
	if load > 0 {
		if err := submitLoad(ctx, lead.Socket, load); err != nil {
			return sample{}, err
		}
	}
	pid := 0
	for _, p := range st.Procs {
		if p.Name == lead.Proc {
			pid = p.PID
		}
	}
	if pid == 0 {
		return sample{}, fmt.Errorf("no pid recorded for %s", lead.Proc)
	}
	offs := logOffsets(st)
	t0 := time.Now()
	sig := syscall.SIGKILL
	if stopFor > 0 {
		sig = syscall.SIGSTOP
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return sample{}, err
	}
	s := sample{Killed: lead.Name}
	deadline := t0.Add(time.Minute)
	for s.NewLead == "" {
		for _, c := range st.Candidates() {
			if c.Proc == lead.Proc {
				continue
			}
			s.Attempts++
			if trySubmit(ctx, c.Socket) == nil {
				s.Ms = harness.Ms(time.Since(t0))
				s.NewLead = c.Name
				break
			}
		}
		if s.NewLead == "" {
			if time.Now().After(deadline) {
				return s, errors.New("no candidate accepted a job within a minute of the kill")
			}
			time.Sleep(poll)
		}
	}
	if err := waitRecovered(probe, t0, time.Minute); err != nil {
		return s, err
	}
	if stopFor > 0 {
		time.Sleep(time.Until(t0.Add(stopFor)))
	}
	s.Elections = elections(st, offs, lead.Proc)
	if stopFor > 0 {
		if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
			return s, err
		}
	} else {
		devharness.WaitGone(pid, 5*time.Second)
		if _, err := devcluster.Restart(st, lead.Proc); err != nil {
			return s, err
		}
	}
	o := probe.Since(t0)
	s.RAPIOutageMs, s.RAPIFailed, s.RAPICalls = harness.Ms(o.Length()), o.Failed, o.Calls
	return s, waitStandby(ctx, lead.Socket)
}

func trySubmit(ctx context.Context, sock string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	c, err := luxi.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.SubmitJob(ctx, []any{harness.Op("OP_TEST_DELAY", "duration", 0)})
	return err
}

func submitLoad(ctx context.Context, sock string, n int) error {
	c, err := luxi.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer c.Close()
	jobs := make([][]any, n)
	for i := range jobs {
		jobs[i] = []any{harness.Op("OP_TEST_DELAY", "duration", 1)}
	}
	_, err = harness.SubmitBatches(ctx, c, jobs, 100)
	return err
}

// waitStandby waits until the restarted corrald answers as a standby (or,
// forwarding, relays to the master).
func waitStandby(ctx context.Context, sock string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		// A forwarding standby relays the job to the master: that also
		// means it stands by.
		err := trySubmit(ctx, sock)
		if err == nil || devcluster.IsStandbyError(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the restarted corrald on %s does not stand by: %v", sock, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
