package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/luxi"
)

// Live migration of a kvm guest (TCG) on the sharedfile template between
// three node daemons on this machine sharing one directory.
//
// The guest counts on its serial console every counterPeriod. The test reads
// the serial sockets of the source and of the destination (which exists as
// soon as the destination qemu waits) and notes when each count arrives;
// the longest silence must not exceed the downtime qemu reports plus
// consoleSlack plus the longest silence seen in the second before the
// migration (how late counts come on this machine anyway).
const (
	counterPeriod = 50 * time.Millisecond
	// consoleSlack covers what qemu's "downtime" does not count and the
	// console adds: the destination loading the device state and resuming
	// after the source's last byte, one counter period, the guest's timer
	// catching up after the pause, and the serial chardev's and the test's
	// reading on a loaded two-core machine running TCG.
	consoleSlack = 750 * time.Millisecond
)

// counts records when each count of the guest's counter arrived.
type counts struct {
	mu sync.Mutex
	at map[int]time.Time
}

var countRE = regexp.MustCompile(`CNT (\d+)`)

// follow reads a serial socket (waiting for it to appear) until stop;
// a command given is typed first (the socket takes one client at a time).
func (c *counts) follow(t *testing.T, sock, command string, stop <-chan struct{}) {
	var conn net.Conn
	for conn == nil {
		select {
		case <-stop:
			return
		default:
		}
		var err error
		if conn, err = net.Dial("unix", sock); err != nil {
			conn = nil
			time.Sleep(20 * time.Millisecond)
		}
	}
	go func() { <-stop; conn.Close() }()
	if command != "" {
		if _, err := conn.Write([]byte("\n" + command + "\n")); err != nil {
			t.Errorf("typing on the console: %v", err)
		}
	}
	s := bufio.NewScanner(conn)
	for s.Scan() {
		now := time.Now()
		m := countRE.FindStringSubmatch(s.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		c.mu.Lock()
		if _, ok := c.at[n]; !ok {
			c.at[n] = now
		}
		c.mu.Unlock()
	}
}

// gap is the longest silence between consecutive counts seen up to count
// upTo (all when 0), the count after it, and how many counts arrived.
func (c *counts) gap(upTo int) (time.Duration, int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := make([]int, 0, len(c.at))
	for n := range c.at {
		if upTo == 0 || n <= upTo {
			ns = append(ns, n)
		}
	}
	sort.Ints(ns)
	var worst time.Duration
	at := 0
	for i := 1; i < len(ns); i++ {
		if d := c.at[ns[i]].Sub(c.at[ns[i-1]]); d > worst {
			worst, at = d, ns[i]
		}
	}
	return worst, at, len(ns)
}

func (c *counts) last() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := 0
	for n := range c.at {
		m = max(m, n)
	}
	return m
}

type migrationCluster struct {
	*cluster
	uuid string
}

func (m *migrationCluster) serialSock(node string) string {
	return filepath.Join(m.st.RunDir, node, "kvm", strings.ToLower(m.uuid[:8]), "serial.sock")
}

// qemuOn maps the instance's qemu processes to the node daemon that runs
// them (from the pid file path on their command line).
func (m *migrationCluster) qemuOn() map[string]int {
	out := map[string]int{}
	for _, pid := range qemuPIDs(m.uuid) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		for _, node := range []string{"node1", "node2", "node3"} {
			if strings.Contains(string(b), filepath.Join(m.st.RunDir, node, "kvm")+"/") {
				out[node] = pid
			}
		}
	}
	return out
}

func (m *migrationCluster) primary() string {
	return m.instanceField("vm1", "pnode").(string)
}

// jobLog is the job's log messages, joined.
func (m *migrationCluster) jobLog(id int64) string {
	rows, err := m.luxi.QueryJobs(context.Background(), []int64{id}, []string{"oplog"})
	if err != nil {
		m.t.Fatal(err)
	}
	b, _ := json.Marshal(rows)
	return string(b)
}

var downtimeRE = regexp.MustCompile(`Migration completed in (\d+) ms, downtime (\d+) ms`)

