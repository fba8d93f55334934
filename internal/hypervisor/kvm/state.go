package kvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/hypervisor"
)

// record is what the driver keeps in StateDir about an instance it started,
// so that a restarted node daemon finds the qemu processes it left running.
// It is written before qemu starts and removed after qemu is gone.
type record struct {
	Spec hypervisor.InstanceSpec `json:"spec"`
	// Dir is the per-instance run directory holding the sockets, the serial
	// log and the pid file.
	Dir       string    `json:"dir"`
	User      string    `json:"user,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// Confinement is how qemu was confined at start, kept for instance info
	// and to undo it (chroot, cgroups, pool uid) at cleanup.
	Confinement hypervisor.Confinement `json:"confinement"`
}

// Files in an instance's run directory.
const (
	fileQMP        = "qmp.sock"
	fileSerial     = "serial.sock"
	fileSerialLog  = "serial.log"
	fileVNC        = "vnc.sock"
	fileGuestAgent = "qga.sock"
	filePID        = "pid"
	fileStartLog   = "qemu.log"
	dirChroot      = "chroot"
)

func (r *record) path(name string) string { return filepath.Join(r.Dir, name) }

func (h *Hypervisor) recordPath(name string) string {
	return filepath.Join(h.opts.StateDir, name+".json")
}

// loadRecord returns nil, nil when there is no record for name.
func (h *Hypervisor) loadRecord(name string) (*record, error) {
	if hypervisor.CheckName(name) != nil {
		return nil, nil // such a name can never have been started
	}
	data, err := os.ReadFile(h.recordPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kvm: %w", err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("kvm: corrupt record %s: %w", h.recordPath(name), err)
	}
	// Dir is removed on cleanup, so it must be where this driver puts run
	// directories and nowhere else.
	if r.Spec.Name != name || !hypervisor.ValidUUID(r.Spec.UUID) || filepath.Dir(r.Dir) != h.opts.RunDir {
		return nil, fmt.Errorf("kvm: inconsistent record %s", h.recordPath(name))
	}
	return &r, nil
}

func (h *Hypervisor) listRecords() ([]*record, error) {
	entries, err := os.ReadDir(h.opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("kvm: %w", err)
	}
	var out []*record
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		r, err := h.loadRecord(name)
		if err != nil {
			// One bad file must not hide every other instance.
			h.log.Warn("skipping unreadable instance record", "file", e.Name(), "err", err)
			continue
		}
		if r != nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

func (h *Hypervisor) saveRecord(r *record) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	return writeState(h.recordPath(r.Spec.Name), data)
}

// livePID returns the pid of the record's qemu, 0 when it no longer runs.
func livePID(r *record) int {
	pid, err := readPIDFile(r.path(filePID))
	if err != nil || !processIsInstance(pid, r.Spec.UUID) {
		return 0
	}
	return pid
}

// find returns the instance's record and the pid of its live qemu (0 when the
// process is gone or never started).
func (h *Hypervisor) find(name string) (*record, int, error) {
	r, err := h.loadRecord(name)
	if err != nil || r == nil {
		return nil, 0, err
	}
	return r, livePID(r), nil
}

// cleanup removes an instance's run directory, chroot, cgroups and record,
// and gives its pool uid back. The caller has made sure its qemu no longer
// runs.
func (h *Hypervisor) cleanup(r *record) error { return h.cleanupKeepUID(r, false) }

// cleanupKeepUID is cleanup that, when keepUID, leaves the pool uid taken: a
// new start of the same instance reuses it.
func (h *Hypervisor) cleanupKeepUID(r *record, keepUID bool) error {
	var errs []error
	if err := os.RemoveAll(r.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := h.removeChroot(r.Spec.Name, h.chrootDir(r.Spec.UUID)); err != nil {
		errs = append(errs, err)
	}
	if err := h.removeCgroups(r.Confinement.Cgroups); err != nil {
		h.log.Warn("cannot remove cgroups", "instance", r.Spec.Name, "err", err)
	}
	if !keepUID {
		if err := h.ReleaseIdentity(r.Spec.UUID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.Remove(h.recordPath(r.Spec.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kvm: clean up %s: %w", r.Spec.Name, err)
	}
	return nil
}

// writeState replaces a state file durably.
func writeState(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	return nil
}
