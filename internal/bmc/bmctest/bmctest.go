// Package bmctest is the test support of bare-metal tests, for tests only
// (no program imports it). It starts real BMCs: a qemu machine booting the
// tiny test guest, ipmi_sim with corral-bmc as its chassis program, and
// corral-bmc's Redfish service over TLS. It builds the agent ramdisk, boots
// it in qemu, plays the Bare Metal API's agent endpoints (AgentAPI), and
// reads and types on serial consoles. Every process is stopped by pid when
// the test ends. Tests skip when qemu, ipmi_sim, the kernel or busybox are
// missing, unless CORRAL_REQUIRE_BAREMETAL=1 makes that a failure.
package bmctest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/bmc"
)

// Require skips the test for a missing prerequisite, or fails it when
// CORRAL_REQUIRE_BAREMETAL=1 says this machine must have everything.
func Require(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CORRAL_REQUIRE_BAREMETAL") == "1" {
		t.Fatalf("CORRAL_REQUIRE_BAREMETAL=1 but %s", msg)
	}
	t.Skip(msg)
}

// NeedTools checks that the named programs are installed.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			Require(t, "%s is not installed", tool)
		}
	}
}

// NeedISOTools checks that boot ISOs can be built: xorriso and isolinux.
func NeedISOTools(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		Require(t, "xorriso is not installed")
	} else if _, err := os.Stat("/usr/lib/ISOLINUX/isolinux.bin"); err != nil {
		Require(t, "isolinux is not installed")
	}
}

// RepoRoot finds the module root from the test's directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("module root (go.mod) not found above the test directory")
		}
		dir = parent
	}
}

// GuestImage builds (or reuses) the tiny guest's kernel and initramfs in a
// cache shared by test runs.
func GuestImage(t testing.TB) (kernel, initrd string) {
	t.Helper()
	root := RepoRoot(t)
	cache := filepath.Join(os.TempDir(), "corral-guest-cache")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(root, "scripts", "build-guest-image.sh"), cache).CombinedOutput()
	if err != nil {
		Require(t, "the guest image could not be built: %v\n%s", err, out)
	}
	return filepath.Join(cache, "vmlinuz"), filepath.Join(cache, "initrd.img")
}

var (
	ramdiskOnce sync.Once
	ramdiskDir  string
	ramdiskErr  error
)

// AgentRamdisk builds corral-agent and its ramdisk (vmlinuz, initrd.img)
// with scripts/build-agent-ramdisk.sh once per test binary, on the tiny
// guest's cache, into a directory shared by test runs (the script replaces
// its files by rename), and returns that directory.
func AgentRamdisk(t testing.TB) string {
	t.Helper()
	NeedTools(t, "cpio", "gzip", "go")
	GuestImage(t)
	ramdiskOnce.Do(func() {
		ramdiskDir = filepath.Join(os.TempDir(), "corral-agent-ramdisk-cache")
		work, err := os.MkdirTemp("", "corral-agent-bin")
		if err != nil {
			ramdiskErr = err
			return
		}
		defer os.RemoveAll(work)
		root := RepoRoot(t)
		bin := filepath.Join(work, "corral-agent")
		build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/corral-agent")
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			ramdiskErr = fmt.Errorf("go build corral-agent: %w\n%s", err, out)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "build-agent-ramdisk.sh"), ramdiskDir)
		cmd.Env = append(os.Environ(), "AGENT_BIN="+bin, "CORRAL_GUEST_DIR="+filepath.Join(os.TempDir(), "corral-guest-cache"))
		if out, err := cmd.CombinedOutput(); err != nil {
			ramdiskErr = fmt.Errorf("build-agent-ramdisk.sh: %w\n%s", err, out)
		}
	})
	if ramdiskErr != nil {
		t.Fatal(ramdiskErr)
	}
	return ramdiskDir
}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// CorralBMC builds cmd/corral-bmc once per test binary and returns its path.
func CorralBMC(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "corral-bmc-bin")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, "corral-bmc"), "./cmd/corral-bmc")
		cmd.Dir = RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build corral-bmc: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, "corral-bmc")
}

