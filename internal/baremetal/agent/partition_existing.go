package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

var errManyConfigDrives = errors.New("more than one partition is labelled config-2")

// extent is a partition of the image: its number and sectors.
type extent struct {
	num            int
	start, sectors int64
}

// labelledConfigDrive reports whether the file system at off in f is
// labelled config-2: an ISO 9660 volume id, or a FAT label (FAT12/16 or
// FAT32 boot sector), as blkid reads them.
func labelledConfigDrive(f io.ReaderAt, off int64) bool {
	var pvd [72]byte
	if _, err := f.ReadAt(pvd[:], off+16*2048); err == nil && string(pvd[:6]) == "\x01CD001" &&
		string(bytes.TrimRight(pvd[40:72], " \x00")) == configDriveLabel {
		return true
	}
	var boot [512]byte
	if _, err := f.ReadAt(boot[:], off); err != nil || boot[510] != 0x55 || boot[511] != 0xaa {
		return false
	}
	for _, at := range []int{43, 71} { // FAT12/16, FAT32 volume labels
		if string(bytes.TrimRight(boot[at:at+11], " \x00")) == configDriveLabel &&
			(string(boot[54:57]) == "FAT" || string(boot[82:85]) == "FAT") {
			return true
		}
	}
	return false
}

// existingConfigDrive finds the image's own config-2 partition among
// parts, as Ironic's agent looks for it before making one: nil when there
// is none, an error when there are several.
func existingConfigDrive(f io.ReaderAt, parts []extent) (*extent, error) {
	var found *extent
	for i := range parts {
		if !labelledConfigDrive(f, parts[i].start*sectorSize) {
			continue
		}
		if found != nil {
			return nil, fmt.Errorf("%w: partitions %d and %d", errManyConfigDrives, found.num, parts[i].num)
		}
		found = &parts[i]
	}
	return found, nil
}

// writeExistingConfigDrive writes the ISO over the image's own config-2
// partition p, leaving the partition table as it is.
func writeExistingConfigDrive(f *os.File, p *extent, iso []byte) (int, error) {
	if int64(len(iso)) > p.sectors*sectorSize {
		return 0, fmt.Errorf("%w: the image's config-2 partition %d has %d bytes, the config drive %d",
			errNoRoom, p.num, p.sectors*sectorSize, len(iso))
	}
	if _, err := f.WriteAt(iso, p.start*sectorSize); err != nil {
		return 0, fmt.Errorf("writing the config drive to partition %d: %w", p.num, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("flushing the config drive: %w", err)
	}
	return p.num, nil
}