// migrate runs a migration while following the console, and checks the
// gap against the reported downtime.
func (m *migrationCluster) migrate(from, to, command string) {
	t := m.t
	t.Helper()
	cs := &counts{at: map[int]time.Time{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range []string{from, to} {
		cmd := ""
		if n == from {
			cmd = command
		}
		wg.Add(1)
		go func() { defer wg.Done(); cs.follow(t, m.serialSock(n), cmd, stop) }()
	}
	// Twenty counts (a second) before the migration show how late the
	// guest's counts come on this machine anyway (TCG on shared cores).
	waitFor(t, 30*time.Second, "the counter on the console of "+from, func() bool { return cs.last() > 20 })
	baseline, _, _ := cs.gap(cs.last())
	id, status, res := m.submit(map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "vm1", "target_node": to})
	log := m.jobLog(id)
	if status != "success" {
		t.Fatalf("migrate %s -> %s: %s %v\n%s", from, to, status, res, log)
	}
	before := cs.last()
	waitFor(t, 20*time.Second, "the counter on the console of "+to, func() bool { return cs.last() > before+10 })
	close(stop)
	wg.Wait()
	mm := downtimeRE.FindStringSubmatch(log)
	if mm == nil {
		t.Fatalf("the job log has no migration figures: %s", log)
	}
	total, _ := strconv.Atoi(mm[1])
	down, _ := strconv.Atoi(mm[2])
	gap, at, seen := cs.gap(0)
	t.Logf("migration %s -> %s: %d ms, reported downtime %d ms, longest console silence %v (before count %d), %d counts seen; longest silence before the migration %v",
		from, to, total, down, gap.Round(time.Millisecond), at, seen, baseline.Round(time.Millisecond))
	if slack := consoleSlack + baseline; gap > time.Duration(down)*time.Millisecond+slack {
		t.Fatalf("the console was silent for %v, more than the reported downtime %d ms + %v (of which %v the longest silence before the migration)", gap, down, slack, baseline)
	}
	if p := m.primary(); p != to {
		t.Fatalf("primary node %s after migrating to %s", p, to)
	}
	on := m.qemuOn()
	if len(on) != 1 || on[to] == 0 {
		t.Fatalf("after migrating to %s the instance's qemu processes are %v", to, on)
	}
	if uid := procUID(t, on[to]); uid == 0 {
		t.Fatalf("qemu on %s runs as root", to)
	}
}

func TestLiveMigrationOnSharedFile(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{nodes: 3, hypervisors: []string{"kvm", "fake"}, imageDir: img})
	// Not under t.TempDir(), whose parent only root may enter: qemu, as
	// its own user, opens the images by path.
	shared, err := os.MkdirTemp("", "corral-shared-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	if out, err := c.corral("cluster", "modify", "--enabled-disk-templates", "file,diskless,sharedfile",
		"--shared-file-storage-dir", shared, "-H", fmt.Sprintf("kvm:migration_port=%d,migration_bandwidth=1000", port)); err != nil {
		t.Fatalf("cluster modify: %v\n%s", err, out)
	}
	if out, err := c.corral("cluster", "verify"); err != nil {
		t.Fatalf("cluster verify with a shared directory: %v\n%s", err, out)
	}
	c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1", "disk_template": "sharedfile",
		"disks": []any{map[string]any{"size": 64}}, "os_type": "tiny+default", "nics": []any{},
		"hypervisor": "kvm", "beparams": map[string]any{"memory": 128}, "pnode": "node1",
	})
	m := &migrationCluster{cluster: c, uuid: c.instanceField("vm1", "uuid").(string)}
	logPath := filepath.Join(c.st.RunDir, "node1", "kvm", strings.ToLower(m.uuid[:8]), "serial.log")
	waitFor(t, 120*time.Second, "the guest's boot marker", func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "CORRAL-GUEST-BOOTED name=vm1")
	})
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []string{"node1", "node2", "node3"} {
				b, _ := os.ReadFile(filepath.Join(c.st.RunDir, n, "kvm", strings.ToLower(m.uuid[:8]), "serial.log"))
				t.Logf("serial log on %s (last 1500 bytes): %s", n, tail(b, 1500))
			}

		}
	})
	counter := fmt.Sprintf("(i=0; while true; do i=$((i+1)); echo CNT $i; usleep %d; done) &", counterPeriod.Microseconds())
	m.migrate("node1", "node2", counter)
	m.migrate("node2", "node1", "")

	t.Run("destination killed mid-migration", func(t *testing.T) { m.killDestination(t) })
	t.Run("master killed mid-migration", func(t *testing.T) { m.killMaster(t) })
	t.Run("failover of a stopped instance", func(t *testing.T) {
		c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "vm1", "timeout": 30})
		from := m.primary()
		to := "node3"
		if from == "node3" {
			to = "node1"
		}
		if out, err := c.corral("instance", "failover", "-n", to, "vm1"); err != nil {
			t.Fatalf("failover: %v\n%s", err, out)
		}
		if p := m.primary(); p != to {
			t.Fatalf("primary %s after failover to %s", p, to)
		}
		if on := m.qemuOn(); len(on) != 0 {
			t.Fatalf("a stopped instance's failover started qemu: %v", on)
		}
		if s := c.instanceField("vm1", "status"); s != "ADMIN_down" {
			t.Fatalf("status after failing over a stopped instance: %v", s)
		}
	})
}