// ShortDir is a temporary directory with a short path: unix socket paths
// are limited to 107 bytes, and t.TempDir's can be longer.
func ShortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "bmc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// NewMachine makes a machine directory that boots the tiny guest directly
// (boot device "disk") and has no network; adjust, when given, changes its
// description first (network, memory ...). The machine is powered off (its
// qemu killed by pid) when the test ends.
func NewMachine(t testing.TB, name string, adjust ...func(*bmc.Config)) *bmc.Machine {
	t.Helper()
	NeedTools(t, "qemu-system-x86_64")
	kernel, initrd := GuestImage(t)
	cfg := bmc.Config{
		Name: name, MemoryMB: 192, Kernel: kernel, Initrd: initrd,
		Append: "console=ttyS0 panic=-1 quiet",
	}
	for _, f := range adjust {
		f(&cfg)
	}
	m, err := bmc.Create(filepath.Join(ShortDir(t), name), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if pid, on := m.PID(); on {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return m
}

// WaitSerial polls the machine's serial log until it holds want.
func WaitSerial(t testing.TB, m *bmc.Machine, want string, d time.Duration) {
	t.Helper()
	WaitFile(t, m.SerialLogPath(), want, d)
}

// WaitPower polls until the machine's qemu runs (on) or is gone (!on).
func WaitPower(t testing.TB, m *bmc.Machine, on bool, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for m.PoweredOn() != on {
		if time.Now().After(deadline) {
			t.Fatalf("machine %s: powered on = %v after %s, want %v", m.Config.Name, !on, d, on)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startProcess starts cmd and kills it by pid when the test ends.
func startProcess(t testing.TB, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
}

// freeUDPPort finds a UDP port free on loopback for ipmi_sim.
func freeUDPPort(t testing.TB) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// IPMISim is a running ipmi_sim serving one machine.
type IPMISim struct {
	Port           int
	User, Password string
}

// SimOption changes how StartIPMISim sets ipmi_sim up.
type SimOption func(*simOptions)

type simOptions struct{ sol bool }

// WithSOL gives the BMC Serial-over-LAN on the machine's serial console:
// corral-bmc sol-bridge runs beside ipmi_sim. The bridge then holds the
// machine's serial socket (qemu serves one client); the serial log still
// records the console.
func WithSOL() SimOption { return func(o *simOptions) { o.sol = true } }

// StartIPMISim writes ipmi_sim's configuration with corral-bmc (bin) as the
// chassis program of m and starts it, waiting until it answers.
func StartIPMISim(t testing.TB, bin string, m *bmc.Machine, opts ...SimOption) IPMISim {
	t.Helper()
	NeedTools(t, "ipmi_sim", "ipmitool")
	var o simOptions
	for _, f := range opts {
		f(&o)
	}
	dir := ShortDir(t)
	sim := IPMISim{Port: freeUDPPort(t), User: "admin", Password: "s3cret-ipmi"}
	sol := ""
	if o.sol {
		sol = startSOLBridge(t, bin, m)
	}
	lan, emu, err := bmc.WriteIPMISimConfig(dir, bmc.IPMISimConfig{
		Port: sim.Port, User: sim.User, Password: sim.Password,
		ChassisControl: []string{bin, "chassis", m.Dir}, SOL: sol,
	})
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "ipmi_sim.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	cmd := exec.Command("ipmi_sim", "-c", lan, "-f", emu, "-s", filepath.Join(dir, "state"), "-n")
	cmd.Stdout, cmd.Stderr = log, log
	startProcess(t, cmd)
	deadline := time.Now().Add(10 * time.Second)
	for {
		probe := exec.Command("ipmitool", "-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(sim.Port),
			"-U", sim.User, "-E", "-C", "3", "-N", "1", "-R", "1", "mc", "info")
		probe.Env = append(os.Environ(), "IPMI_PASSWORD="+sim.Password)
		if probe.Run() == nil {
			return sim
		}
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(log.Name())
			t.Fatalf("ipmi_sim did not answer on port %d; its log:\n%s", sim.Port, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startSOLBridge starts corral-bmc sol-bridge for m and returns the
// address it listens on.
func startSOLBridge(t testing.TB, bin string, m *bmc.Machine) string {
	t.Helper()
	cmd := exec.Command(bin, "sol-bridge", "--machine", m.Dir, "--listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startProcess(t, cmd)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("corral-bmc sol-bridge did not say where it listens: %v", err)
	}
	return strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
}

// RedfishService is a running corral-bmc redfish.
type RedfishService struct {
	URL            string // https://127.0.0.1:PORT
	CAFile         string // the CA that signed the server certificate
	User, Password string
}

// StartRedfish starts corral-bmc redfish over TLS for the machines.
func StartRedfish(t testing.TB, bin string, machines ...*bmc.Machine) RedfishService {
	t.Helper()
	dir := ShortDir(t)
	svc := RedfishService{User: "operator", Password: "s3cret-redfish"}
	caFile, certFile, keyFile := caSignedCert(t, dir)
	svc.CAFile = caFile
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte(svc.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"redfish", "--listen", "127.0.0.1:0", "--cert", certFile, "--key", keyFile,
		"--user", svc.User, "--password-file", pwFile}
	for _, m := range machines {
		args = append(args, "--machine", m.Config.Name+"="+m.Dir)
	}
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "redfish.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(logFile.Name())
			t.Logf("corral-bmc redfish log:\n%s", data)
		}
		logFile.Close()
	})
	cmd.Stderr = logFile
	startProcess(t, cmd)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("corral-bmc redfish did not say where it listens: %v", err)
	}
	addr := strings.TrimSpace(line[strings.LastIndex(line, " ")+1:])
	svc.URL = "https://" + addr
	return svc
}
