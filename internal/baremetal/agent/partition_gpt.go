package agent

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"unicode/utf16"
)

// GPT layout (UEFI 2.x, 512-byte sectors).
const (
	gptHeaderLBA     = 1
	gptHeaderSize    = 92
	gptMinEntrySize  = 128
	gptMaxEntries    = 1024
	gptEntryNameOff  = 56
	gptEntryNameLen  = 72 // bytes: 36 UTF-16 code units
	configDriveLabel = "config-2"
)

// gptLinuxData is the Linux file system data partition type
// 0FC63DAF-8483-4772-8E79-3D69D8477DE4, in its on-disk byte order.
var gptLinuxData = [16]byte{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}

var errBadGPT = errors.New("the GPT is damaged")

// gptHeader is what is kept of a GPT header; raw is its sector.
type gptHeader struct {
	raw                    [sectorSize]byte
	myLBA, altLBA          uint64
	firstUsable            uint64
	entriesLBA             uint64
	numEntries, entrySize  uint32
	entriesCRC             uint32
	entriesBytes, entrySec int64
}

func readGPTHeader(f *os.File, lba int64) (*gptHeader, error) {
	h := &gptHeader{}
	if _, err := f.ReadAt(h.raw[:], lba*sectorSize); err != nil {
		return nil, fmt.Errorf("reading the GPT header at sector %d: %w", lba, err)
	}
	b := h.raw[:]
	if string(b[:8]) != "EFI PART" {
		return nil, fmt.Errorf("%w: no GPT header at sector %d (512-byte sectors only)", errBadGPT, lba)
	}
	size := binary.LittleEndian.Uint32(b[12:])
	if size < gptHeaderSize || size > sectorSize {
		return nil, fmt.Errorf("%w: header size %d", errBadGPT, size)
	}
	hdr := append([]byte(nil), b[:size]...)
	clear(hdr[16:20])
	if crc32.ChecksumIEEE(hdr) != binary.LittleEndian.Uint32(b[16:]) {
		return nil, fmt.Errorf("%w: header CRC mismatch at sector %d", errBadGPT, lba)
	}
	h.myLBA, h.altLBA = binary.LittleEndian.Uint64(b[24:]), binary.LittleEndian.Uint64(b[32:])
	h.firstUsable = binary.LittleEndian.Uint64(b[40:])
	h.entriesLBA = binary.LittleEndian.Uint64(b[72:])
	h.numEntries, h.entrySize = binary.LittleEndian.Uint32(b[80:]), binary.LittleEndian.Uint32(b[84:])
	h.entriesCRC = binary.LittleEndian.Uint32(b[88:])
	if h.myLBA != uint64(lba) || h.entrySize < gptMinEntrySize || h.entrySize%8 != 0 || h.numEntries == 0 || h.numEntries > gptMaxEntries {
		return nil, fmt.Errorf("%w: header at sector %d describes %d entries of %d bytes", errBadGPT, lba, h.numEntries, h.entrySize)
	}
	h.entriesBytes = int64(h.numEntries) * int64(h.entrySize)
	h.entrySec = (h.entriesBytes + sectorSize - 1) / sectorSize
	return h, nil
}

