// Package fake is a hypervisor without guests: it records which instances
// "run" in a JSON file, so a node daemon using it can restart and still know
// them, and it accounts memory like a real node so allocation failures can be
// tested. It exists for tests and development clusters.
package fake

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

const stateFile = "instances.json"

// record is one instance in the state file.
type record struct {
	Spec      hypervisor.InstanceSpec `json:"spec"`
	State     hypervisor.State        `json:"state"`
	StartedAt time.Time               `json:"started_at"`
}

type stateDoc struct {
	Instances map[string]*record `json:"instances"`
}

// Hypervisor is the fake hypervisor. Several values may share one directory
// (as a restarted daemon does): every operation reads and writes the state
// file under an exclusive file lock.
type Hypervisor struct {
	dir      string
	capacity hypervisor.NodeResources
	mu       sync.Mutex // serialises operations inside this process; flock does it across
	mig      migrations // live migrations (migrate.go)
}

var _ hypervisor.Hypervisor = (*Hypervisor)(nil)

// New opens (creating if needed) the state directory dir. capacity is what
// NodeInfo reports before running instances are subtracted; its
// MemoryFreeMiB is the memory available to instances.
func New(dir string, capacity hypervisor.NodeResources) (*Hypervisor, error) {
	if err := os.MkdirAll(filepath.Join(dir, "console"), 0o750); err != nil {
		return nil, fmt.Errorf("fake hypervisor: %w", err)
	}
	h := &Hypervisor{dir: dir, capacity: capacity}
	// Fail early on an unreadable state file rather than at the first Start.
	if err := h.update(func(*stateDoc) (bool, error) { return false, nil }); err != nil {
		return nil, err
	}
	return h, nil
}

// Name returns "fake".
func (h *Hypervisor) Name() string { return hypervisor.Fake }

// ValidateParams checks hv with the fake hypervisor's own table: the
// migration parameters (see hypervisor.DefaultParams).
func (h *Hypervisor) ValidateParams(hv map[string]string) error {
	return hypervisor.ValidateParams(hypervisor.Fake, hv)
}

// Start records the instance as running.
func (h *Hypervisor) Start(ctx context.Context, spec hypervisor.InstanceSpec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := hypervisor.CheckSpec(spec); err != nil {
		return err
	}
	if err := h.ValidateParams(hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.Fake), spec.HVParams)); err != nil {
		return err
	}
	return h.update(func(st *stateDoc) (bool, error) {
		if r, ok := st.Instances[spec.Name]; ok {
			if r.Spec.UUID == spec.UUID {
				return false, nil
			}
			return false, ecode.Errorf(ecode.Exists, "instance %s already runs with uuid %s", spec.Name, r.Spec.UUID)
		}
		if free := h.freeMiB(st); spec.MemoryMiB > free {
			return false, ecode.Errorf(ecode.NoRes, "not enough memory to start %s: need %d MiB, %d MiB free", spec.Name, spec.MemoryMiB, free)
		}
		state := hypervisor.StateRunning
		if spec.Incoming {
			state = hypervisor.StatePaused // waits for its migration
		}
		st.Instances[spec.Name] = &record{Spec: spec, State: state, StartedAt: time.Now().UTC()}
		banner := fmt.Sprintf("fake console for %s\n", spec.Name)
		if err := os.WriteFile(h.ConsoleLog(spec.Name), []byte(banner), 0o640); err != nil {
			return false, fmt.Errorf("fake hypervisor: console log: %w", err)
		}
		return true, nil
	})
}

