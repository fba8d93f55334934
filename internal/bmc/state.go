package bmc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
)

// Boot devices a machine can be told to boot from next. BootNone means no
// override: the machine boots from its disk.
const (
	BootNone  = "none"
	BootPXE   = "pxe"
	BootCDROM = "cdrom"
	BootDisk  = "disk"
	BootBIOS  = "bios"
)

// BootOverride is the boot device the machine uses at its next power on,
// kept in the directory so it survives the BMC process.
type BootOverride struct {
	Device string `json:"device"`
	// Persistent keeps the override for every boot; otherwise the next
	// power on consumes it (Redfish's Once).
	Persistent bool `json:"persistent"`
}

// ValidBootDevice reports whether dev is one of the boot devices above.
func ValidBootDevice(dev string) bool {
	switch dev {
	case BootNone, BootPXE, BootCDROM, BootDisk, BootBIOS:
		return true
	}
	return false
}

// BootOverride returns the stored boot override (none when never set).
func (m *Machine) BootOverride() (BootOverride, error) {
	data, err := os.ReadFile(m.path(bootFile))
	if errors.Is(err, fs.ErrNotExist) {
		return BootOverride{Device: BootNone}, nil
	}
	if err != nil {
		return BootOverride{}, fmt.Errorf("machine %s boot device: %w", m.Config.Name, err)
	}
	var b BootOverride
	if err := json.Unmarshal(data, &b); err != nil {
		return BootOverride{}, fmt.Errorf("machine %s boot device file: %w", m.Config.Name, err)
	}
	if !ValidBootDevice(b.Device) {
		return BootOverride{}, fmt.Errorf("machine %s boot device file names %q", m.Config.Name, b.Device)
	}
	return b, nil
}

// SetBootOverride stores the boot device for the next power on.
func (m *Machine) SetBootOverride(b BootOverride) error {
	if !ValidBootDevice(b.Device) {
		return ecode.Errorf(ecode.Inval, "boot device %q is not one of none, pxe, cdrom, disk, bios", b.Device)
	}
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return m.writeBoot(b)
}

func (m *Machine) writeBoot(b BootOverride) error {
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("boot device: %w", err)
	}
	if err := atomicfile.WriteFile(m.path(bootFile), data, 0o640); err != nil {
		return fmt.Errorf("machine %s boot device: %w", m.Config.Name, err)
	}
	return nil
}

// Media is the virtual CD's state.
type Media struct {
	// Image is what the client inserted (a URL or a path); "" when empty.
	Image    string `json:"image,omitempty"`
	Inserted bool   `json:"inserted"`
	// Path is the local file qemu reads: the downloaded image, or Image
	// itself when it was a local path.
	Path string `json:"path,omitempty"`
}

// Media returns the virtual CD's state.
func (m *Machine) Media() (Media, error) {
	data, err := os.ReadFile(m.path(mediaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Media{}, nil
	}
	if err != nil {
		return Media{}, fmt.Errorf("machine %s virtual media: %w", m.Config.Name, err)
	}
	var md Media
	if err := json.Unmarshal(data, &md); err != nil {
		return Media{}, fmt.Errorf("machine %s virtual media file: %w", m.Config.Name, err)
	}
	return md, nil
}

func (m *Machine) writeMedia(md Media) error {
	data, err := json.Marshal(md)
	if err != nil {
		return fmt.Errorf("virtual media: %w", err)
	}
	if err := atomicfile.WriteFile(m.path(mediaFile), data, 0o640); err != nil {
		return fmt.Errorf("machine %s virtual media: %w", m.Config.Name, err)
	}
	return nil
}