// slowMigration submits a migration that takes several seconds (the
// guest's ~90 MiB at 8 MiB/s) and returns once both qemu processes run.
func (m *migrationCluster) slowMigration(t *testing.T, to string) int64 {
	t.Helper()
	m.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "vm1", "hvparams": map[string]any{"migration_bandwidth": "8"}})
	id, err := m.luxi.SubmitJob(context.Background(), []any{map[string]any{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "vm1", "target_node": to}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the destination qemu on "+to, func() bool { return m.qemuOn()[to] != 0 })
	// Let the copy start.
	time.Sleep(2 * time.Second)
	return id
}

func (m *migrationCluster) fastAgain(t *testing.T) {
	m.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "vm1", "hvparams": map[string]any{"migration_bandwidth": "default"}})
}

// killDestination: the destination qemu dies in the middle; the job fails,
// the source runs on, the configuration is unchanged.
func (m *migrationCluster) killDestination(t *testing.T) {
	from := m.primary()
	to := "node3"
	src := m.qemuOn()[from]
	id := m.slowMigration(t, to)
	dst := m.qemuOn()[to]
	if err := exec.Command("kill", "-9", strconv.Itoa(dst)).Run(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	status, res, _ := luxi.WaitForJob(ctx, m.luxi, id, nil)
	if status != "error" {
		t.Fatalf("migration whose destination died ended %s: %v", status, res)
	}
	t.Logf("job error: %v", res)
	if p := m.primary(); p != from {
		t.Fatalf("primary %s after the failed migration, want %s", p, from)
	}
	if on := m.qemuOn(); len(on) != 1 || on[from] != src {
		t.Fatalf("after the failed migration the qemu processes are %v, want only the source's (pid %d)", on, src)
	}
	waitFor(t, 30*time.Second, "vm1 running on its node", func() bool { return m.instanceField("vm1", "status") == "running" })
	m.fastAgain(t)
}

// killMaster: corrald dies in the middle of a migration; qemu finishes it
// alone. After the restart, migrate --cleanup records where the instance
// runs.
func (m *migrationCluster) killMaster(t *testing.T) {
	from := m.primary()
	to := "node2"
	if from == to {
		to = "node1"
	}
	id := m.slowMigration(t, to)
	m.killCorrald()
	// qemu carries on without the master; wait until it is done (the
	// destination's monitor says "running" once it took over).
	waitFor(t, 3*time.Minute, "qemu to finish the migration without the master", func() bool { return m.destinationRunning(to) })
	m.restartCorrald()
	// The job resumes (or fails, if the master died at a step that may not
	// be repeated); either way cleanup must then agree with qemu.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	status, res, _ := luxi.WaitForJob(ctx, m.luxi, id, nil)
	t.Logf("the interrupted migration job ended %s: %v", status, res)
	m.fastAgain(t)
	if out, err := m.corral("instance", "migrate", "--cleanup", "vm1"); err != nil {
		t.Fatalf("migrate --cleanup: %v\n%s", err, out)
	}
	on := m.qemuOn()
	if len(on) != 1 {
		t.Fatalf("after cleanup the instance's qemu processes are %v", on)
	}
	for node := range on {
		if p := m.primary(); p != node {
			t.Fatalf("the configuration says %s, the instance runs on %s", p, node)
		}
	}
	waitFor(t, 30*time.Second, "vm1 running", func() bool { return m.instanceField("vm1", "status") == "running" })
}

// destinationRunning asks the destination qemu's monitor whether the guest
// runs there.
func (m *migrationCluster) destinationRunning(node string) bool {
	sock := filepath.Join(m.st.RunDir, node, "kvm", strings.ToLower(m.uuid[:8]), "qmp.sock")
	conn, err := net.DialTimeout("unix", sock, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	r := bufio.NewReader(conn)
	if _, err := r.ReadString('\n'); err != nil {
		return false
	}
	fmt.Fprint(conn, `{"execute":"qmp_capabilities"}`+"\n")
	if _, err := r.ReadString('\n'); err != nil {
		return false
	}
	fmt.Fprint(conn, `{"execute":"query-status"}`+"\n")
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		var reply struct {
			Return *struct {
				Status string `json:"status"`
			} `json:"return"`
		}
		if json.Unmarshal([]byte(line), &reply) == nil && reply.Return != nil {
			return reply.Return.Status == "running"
		}
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
