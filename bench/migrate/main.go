// Command migrate measures live migration of kvm guests (TCG) on the
// sharedfile template (two node daemons on this machine sharing one
// directory) or on rbd (--template rbd: both reach a one-host Ceph brought
// up for the run, through librbd): one guest per --mem size, booted, then migrated
// back and forth --rounds times. For each migration it reports the time the
// job took, and the migration time and the guest's downtime that qemu
// measured (from the job log). Migrations use qemu's TLS migration, as in
// production.
//
// Needs root, qemu-system-x86_64, the built binaries (make build) and the
// guest image (scripts/build-guest-image.sh DIR, passed as --image).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/cephtest"
	"github.com/corral/corral/internal/devcluster"
	devharness "github.com/corral/corral/internal/devcluster/harness"
	"github.com/corral/corral/internal/luxi"
)

type migration struct {
	From, To   string
	JobSeconds float64 `json:"job_seconds"`
	TotalMs    int     `json:"migration_ms"`
	DowntimeMs int     `json:"downtime_ms"`
}

type sizeResult struct {
	MemoryMiB  int           `json:"memory_mib"`
	BootSecs   float64       `json:"boot_seconds"`
	Migrations []migration   `json:"migrations"`
	Total      harness.Stats `json:"migration_ms"`
	Downtime   harness.Stats `json:"downtime_ms"`
	// Job is in milliseconds like the others.
	Job harness.Stats `json:"job_ms"`
}

type result struct {
	Bench        string          `json:"bench"`
	Template     string          `json:"template"`
	BandwidthMiB int             `json:"migration_bandwidth_mib_s"`
	DowntimeMs   int             `json:"migration_downtime_ms"`
	Sizes        []sizeResult    `json:"sizes"`
	Machine      harness.Machine `json:"machine"`
}

var figuresRE = regexp.MustCompile(`Migration completed in (\d+) ms, downtime (\d+) ms`)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/migrate:", err)
		os.Exit(1)
	}
}

func run() error {
	bin := flag.String("bin", "bin", "directory with corrald, corral-node and corral (make build)")
	osDir := flag.String("os", "", "OS definitions (default <bin>/../os)")
	image := flag.String("image", "", "guest image directory from scripts/build-guest-image.sh (required)")
	mems := flag.String("mem", "256,1024", "guest memory sizes, MiB, comma-separated")
	rounds := flag.Int("rounds", 4, "migrations per guest (alternately to the other node and back)")
	bandwidth := flag.Int("bandwidth", 1000, "migration_bandwidth hvparam, MiB/s")
	downtime := flag.Int("downtime", 30, "migration_downtime hvparam, ms (Ganeti's default)")
	verbose := flag.Bool("v", false, "log the dev cluster's progress")
	template := flag.String("template", "sharedfile", "disk template of the guests: sharedfile or rbd (starts a one-host Ceph)")
	flag.Parse()
	if *image == "" {
		return fmt.Errorf("--image is required (build it with scripts/build-guest-image.sh DIR)")
	}
	binAbs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	if *osDir == "" {
		*osDir = filepath.Join(binAbs, "..", "os")
	}
	osAbs, _ := filepath.Abs(*osDir)
	imgAbs, _ := filepath.Abs(*image)
	start := time.Now()
	ctx := context.Background()
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	}
	dc, err := devharness.Up(ctx, "corral-bench-", devcluster.Options{BinDir: binAbs, OSDir: osAbs, ImageDir: imgAbs,
		Hypervisors: []string{"kvm", "fake"}, Nodes: 1, Log: logf})
	if dc == nil {
		return err
	}
	defer func() { _ = dc.Down(context.Background(), logf) }()
	if err != nil {
		return err
	}
	c, err := dc.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	shared, err := os.MkdirTemp("", "corral-bench-shared-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(shared)
	if err := os.Chmod(shared, 0o755); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	if *template == "rbd" {
		ceph, err := startCeph(ctx, c, start)
		if err != nil {
			return err
		}
		defer ceph()
	} else if *template != "sharedfile" {
		return fmt.Errorf("--template %q: sharedfile or rbd", *template)
	}
	if err := harness.SetClusterParams(ctx, c, "enabled_disk_templates", []any{"file", "diskless", "sharedfile", "rbd"},
		"shared_file_storage_dir", shared, "hvparams", map[string]any{"kvm": map[string]any{
			"migration_port": strconv.Itoa(port), "migration_bandwidth": strconv.Itoa(*bandwidth), "migration_downtime": strconv.Itoa(*downtime)}}); err != nil {
		return err
	}
	harness.Progress(start, "cluster up, shared directory %s", shared)
	res := result{Bench: "migrate", Template: *template, BandwidthMiB: *bandwidth, DowntimeMs: *downtime, Machine: harness.ReadMachine()}
	var summary strings.Builder
	for _, m := range strings.Split(*mems, ",") {
		mem, err := strconv.Atoi(strings.TrimSpace(m))
		if err != nil {
			return fmt.Errorf("--mem: %w", err)
		}
		sr, err := measure(ctx, c, dc.State, *template, mem, *rounds, start)
		if err != nil {
			return err
		}
		res.Sizes = append(res.Sizes, sr)
		fmt.Fprintf(&summary, "%5d MiB guest: migration %s ms, downtime %s ms, job %s ms (%d migrations)\n",
			mem, statText(sr.Total), statText(sr.Downtime), statText(sr.Job), len(sr.Migrations))
	}
	return harness.Emit(res, summary.String())
}

