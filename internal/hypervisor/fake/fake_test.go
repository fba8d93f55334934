package fake

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

func spec(name, uuid string, mem int64) hypervisor.InstanceSpec {
	return hypervisor.InstanceSpec{Name: name, UUID: uuid, MemoryMiB: mem, VCPUs: 1,
		HVParams: map[string]string{"migration_mode": "live"}}
}

const (
	uuidA = "11111111-2222-3333-4444-555555555555"
	uuidB = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
)

func newFake(t *testing.T, dir string) *Hypervisor {
	t.Helper()
	h, err := New(dir, hypervisor.NodeResources{MemoryTotalMiB: 2048, MemoryFreeMiB: 1024, MemoryNodeMiB: 512, CPUs: 4})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestLifecycleSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := newFake(t, dir)
	if h.Name() != "fake" {
		t.Fatalf("Name() = %q", h.Name())
	}
	if err := h.Start(ctx, spec("a.example", uuidA, 256)); err != nil {
		t.Fatal(err)
	}
	// Idempotent with the same uuid, refused with another.
	if err := h.Start(ctx, spec("a.example", uuidA, 256)); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if err := h.Start(ctx, spec("a.example", uuidB, 256)); ecode.ClassOf(err) != ecode.Exists {
		t.Fatalf("start with other uuid: %v", err)
	}

	// A new value on the same directory (a restarted node daemon) sees it.
	h2 := newFake(t, dir)
	info, err := h2.Info(ctx, "a.example")
	if err != nil || info == nil {
		t.Fatalf("Info after restart = %v, %v", info, err)
	}
	if info.UUID != uuidA || info.State != hypervisor.StateRunning || info.MemoryMiB != 256 || info.StartedAt.IsZero() {
		t.Fatalf("Info after restart = %+v", info)
	}
	list, err := h2.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "a.example" {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if err := h2.SetState("a.example", hypervisor.StateCrashed); err != nil {
		t.Fatal(err)
	}
	if info, _ := h.Info(ctx, "a.example"); info.State != hypervisor.StateCrashed {
		t.Fatalf("state after SetState = %s", info.State)
	}
	if err := h.Reboot(ctx, "a.example"); err != nil {
		t.Fatal(err)
	}
	if info, _ := h2.Info(ctx, "a.example"); info.State != hypervisor.StateRunning {
		t.Fatalf("state after Reboot = %s", info.State)
	}

	if err := h2.Stop(ctx, "a.example", time.Second, false); err != nil {
		t.Fatal(err)
	}
	if err := h2.Stop(ctx, "a.example", time.Second, true); err != nil {
		t.Fatalf("stop of a stopped instance: %v", err)
	}
	if info, err := newFake(t, dir).Info(ctx, "a.example"); info != nil || err != nil {
		t.Fatalf("Info after stop = %v, %v", info, err)
	}
	if err := h.Reboot(ctx, "a.example"); ecode.ClassOf(err) != ecode.State {
		t.Fatalf("reboot of a stopped instance: %v", err)
	}
	// No temporary files left behind by the atomic writes.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("left over %s", e.Name())
		}
	}
}

func TestMemoryAccounting(t *testing.T) {
	ctx := context.Background()
	h := newFake(t, t.TempDir())
	if err := h.Start(ctx, spec("a", uuidA, 800)); err != nil {
		t.Fatal(err)
	}
	res, err := h.NodeInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := hypervisor.NodeResources{MemoryTotalMiB: 2048, MemoryFreeMiB: 224, MemoryNodeMiB: 512, CPUs: 4, Hypervisor: "fake"}
	if res != want {
		t.Fatalf("NodeInfo = %+v, want %+v", res, want)
	}
	if err := h.Start(ctx, spec("b", uuidB, 300)); ecode.ClassOf(err) != ecode.NoRes {
		t.Fatalf("start beyond capacity: %v", err)
	}
	if info, _ := h.Info(ctx, "b"); info != nil {
		t.Fatal("failed start left the instance recorded")
	}
	if err := h.Start(ctx, spec("b", uuidB, 224)); err != nil {
		t.Fatalf("start that fits exactly: %v", err)
	}
}

func TestStartValidates(t *testing.T) {
	h := newFake(t, t.TempDir())
	s := spec("a", uuidA, 64)
	s.HVParams = map[string]string{"no_such": "x"}
	if err := h.Start(context.Background(), s); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("unknown hvparam: %v", err)
	}
	s = spec("../a", uuidA, 64)
	if err := h.Start(context.Background(), s); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("bad name: %v", err)
	}
	if err := h.ValidateParams(map[string]string{"acpi": "perhaps"}); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("bad value: %v", err)
	}
}

func TestConsole(t *testing.T) {
	ctx := context.Background()
	h := newFake(t, t.TempDir())
	if _, err := h.Console(ctx, "a"); ecode.ClassOf(err) != ecode.State {
		t.Fatalf("console of a stopped instance: %v", err)
	}
	if err := h.Start(ctx, spec("a", uuidA, 64)); err != nil {
		t.Fatal(err)
	}
	c, err := h.Console(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || line != "fake console for a\n" {
		t.Fatalf("banner = %q, %v", line, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := io.WriteString(c, "hello\n"); err != nil {
			t.Error(err)
		}
	})
	line, err = r.ReadString('\n')
	wg.Wait()
	if err != nil || line != "hello\n" {
		t.Fatalf("echo = %q, %v", line, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	logData, err := os.ReadFile(h.ConsoleLog("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logData), "fake console for a") || !strings.Contains(string(logData), "hello") {
		t.Fatalf("console log = %q", logData)
	}
	if filepath.Dir(h.ConsoleLog("a")) == "" || h.ConsoleLog("../x") != "" {
		t.Fatal("ConsoleLog accepted a bad name")
	}
}

func TestCorruptStateFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir, hypervisor.NodeResources{}); err == nil {
		t.Fatal("New accepted a corrupt state file")
	}
}
