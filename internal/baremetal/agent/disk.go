package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// diskPrefixes are the block devices that can be a machine's root disk, in
// the order they are preferred.
var diskPrefixes = []string{"vd", "sd", "nvme", "xvd", "hd"}

// rootDisk returns the disk to write images to: the configured one, the
// one the "name" root device hint names, or the first disk under SysBlock.
// Other hints are refused rather than ignored, so an image never lands on
// a disk the operator did not mean.
func (m *Machine) rootDisk(hints map[string]any) (string, error) {
	for k, v := range hints {
		if k != "name" {
			return "", fmt.Errorf("root device hint %q is not supported by this agent (only \"name\")", k)
		}
		name, ok := v.(string)
		if !ok || name == "" {
			return "", fmt.Errorf("root device hint name must be a device path")
		}
		name = strings.TrimPrefix(name, "s== ")
		if !strings.HasPrefix(name, "/dev/") {
			name = "/dev/" + name
		}
		return filepath.Join(m.DevDir, strings.TrimPrefix(name, "/dev/")), nil
	}
	if m.Disk != "" {
		return m.Disk, nil
	}
	ents, err := os.ReadDir(m.SysBlock)
	if err != nil {
		return "", fmt.Errorf("listing disks: %w", err)
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		for _, p := range diskPrefixes {
			if strings.HasPrefix(n, p) {
				names = append(names, n)
				break
			}
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("no disk found in %s", m.SysBlock)
	}
	rank := func(n string) int {
		for i, p := range diskPrefixes {
			if strings.HasPrefix(n, p) {
				return i
			}
		}
		return len(diskPrefixes)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		if len(names[i]) != len(names[j]) { // vdb before vdaa
			return len(names[i]) < len(names[j])
		}
		return names[i] < names[j]
	})
	return filepath.Join(m.DevDir, names[0]), nil
}

// metadataWipe is how much is zeroed at each end of a disk: partition
// tables (MBR, GPT and its backup), RAID and LVM labels and file system
// superblocks live there.
const metadataWipe = 1 << 20

// eraseMetadata zeroes the first and last MiB of the disk and flushes it.
func eraseMetadata(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("size of %s: %w", path, err)
	}
	zero := make([]byte, metadataWipe)
	head := min(size, metadataWipe)
	if _, err := f.WriteAt(zero[:head], 0); err != nil {
		return fmt.Errorf("wiping the start of %s: %w", path, err)
	}
	if tail := size - metadataWipe; tail > head {
		if _, err := f.WriteAt(zero, tail); err != nil {
			return fmt.Errorf("wiping the end of %s: %w", path, err)
		}
	} else if size > head {
		if _, err := f.WriteAt(zero[:size-head], head); err != nil {
			return fmt.Errorf("wiping the end of %s: %w", path, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("flushing %s: %w", path, err)
	}
	return f.Close()
}