func statText(s harness.Stats) string {
	return fmt.Sprintf("median %.0f (mean %.0f, max %.0f)", s.P50, s.Mean, s.Max)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// measure boots one guest of mem MiB and migrates it rounds times.
func measure(ctx context.Context, c *luxi.Client, st *devcluster.State, template string, mem, rounds int, start time.Time) (sizeResult, error) {
	sr := sizeResult{MemoryMiB: mem}
	name := fmt.Sprintf("mig%d", mem)
	t0 := time.Now()
	if err := harness.RunJob(ctx, c, harness.Op("OP_INSTANCE_CREATE", "instance_name", name, "disk_template", template,
		"disks", []any{map[string]any{"size": 64}}, "nics", []any{}, "os_type", "tiny+default", "hypervisor", "kvm",
		"beparams", map[string]any{"memory": mem}, "pnode", "node1")); err != nil {
		return sr, err
	}
	if err := waitBoot(ctx, c, st, name); err != nil {
		return sr, err
	}
	sr.BootSecs = time.Since(t0).Seconds()
	harness.Progress(start, "%s (%d MiB) booted in %.1fs", name, mem, sr.BootSecs)
	nodes := []string{"node1", "node2"}
	var totals, downs, jobs []float64
	for i := 0; i < rounds; i++ {
		from, to := nodes[i%2], nodes[(i+1)%2]
		j0 := time.Now()
		id, err := c.SubmitJob(ctx, []any{harness.Op("OP_INSTANCE_MIGRATE", "instance_name", name, "target_node", to)})
		if err != nil {
			return sr, err
		}
		status, _, err := luxi.WaitForJob(ctx, c, id, nil)
		if err != nil || status != "success" {
			return sr, fmt.Errorf("migration job %d of %s: %s %v", id, name, status, err)
		}
		m := migration{From: from, To: to, JobSeconds: time.Since(j0).Seconds()}
		rows, err := c.QueryJobs(ctx, []int64{id}, []string{"oplog"})
		if err != nil {
			return sr, err
		}
		b, _ := json.Marshal(rows)
		f := figuresRE.FindStringSubmatch(string(b))
		if f == nil {
			return sr, fmt.Errorf("job %d has no migration figures in its log", id)
		}
		m.TotalMs, _ = strconv.Atoi(f[1])
		m.DowntimeMs, _ = strconv.Atoi(f[2])
		sr.Migrations = append(sr.Migrations, m)
		totals, downs, jobs = append(totals, float64(m.TotalMs)), append(downs, float64(m.DowntimeMs)), append(jobs, m.JobSeconds*1000)
		harness.Progress(start, "%s %s -> %s: %d ms, downtime %d ms, job %.2fs", name, from, to, m.TotalMs, m.DowntimeMs, m.JobSeconds)
	}
	sr.Total, sr.Downtime, sr.Job = harness.Summarize(totals), harness.Summarize(downs), harness.Summarize(jobs)
	err := harness.RunJob(ctx, c, harness.Op("OP_INSTANCE_REMOVE", "instance_name", name, "shutdown_timeout", 0))
	return sr, err
}

// waitBoot waits for the guest's boot marker in its serial log.
func waitBoot(ctx context.Context, c *luxi.Client, st *devcluster.State, name string) error {
	rows, err := c.QueryInstances(ctx, []string{name}, []string{"uuid"}, false)
	if err != nil {
		return err
	}
	uuid, _ := rows[0][0].(string)
	if len(uuid) < 8 {
		return fmt.Errorf("no uuid for %s", name)
	}
	log := filepath.Join(st.RunDir, "node1", "kvm", strings.ToLower(uuid[:8]), "serial.log")
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), "CORRAL-GUEST-BOOTED") {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s did not boot within 5 minutes", name)
}

// startCeph brings up a one-host Ceph and points the default group's rbd
// disk parameters at it; the function returned stops it.
func startCeph(ctx context.Context, c *luxi.Client, start time.Time) (func(), error) {
	dir, err := os.MkdirTemp("", "ceph-")
	if err != nil {
		return nil, err
	}
	ceph, err := cephtest.StartIn(dir, cephtest.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting ceph: %w", err)
	}
	stop := func() { ceph.Stop(); os.RemoveAll(dir) }
	harness.Progress(start, "ceph up in %s", dir)
	if err := harness.RunJob(ctx, c, harness.Op("OP_GROUP_SET_PARAMS", "group_name", "default", "diskparams", map[string]any{
		"rbd": map[string]any{"pool": ceph.Pool, "conf": ceph.Conf, "keyring": ceph.Keyring}})); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}
