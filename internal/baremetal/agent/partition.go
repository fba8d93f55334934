package agent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// The config drive partition, as Ironic's agent makes it: at most 64 MiB
// at the end of the disk, after the image's partitions.
const (
	sectorSize           = 512
	partitionAlign       = (1 << 20) / sectorSize // 1 MiB, in sectors
	configDriveMaxSector = (64 << 20) / sectorSize
	mbrTableOffset       = 446
	mbrEntrySize         = 16
	mbrPartLinux         = 0x83
	mbrPartGPTProtective = 0xee
)

// Errors of the config drive partition, for the callers' tests.
var (
	errNoPartitionTable = errors.New("the image has no partition table")
	errGPT              = errors.New("the image has a GPT partition table")
	errNoFreeSlot       = errors.New("the MBR has no free primary partition slot")
	errNoRoom           = errors.New("no room for the config drive after the image's partitions")
)

// mbrEntry is one primary partition entry of an MBR, in sectors.
type mbrEntry struct {
	Boot, Type     byte
	Start, Sectors uint32
}

func (e mbrEntry) used() bool { return e.Type != 0 && e.Sectors != 0 }

// readMBR reads the boot sector of f and its four primary entries.
func readMBR(f io.ReaderAt) ([sectorSize]byte, [4]mbrEntry, error) {
	var sec [sectorSize]byte
	var ents [4]mbrEntry
	if _, err := f.ReadAt(sec[:], 0); err != nil {
		return sec, ents, fmt.Errorf("reading the boot sector: %w", err)
	}
	if sec[510] != 0x55 || sec[511] != 0xaa {
		return sec, ents, errNoPartitionTable
	}
	for i := range ents {
		b := sec[mbrTableOffset+i*mbrEntrySize:]
		ents[i] = mbrEntry{Boot: b[0], Type: b[4],
			Start: binary.LittleEndian.Uint32(b[8:]), Sectors: binary.LittleEndian.Uint32(b[12:])}
		if ents[i].Type == mbrPartGPTProtective {
			return sec, ents, errGPT
		}
	}
	return sec, ents, nil
}

// configDrivePlace chooses the slot and extent of the config drive
// partition on a disk of diskSectors holding the entries ents: the slot
// after the last used one (else the first free one), the last 64 MiB of
// the disk aligned to 1 MiB, never before the 1 MiB-aligned end of the
// last partition. need is the ISO's size in bytes.
func configDrivePlace(ents [4]mbrEntry, diskSectors int64, need int) (slot int, start, sectors int64, err error) {
	end := min(diskSectors, int64(^uint32(0))) // an MBR addresses 2 TiB
	var lastEnd int64 = 1
	lastUsed := -1
	for i, e := range ents {
		if !e.used() {
			continue
		}
		lastUsed = i
		lastEnd = max(lastEnd, int64(e.Start)+int64(e.Sectors))
	}
	slot = -1
	for i := lastUsed + 1; i < len(ents) && slot < 0; i++ {
		slot = i
	}
	for i := 0; i < len(ents) && slot < 0; i++ {
		if !ents[i].used() {
			slot = i
		}
	}
	if slot < 0 {
		return 0, 0, 0, errNoFreeSlot
	}
	first := (lastEnd + partitionAlign - 1) / partitionAlign * partitionAlign
	start = max(first, (end-configDriveMaxSector)/partitionAlign*partitionAlign)
	sectors = min(end-start, configDriveMaxSector)
	if sectors <= 0 || sectors*sectorSize < int64(need) {
		free := max(sectors, 0) * sectorSize
		return 0, 0, 0, fmt.Errorf("%w: %d bytes free after sector %d, the config drive has %d", errNoRoom, free, lastEnd, need)
	}
	return slot, start, sectors, nil
}

// writeConfigDrivePartition writes the config drive ISO to a new
// partition at the end of the disk and adds it to the partition table the
// image brought, as Ironic's agent does: a primary partition of type 0x83
// in an MBR, a Linux data partition named config-2 in a GPT
// (writeConfigDriveGPT). A disk without a partition table is refused. It
// returns the partition's number.
func writeConfigDrivePartition(disk string, iso []byte) (int, error) {
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", disk, err)
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", disk, err)
	}
	sec, ents, err := readMBR(f)
	switch {
	case errors.Is(err, errNoPartitionTable):
		return 0, fmt.Errorf("config drive: %w (a whole-disk image); only images with an MBR partition table can get a config drive partition", err)
	case errors.Is(err, errGPT):
		part, err := writeConfigDriveGPT(f, size, sec, iso)
		if err != nil {
			return 0, fmt.Errorf("config drive on %s: %w", disk, err)
		}
		return part, f.Close()
	case err != nil:
		return 0, fmt.Errorf("config drive: %s: %w", disk, err)
	}
	var parts []extent
	for i, e := range ents {
		if e.used() {
			parts = append(parts, extent{num: i + 1, start: int64(e.Start), sectors: int64(e.Sectors)})
		}
	}
	if p, err := existingConfigDrive(f, parts); err != nil || p != nil {
		if err != nil {
			return 0, fmt.Errorf("config drive on %s: %w", disk, err)
		}
		part, err := writeExistingConfigDrive(f, p, iso)
		if err != nil {
			return 0, fmt.Errorf("config drive on %s: %w", disk, err)
		}
		return part, f.Close()
	}
	slot, start, sectors, err := configDrivePlace(ents, size/sectorSize, len(iso))
	if err != nil {
		return 0, fmt.Errorf("config drive on %s: %w", disk, err)
	}
	// The ISO first, flushed; the partition entry only once it is there.
	if _, err := f.WriteAt(iso, start*sectorSize); err != nil {
		return 0, fmt.Errorf("writing the config drive to %s: %w", disk, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("flushing %s: %w", disk, err)
	}
	b := sec[mbrTableOffset+slot*mbrEntrySize : mbrTableOffset+(slot+1)*mbrEntrySize]
	// CHS fields say "beyond CHS" (1023/254/63): the LBA fields count.
	copy(b, []byte{0x00, 0xfe, 0xff, 0xff, mbrPartLinux, 0xfe, 0xff, 0xff})
	binary.LittleEndian.PutUint32(b[8:], uint32(start))
	binary.LittleEndian.PutUint32(b[12:], uint32(sectors))
	if _, err := f.WriteAt(sec[:], 0); err != nil {
		return 0, fmt.Errorf("writing the partition table of %s: %w", disk, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("flushing %s: %w", disk, err)
	}
	return slot + 1, f.Close()
}