// Stop forgets the instance. The fake has no guest to wait for, so timeout
// and force make no difference.
func (h *Hypervisor) Stop(ctx context.Context, name string, timeout time.Duration, force bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.forgetMigration(name)
	return h.update(func(st *stateDoc) (bool, error) {
		if _, ok := st.Instances[name]; !ok {
			return false, nil
		}
		delete(st.Instances, name)
		if err := os.Remove(h.ConsoleLog(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("fake hypervisor: %w", err)
		}
		return true, nil
	})
}

// Reboot marks a running (or crashed) instance as running again.
func (h *Hypervisor) Reboot(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return h.update(func(st *stateDoc) (bool, error) {
		r, ok := st.Instances[name]
		if !ok {
			return false, hypervisor.NotRunning(name)
		}
		r.State = hypervisor.StateRunning
		return true, nil
	})
}

// SetState changes the reported state of a running instance, so tests can
// simulate a paused or crashed guest.
func (h *Hypervisor) SetState(name string, s hypervisor.State) error {
	return h.update(func(st *stateDoc) (bool, error) {
		r, ok := st.Instances[name]
		if !ok {
			return false, hypervisor.NotRunning(name)
		}
		r.State = s
		return true, nil
	})
}

// List returns the recorded instances sorted by name.
func (h *Hypervisor) List(ctx context.Context) ([]hypervisor.RunningInstance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []hypervisor.RunningInstance
	err := h.update(func(st *stateDoc) (bool, error) {
		for _, r := range st.Instances {
			out = append(out, running(r))
		}
		return false, nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// Info returns the instance, or nil when it is not recorded.
func (h *Hypervisor) Info(ctx context.Context, name string) (*hypervisor.RunningInstance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *hypervisor.RunningInstance
	err := h.update(func(st *stateDoc) (bool, error) {
		if r, ok := st.Instances[name]; ok {
			ri := running(r)
			out = &ri
		}
		return false, nil
	})
	return out, err
}

// NodeInfo reports the configured capacity minus running instances' memory.
func (h *Hypervisor) NodeInfo(ctx context.Context) (hypervisor.NodeResources, error) {
	if err := ctx.Err(); err != nil {
		return hypervisor.NodeResources{}, err
	}
	res := h.capacity
	res.Hypervisor = hypervisor.Fake
	err := h.update(func(st *stateDoc) (bool, error) {
		res.MemoryFreeMiB = h.freeMiB(st)
		return false, nil
	})
	return res, err
}

// Console returns a stream that first says which instance it belongs to and
// then echoes what is written to it. Echoed input is appended to the console
// log, as a real serial console's output would be.
func (h *Hypervisor) Console(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	info, err := h.Info(ctx, name)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, hypervisor.NotRunning(name)
	}
	ours, theirs := net.Pipe()
	logPath := h.ConsoleLog(name)
	go func() {
		defer ours.Close()
		if _, err := fmt.Fprintf(ours, "fake console for %s\n", name); err != nil {
			return
		}
		buf := make([]byte, 4096)
		for {
			n, err := ours.Read(buf)
			if n > 0 {
				if f, ferr := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0); ferr == nil {
					_, _ = f.Write(buf[:n])
					_ = f.Close()
				}
				if _, werr := ours.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return theirs, nil
}

// ConsoleLog is the path of the instance's console log; the file exists while
// the instance runs.
func (h *Hypervisor) ConsoleLog(name string) string {
	if hypervisor.CheckName(name) != nil {
		return ""
	}
	return filepath.Join(h.dir, "console", name+".log")
}

func running(r *record) hypervisor.RunningInstance {
	return hypervisor.RunningInstance{
		Name: r.Spec.Name, UUID: r.Spec.UUID, State: r.State,
		MemoryMiB: r.Spec.MemoryMiB, VCPUs: r.Spec.VCPUs, StartedAt: r.StartedAt,
	}
}

func (h *Hypervisor) freeMiB(st *stateDoc) int64 {
	free := h.capacity.MemoryFreeMiB
	for _, r := range st.Instances {
		free -= r.Spec.MemoryMiB
	}
	return max(free, 0)
}

// update runs fn on the current state under the lock and saves the state when
// fn reports a change.
func (h *Hypervisor) update(fn func(*stateDoc) (changed bool, err error)) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	lock, err := os.OpenFile(filepath.Join(h.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		return fmt.Errorf("fake hypervisor: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("fake hypervisor: lock state: %w", err)
	}
	// Closing the file releases the lock.

	st := &stateDoc{Instances: map[string]*record{}}
	data, err := os.ReadFile(filepath.Join(h.dir, stateFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("fake hypervisor: %w", err)
	default:
		if err := json.Unmarshal(data, st); err != nil {
			return fmt.Errorf("fake hypervisor: corrupt state file: %w", err)
		}
		if st.Instances == nil {
			st.Instances = map[string]*record{}
		}
	}
	changed, err := fn(st)
	if err != nil || !changed {
		return err
	}
	data, err = json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("fake hypervisor: %w", err)
	}
	return writeState(filepath.Join(h.dir, stateFile), data)
}

// writeState replaces a state file durably.
func writeState(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("fake hypervisor: %w", err)
	}
	return nil
}
