// Package cephtest brings up a real, one-host Ceph cluster for tests: one
// monitor, one manager and one or more BlueStore OSDs on sparse files, with
// cephx, listening on 127.0.0.1 only, and an "rbd" pool of size 1. It uses
// Debian's ceph-mon, ceph-mgr and ceph-osd unchanged; nothing needs the
// kernel (no rbd or nbd driver, no device-mapper): clients go through
// librbd. A cluster takes about 15 s to reach HEALTH_OK on two cores.
//
// Tests call Start, which skips when the Ceph daemons are not installed,
// unless CORRAL_REQUIRE_CEPH=1 (CI), where their absence fails the test.
package cephtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Binaries the cluster needs, all from Debian's ceph packages.
var binaries = []string{"ceph-mon", "ceph-mgr", "ceph-osd", "ceph", "ceph-authtool", "monmaptool", "rbd"}

// Options shape the cluster.
type Options struct {
	OSDs int // number of OSDs, default 1
	// OSDSizeGiB is the size of each OSD's sparse block file, default 10.
	OSDSizeGiB int
}

// Cluster is a running test cluster.
type Cluster struct {
	Dir     string // everything lives here: data, logs, sockets
	Conf    string // ceph.conf for clients
	Keyring string // client.admin's keyring
	Client  string // "admin"
	Pool    string // "rbd", initialized for RBD
	port    int
	procs   []*exec.Cmd
}

// Available reports whether the Ceph daemons and tools are installed.
func Available() error {
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not installed: %w", b, err)
		}
	}
	return nil
}

// Require skips t when Ceph is missing, or fails it when CORRAL_REQUIRE_CEPH=1.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CORRAL_REQUIRE_CEPH") == "1" {
			t.Fatalf("Ceph is required (CORRAL_REQUIRE_CEPH=1): %v", err)
		}
		t.Skipf("Ceph not available: %v", err)
	}
	if os.Geteuid() != 0 {
		if os.Getenv("CORRAL_REQUIRE_CEPH") == "1" {
			t.Fatal("the test Ceph cluster runs as root (CORRAL_REQUIRE_CEPH=1)")
		}
		t.Skip("the test Ceph cluster runs as root")
	}
}

// StartIn brings a cluster up in dir (short: it holds unix sockets), for
// programs outside tests such as benchmarks; the caller stops it.
func StartIn(dir string, o Options) (*Cluster, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	return start(dir, o)
}

// Start brings a cluster up in a directory of t and stops it when t ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	Require(t)
	// Unix socket paths are limited to 107 bytes: t.TempDir can be long.
	dir, err := os.MkdirTemp("", "ceph-")
	if err != nil {
		t.Fatal(err)
	}
	c, err := start(dir, o)
	t.Cleanup(func() {
		if c != nil {
			c.Stop()
		}
		if !t.Failed() {
			os.RemoveAll(dir)
		} else {
			t.Logf("ceph logs kept in %s/log", dir)
		}
	})
	if err != nil {
		t.Fatalf("starting ceph: %v", err)
	}
	return c
}

func start(dir string, o Options) (*Cluster, error) {
	if o.OSDs <= 0 {
		o.OSDs = 1
	}
	if o.OSDSizeGiB <= 0 {
		o.OSDSizeGiB = 10
	}
	port, err := freePortRange(100)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "ceph.conf"), Keyring: filepath.Join(dir, "ceph.client.admin.keyring"),
		Client: "admin", Pool: "rbd", port: port}
	for _, d := range []string{"log", "run", "mon.a", "mgr.x"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return c, err
		}
	}
	fsid, err := uuid()
	if err != nil {
		return c, err
	}
	if err := os.WriteFile(c.Conf, []byte(c.confText(fsid, o)), 0o644); err != nil {
		return c, err
	}
	if err := c.bootstrapMon(fsid); err != nil {
		return c, err
	}
	if err := c.startMgr(); err != nil {
		return c, err
	}
	if err := c.startOSDs(o.OSDs); err != nil {
		return c, err
	}
	if err := c.waitOSDsUp(o.OSDs); err != nil {
		return c, err
	}
	if _, err := c.Run("ceph", "osd", "pool", "create", c.Pool, "32"); err != nil {
		return c, err
	}
	if _, err := c.Run("rbd", "pool", "init", c.Pool); err != nil {
		return c, err
	}
	return c, c.waitHealthy()
}

func (c *Cluster) confText(fsid string, o Options) string {
	d := c.Dir
	return fmt.Sprintf(`[global]
fsid = %[1]s
mon host = v2:127.0.0.1:%[2]d
public addr = 127.0.0.1
ms bind port min = %[3]d
ms bind port max = %[4]d
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
keyring = %[5]s/$cluster.$name.keyring
run dir = %[5]s/run
admin socket = %[5]s/run/$name.asok
log file = %[5]s/log/$name.log
pid file = %[5]s/run/$name.pid
osd pool default size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 1
osd crush chooseleaf type = 0
[client]
admin socket = %[5]s/run/$name.$pid.asok
log to file = false
[mon]
mon data = %[5]s/mon.$id
mon cluster log file = %[5]s/log/$cluster.$channel.log
keyring = %[5]s/mon.$id/keyring
[mgr]
mgr data = %[5]s/mgr.$id
keyring = %[5]s/mgr.$id/keyring
[osd]
osd data = %[5]s/osd.$id
keyring = %[5]s/osd.$id/keyring
bluestore block size = %[6]d
bluestore fsck on mkfs = false
osd memory target = 1073741824
`, fsid, c.port, c.port+1, c.port+99, d, int64(o.OSDSizeGiB)<<30)
}