// writeConfigDriveGPT adds the config drive partition to the GPT of the
// disk f of size bytes, as Ironic's agent does with sgdisk: the image's
// backup GPT (at the image's end) moves to the disk's end, the partition
// (Linux data, named config-2) takes the last 64 MiB of the usable space
// at most, aligned to 1 MiB and after the last partition; the ISO is
// written first, then the backup GPT, the primary GPT and the protective
// MBR's size, each flushed. It returns the partition's number.
func writeConfigDriveGPT(f *os.File, size int64, mbr [sectorSize]byte, iso []byte) (int, error) {
	protective := -1
	for i := 0; i < 4; i++ {
		switch b := mbr[mbrTableOffset+i*mbrEntrySize:]; {
		case b[4] == mbrPartGPTProtective && protective < 0:
			protective = i
		case b[4] != 0:
			return 0, fmt.Errorf("%w: a hybrid MBR (GPT with MBR partitions) is not supported", errBadGPT)
		}
	}
	h, entries, err := readGPT(f)
	if err != nil {
		return 0, err
	}
	diskLast := size/sectorSize - 1
	backupEntries := diskLast - h.entrySec
	lastUsable := backupEntries - 1
	slot, lastEnd, parts, err := scanGPT(h, entries)
	if err != nil {
		return 0, err
	}
	if p, err := existingConfigDrive(f, parts); err != nil || p != nil {
		if err != nil {
			return 0, err
		}
		return writeExistingConfigDrive(f, p, iso)
	}
	if slot < 0 {
		return 0, fmt.Errorf("%w: all %d GPT entries are used", errNoFreeSlot, h.numEntries)
	}
	if lastEnd > lastUsable || int64(h.altLBA) > diskLast {
		return 0, fmt.Errorf("%w: the image's partitions end at sector %d, the disk's last usable is %d", errNoRoom, lastEnd, lastUsable)
	}
	first := (lastEnd + partitionAlign - 1) / partitionAlign * partitionAlign
	start := max(first, (lastUsable+1-configDriveMaxSector)/partitionAlign*partitionAlign)
	sectors := min(lastUsable+1-start, configDriveMaxSector)
	if sectors <= 0 || sectors*sectorSize < int64(len(iso)) {
		return 0, fmt.Errorf("%w: %d bytes free after sector %d, the config drive has %d", errNoRoom, max(sectors, 0)*sectorSize, lastEnd, len(iso))
	}

	if err := setConfigDriveEntry(entries[slot*int(h.entrySize):(slot+1)*int(h.entrySize)], start, sectors); err != nil {
		return 0, err
	}
	if _, err := f.WriteAt(iso, start*sectorSize); err != nil {
		return 0, fmt.Errorf("writing the config drive: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("flushing the config drive: %w", err)
	}
	mbrSize := uint32(min(diskLast, int64(^uint32(0)))) // the protective MBR covers the disk, up to 2 TiB
	binary.LittleEndian.PutUint32(mbr[mbrTableOffset+protective*mbrEntrySize+12:], mbrSize)
	if err := writeGPT(f, h, entries, mbr, diskLast, lastUsable, start); err != nil {
		return 0, err
	}
	return slot + 1, nil
}

// writeGPT writes the backup GPT at the disk's end (entries before its
// last sector), then the primary GPT and the protective MBR, then wipes
// the image's old backup header when it lies before the config drive's
// start, flushing after the backup and at the end.
func writeGPT(f *os.File, h *gptHeader, entries []byte, mbr [sectorSize]byte, diskLast, lastUsable, start int64) error {
	backupEntries := lastUsable + 1
	entriesCRC := crc32.ChecksumIEEE(entries)
	oldAlt := int64(h.altLBA)
	primary := gptHeaderWith(h, gptHeaderLBA, uint64(diskLast), uint64(lastUsable), h.entriesLBA, entriesCRC)
	backup := gptHeaderWith(h, uint64(diskLast), gptHeaderLBA, uint64(lastUsable), uint64(backupEntries), entriesCRC)
	// The backup first: a crash then leaves the old primary, still valid
	// for the image's partitions, with its old backup.
	if _, err := f.WriteAt(entries, backupEntries*sectorSize); err != nil {
		return fmt.Errorf("writing the backup GPT entries: %w", err)
	}
	if _, err := f.WriteAt(backup[:], diskLast*sectorSize); err != nil {
		return fmt.Errorf("writing the backup GPT header: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("flushing the backup GPT: %w", err)
	}
	if _, err := f.WriteAt(entries, int64(h.entriesLBA)*sectorSize); err != nil {
		return fmt.Errorf("writing the GPT entries: %w", err)
	}
	if _, err := f.WriteAt(primary[:], gptHeaderLBA*sectorSize); err != nil {
		return fmt.Errorf("writing the GPT header: %w", err)
	}
	if _, err := f.WriteAt(mbr[:], 0); err != nil {
		return fmt.Errorf("writing the protective MBR: %w", err)
	}
	// The image's old backup header, now inside the disk, is wiped so no
	// tool mistakes it for the disk's.
	if oldAlt != diskLast && oldAlt < start {
		if _, err := f.WriteAt(make([]byte, sectorSize), oldAlt*sectorSize); err != nil {
			return fmt.Errorf("wiping the image's old backup GPT header: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("flushing the GPT: %w", err)
	}
	return nil
}

// readGPT reads the primary GPT header and its entries, checking both
// CRCs.
func readGPT(f *os.File) (*gptHeader, []byte, error) {
	h, err := readGPTHeader(f, gptHeaderLBA)
	if err != nil {
		return nil, nil, err
	}
	entries := make([]byte, h.entrySec*sectorSize)
	if _, err := f.ReadAt(entries, int64(h.entriesLBA)*sectorSize); err != nil {
		return nil, nil, fmt.Errorf("reading the GPT entries: %w", err)
	}
	entries = entries[:h.entriesBytes]
	if crc32.ChecksumIEEE(entries) != h.entriesCRC {
		return nil, nil, fmt.Errorf("%w: partition entries CRC mismatch", errBadGPT)
	}
	return h, entries, nil
}

// scanGPT returns the first free entry (-1: none), the sector after the
// last partition and the partitions.
func scanGPT(h *gptHeader, entries []byte) (slot int, lastEnd int64, parts []extent, err error) {
	slot, lastEnd = -1, int64(h.firstUsable)
	for i := 0; i < int(h.numEntries); i++ {
		e := entries[i*int(h.entrySize):]
		if bytes.Equal(e[:16], make([]byte, 16)) {
			if slot < 0 {
				slot = i
			}
			continue
		}
		first, last := int64(binary.LittleEndian.Uint64(e[32:])), int64(binary.LittleEndian.Uint64(e[40:]))
		if last < first {
			return 0, 0, nil, fmt.Errorf("%w: partition %d ends before it starts", errBadGPT, i+1)
		}
		parts = append(parts, extent{num: i + 1, start: first, sectors: last - first + 1})
		lastEnd = max(lastEnd, last+1)
	}
	return slot, lastEnd, parts, nil
}

// setConfigDriveEntry fills the GPT entry e: Linux data, a random
// version 4 GUID, the sectors, no attributes, the name config-2.
func setConfigDriveEntry(e []byte, start, sectors int64) error {
	copy(e[:16], gptLinuxData[:])
	if _, err := rand.Read(e[16:32]); err != nil {
		return fmt.Errorf("partition GUID: %w", err)
	}
	e[16+7] = e[16+7]&0x0f | 0x40 // version 4, in the GUID's mixed-endian layout
	e[16+8] = e[16+8]&0x3f | 0x80
	binary.LittleEndian.PutUint64(e[32:], uint64(start))
	binary.LittleEndian.PutUint64(e[40:], uint64(start+sectors-1))
	binary.LittleEndian.PutUint64(e[48:], 0)
	name := e[gptEntryNameOff : gptEntryNameOff+gptEntryNameLen]
	clear(name)
	for i, u := range utf16.Encode([]rune(configDriveLabel)) {
		binary.LittleEndian.PutUint16(name[2*i:], u)
	}
	return nil
}

// gptHeaderWith is h's header sector at myLBA with the given alternate
// header, last usable sector, entries and their CRC, its own CRC updated.
func gptHeaderWith(h *gptHeader, myLBA, altLBA, lastUsable, entriesLBA uint64, entriesCRC uint32) [sectorSize]byte {
	b := h.raw
	binary.LittleEndian.PutUint64(b[24:], myLBA)
	binary.LittleEndian.PutUint64(b[32:], altLBA)
	binary.LittleEndian.PutUint64(b[48:], lastUsable)
	binary.LittleEndian.PutUint64(b[72:], entriesLBA)
	binary.LittleEndian.PutUint32(b[88:], entriesCRC)
	size := binary.LittleEndian.Uint32(b[12:])
	clear(b[16:20])
	binary.LittleEndian.PutUint32(b[16:], crc32.ChecksumIEEE(b[:size]))
	return b
}