func (c *Cluster) bootstrapMon(fsid string) error {
	monKR := filepath.Join(c.Dir, "mon.kr")
	steps := [][]string{
		{"ceph-authtool", "-C", monKR, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"},
		{"ceph-authtool", "-C", c.Keyring, "--gen-key", "-n", "client.admin",
			"--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *"},
		{"ceph-authtool", monKR, "--import-keyring", c.Keyring},
		{"monmaptool", "--create", "--addv", "a", fmt.Sprintf("[v2:127.0.0.1:%d]", c.port), "--fsid", fsid, filepath.Join(c.Dir, "monmap")},
		{"ceph-mon", "--mkfs", "-i", "a", "--monmap", filepath.Join(c.Dir, "monmap"), "--keyring", monKR},
	}
	for _, s := range steps {
		if _, err := c.Run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	return c.daemon("ceph-mon", "-i", "a")
}

func (c *Cluster) startMgr() error {
	if _, err := c.Run("ceph", "auth", "get-or-create", "mgr.x", "mon", "allow profile mgr", "osd", "allow *",
		"-o", filepath.Join(c.Dir, "mgr.x", "keyring")); err != nil {
		return err
	}
	return c.daemon("ceph-mgr", "-i", "x")
}

// startOSDs makes the OSDs' file systems in parallel (mkfs dominates the
// bring-up time) and starts them.
func (c *Cluster) startOSDs(n int) error {
	type made struct {
		id  string
		err error
	}
	ch := make(chan made, n)
	for i := 0; i < n; i++ {
		osdUUID, err := uuid()
		if err != nil {
			return err
		}
		key, err := c.Run("ceph-authtool", "--gen-print-key")
		if err != nil {
			return err
		}
		key = strings.TrimSpace(key)
		id, err := c.runInput(fmt.Sprintf(`{"cephx_secret": %q}`, key), "ceph", "osd", "new", osdUUID, "-i", "-")
		if err != nil {
			return err
		}
		id = strings.TrimSpace(id)
		data := filepath.Join(c.Dir, "osd."+id)
		if err := os.Mkdir(data, 0o700); err != nil {
			return err
		}
		// ceph-osd --mkfs does not write the keyring itself.
		kr := fmt.Sprintf("[osd.%s]\n\tkey = %s\n", id, key)
		if err := os.WriteFile(filepath.Join(data, "keyring"), []byte(kr), 0o600); err != nil {
			return err
		}
		go func() {
			_, err := c.Run("ceph-osd", "-i", id, "--mkfs", "--osd-uuid", osdUUID)
			ch <- made{id, err}
		}()
	}
	var errs []error
	for i := 0; i < n; i++ {
		m := <-ch
		if m.err == nil {
			m.err = c.daemon("ceph-osd", "-i", m.id)
		}
		errs = append(errs, m.err)
	}
	return errors.Join(errs...)
}

func (c *Cluster) waitOSDsUp(n int) error {
	want := fmt.Sprintf(`"num_up_osds":%d`, n)
	return c.poll(90*time.Second, "OSDs up", func() bool {
		out, err := c.Run("ceph", "osd", "stat", "-f", "json")
		return err == nil && strings.Contains(strings.ReplaceAll(out, " ", ""), want)
	})
}

func (c *Cluster) waitHealthy() error {
	return c.poll(90*time.Second, "HEALTH_OK", func() bool {
		out, err := c.Run("ceph", "health")
		return err == nil && strings.HasPrefix(strings.TrimSpace(out), "HEALTH_OK")
	})
}

func (c *Cluster) poll(limit time.Duration, what string, ok func() bool) error {
	end := time.Now().Add(limit)
	for !ok() {
		if time.Now().After(end) {
			return fmt.Errorf("ceph: no %s after %s (logs in %s/log)", what, limit, c.Dir)
		}
		time.Sleep(300 * time.Millisecond)
	}
	return nil
}

// daemon starts a Ceph daemon in the foreground as a child of the test, so
// it dies with the test process even when the test does not clean up.
func (c *Cluster) daemon(name string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(c.Dir, "log", name+".out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(name, append([]string{"-f", "-c", c.Conf}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c.procs = append(c.procs, cmd)
	go cmd.Wait() //nolint:errcheck // reaped here; Stop only kills
	return nil
}

// Stop kills every daemon of the cluster (the data is thrown away, so
// SIGKILL spares the OSDs' slow orderly shutdown).
func (c *Cluster) Stop() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
		}
	}
	for _, p := range c.procs {
		if p.Process == nil {
			continue
		}
		for i := 0; i < 100 && syscall.Kill(p.Process.Pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	c.procs = nil
}

// Env is the environment for Ceph's command line tools against this cluster.
func (c *Cluster) Env() []string {
	return append(os.Environ(), "CEPH_CONF="+c.Conf)
}

// Run runs a Ceph tool against the cluster and returns its standard output.
func (c *Cluster) Run(name string, args ...string) (string, error) {
	return c.runInput("", name, args...)
}

func (c *Cluster) runInput(stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// freePortRange finds n consecutive TCP ports on 127.0.0.1 nobody listens on.
func freePortRange(n int) (int, error) {
	for attempt := 0; attempt < 50; attempt++ {
		r, err := rand.Int(rand.Reader, big.NewInt(20000))
		if err != nil {
			return 0, err
		}
		base := 30000 + int(r.Int64())
		free := true
		for p := base; p < base+n && free; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, errors.New("no free range of ports for ceph")
}

func uuid() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}
