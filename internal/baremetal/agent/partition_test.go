package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bmc/bmctest"
)

// sparseDisk makes a sparse file of size bytes with the boot sector sec.
func sparseDisk(t *testing.T, size int64, sec []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if sec != nil {
		if _, err := f.WriteAt(sec, 0); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// bootSector is an MBR with the given entries (nil: unused slot).
func bootSector(ents ...*mbrEntry) []byte {
	sec := make([]byte, sectorSize)
	copy(sec, "boot code")
	for i, e := range ents {
		if e == nil {
			continue
		}
		b := sec[mbrTableOffset+i*mbrEntrySize:]
		b[0], b[4] = e.Boot, e.Type
		binary.LittleEndian.PutUint32(b[8:], e.Start)
		binary.LittleEndian.PutUint32(b[12:], e.Sectors)
	}
	sec[510], sec[511] = 0x55, 0xaa
	return sec
}

func TestConfigDrivePartitionAtTheEndOfTheDisk(t *testing.T) {
	const gib = int64(1 << 30)
	root := &mbrEntry{Boot: 0x80, Type: 0x83, Start: 2048, Sectors: 4 << 20 / 512 * 100} // 400 MiB
	sec := bootSector(root)
	disk := sparseDisk(t, gib+12345, sec)
	iso := bytes.Repeat([]byte("ISO9660 "), 40000)
	part, err := writeConfigDrivePartition(disk, iso)
	if err != nil {
		t.Fatal(err)
	}
	if part != 2 {
		t.Fatalf("partition %d, want 2", part)
	}
	f, err := os.Open(disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, ents, err := readMBR(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:mbrTableOffset+mbrEntrySize], sec[:mbrTableOffset+mbrEntrySize]) || got[510] != 0x55 || got[511] != 0xaa {
		t.Fatal("the boot code or the image's partition changed")
	}
	// The disk ends 12345 bytes after 1 GiB: the partition is the last
	// 64 MiB before the last whole MiB.
	want := mbrEntry{Type: 0x83, Start: uint32((gib - 64<<20) / 512), Sectors: 64 << 20 / 512}
	if ents[1] != want || ents[2].used() || ents[3].used() {
		t.Fatalf("entries %+v, want %+v in slot 2", ents, want)
	}
	back := make([]byte, len(iso))
	if _, err := f.ReadAt(back, int64(want.Start)*512); err != nil || !bytes.Equal(back, iso) {
		t.Fatalf("the partition does not hold the ISO: %v", err)
	}
}

func TestConfigDrivePartitionSmallDisk(t *testing.T) {
	// 10 MiB free after a partition ending at 20 MiB + 1 sector: the
	// partition starts at 21 MiB and takes the rest.
	sec := bootSector(nil, &mbrEntry{Type: 0x83, Start: 2048, Sectors: 20<<20/512 - 2048 + 1})
	disk := sparseDisk(t, 30<<20, sec)
	part, err := writeConfigDrivePartition(disk, []byte("small iso"))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(disk)
	defer f.Close()
	_, ents, _ := readMBR(f)
	want := mbrEntry{Type: 0x83, Start: 21 << 20 / 512, Sectors: 9 << 20 / 512}
	if part != 3 || ents[2] != want {
		t.Fatalf("partition %d entries %+v", part, ents)
	}
}

func TestConfigDrivePartitionRefusals(t *testing.T) {
	full := &mbrEntry{Type: 0x83, Start: 2048, Sectors: 1000}
	for name, c := range map[string]struct {
		sec  []byte
		size int64
		want error
	}{
		"no table":  {make([]byte, 512), 8 << 20, errNoPartitionTable},
		"no gpt":    {bootSector(&mbrEntry{Type: 0xee, Start: 1, Sectors: 1<<14 - 1}), 8 << 20, errBadGPT},
		"no slot":   {bootSector(full, full, full, full), 8 << 20, errNoFreeSlot},
		"full disk": {bootSector(&mbrEntry{Type: 0x83, Start: 2048, Sectors: 8<<20/512 - 2048}), 8 << 20, errNoRoom},
	} {
		disk := sparseDisk(t, c.size, c.sec)
		before, _ := os.ReadFile(disk)
		_, err := writeConfigDrivePartition(disk, []byte("iso"))
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", name, err, c.want)
		}
		if after, _ := os.ReadFile(disk); !bytes.Equal(before, after) {
			t.Fatalf("%s: the disk changed", name)
		}
	}
}

func TestConfigDrivePlaceTooBig(t *testing.T) {
	ents := [4]mbrEntry{{Type: 0x83, Start: 2048, Sectors: 2048}}
	if _, _, _, err := configDrivePlace(ents, 1<<22, 64<<20+1); !errors.Is(err, errNoRoom) {
		t.Fatalf("a config drive over 64 MiB: %v", err)
	}
	// A free slot before the used one is taken when none follows it.
	ents = [4]mbrEntry{{}, {}, {}, {Type: 0x83, Start: 2048, Sectors: 2048}}
	if slot, _, _, err := configDrivePlace(ents, 1<<22, 100); err != nil || slot != 0 {
		t.Fatalf("slot %d %v", slot, err)
	}
}

// gptImage makes a GPT image of size bytes with sgdisk: one partition
// as sgdisk's -n says (from 1 MiB for 2 MiB when empty), its first 2 MiB
// filled with a pattern.
func gptImage(t *testing.T, size int64, part string) []byte {
	t.Helper()
	bmctest.NeedTools(t, "sgdisk")
	p := sparseDisk(t, size, nil)
	if part == "" {
		part = "1:2048:+2M"
	}
	if out, err := exec.Command("sgdisk", "-o", "-n", part, "-t", "1:8300", p).CombinedOutput(); err != nil {
		t.Fatalf("sgdisk: %v\n%s", err, out)
	}
	img, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	copy(img[1<<20:3<<20], bytes.Repeat([]byte("rootfs! "), 1<<18))
	return img
}

// TestConfigDrivePartitionGPT writes an 8 MiB GPT image to a 200 MiB disk
// and adds the config drive: sgdisk then finds both GPTs valid at the
// disk's ends, the image's partition unchanged and a second one named
// config-2 over the last 64 MiB, holding the ISO.
func TestConfigDrivePartitionGPT(t *testing.T) {
	img := gptImage(t, 8<<20, "")
	disk := sparseDisk(t, 200<<20, img)
	iso := bytes.Repeat([]byte("ISO9660 "), 50000)
	part, err := writeConfigDrivePartition(disk, iso)
	if err != nil {
		t.Fatal(err)
	}
	if part != 2 {
		t.Fatalf("partition %d", part)
	}
	out, err := exec.Command("sgdisk", "-v", disk).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "No problems found") {
		t.Fatalf("sgdisk -v: %v\n%s", err, out)
	}
	out, err = exec.Command("sgdisk", "-i", "2", disk).CombinedOutput()
	lastUsable := int64(200<<20/512 - 34) // the backup entries take 33 sectors
	start := (lastUsable + 1 - 64<<20/512) / 2048 * 2048
	last := start + 64<<20/512 - 1
	for _, want := range []string{"0FC63DAF-8483-4772-8E79-3D69D8477DE4", fmt.Sprintf("First sector: %d ", start),
		fmt.Sprintf("Last sector: %d ", last), "Partition name: 'config-2'"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("sgdisk -i 2: %v: no %q in\n%s", err, want, out)
		}
	}
	if out, err := exec.Command("sgdisk", "-i", "1", disk).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "First sector: 2048 ") || !strings.Contains(string(out), "Last sector: 6143 ") {
		t.Fatalf("sgdisk -i 1: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(disk)
	if !bytes.Equal(got[1<<20:3<<20], img[1<<20:3<<20]) {
		t.Fatal("the image's partition changed")
	}
	if !bytes.Equal(got[start*512:start*512+int64(len(iso))], iso) {
		t.Fatal("the partition does not hold the ISO")
	}
	if bytes.Contains(got[8<<20-512:8<<20], []byte("EFI PART")) {
		t.Fatal("the image's old backup header is still there")
	}
}

// TestConfigDrivePartitionGPTRefusals: a damaged GPT and a full one are
// refused with the disk unchanged.
func TestConfigDrivePartitionGPTRefusals(t *testing.T) {
	img := gptImage(t, 8<<20, "")
	img[512+20] ^= 1 // the reserved field after the CRC, covered by it
	disk := sparseDisk(t, 100<<20, img)
	if _, err := writeConfigDrivePartition(disk, []byte("iso")); !errors.Is(err, errBadGPT) {
		t.Fatalf("damaged header: %v", err)
	}
	img = gptImage(t, 8<<20, "1:2048:0") // the partition fills the disk
	disk = sparseDisk(t, 8<<20, img)
	before, _ := os.ReadFile(disk)
	if _, err := writeConfigDrivePartition(disk, []byte("iso")); !errors.Is(err, errNoRoom) {
		t.Fatalf("full disk: %v", err)
	}
	if after, _ := os.ReadFile(disk); !bytes.Equal(before, after) {
		t.Fatal("a refusal changed the disk")
	}
}

// TestConfigDriveReusesTheImagesConfig2 writes the ISO over the image's
// own config-2 partition (an ISO 9660 or FAT label), as Ironic's agent
// does, leaving the table alone; two such partitions are refused.
func TestConfigDriveReusesTheImagesConfig2(t *testing.T) {
	const part2 = 8192 // sectors: 4 MiB
	iso := make([]byte, 17*2048)
	copy(iso[16*2048:], "\x01CD001\x01")
	copy(iso[16*2048+40:], "config-2                        ")
	copy(iso[:8], "NEW ISO!")
	fat := make([]byte, 512)
	copy(fat[71:], "config-2   ")
	copy(fat[82:], "FAT32   ")
	fat[510], fat[511] = 0x55, 0xaa
	for name, label := range map[string][]byte{"iso": iso, "fat": fat} {
		sec := bootSector(&mbrEntry{Type: 0x83, Start: 2048, Sectors: 2048}, &mbrEntry{Type: 0x0c, Start: part2, Sectors: 4096})
		disk := sparseDisk(t, 64<<20, sec)
		f, _ := os.OpenFile(disk, os.O_RDWR, 0)
		f.WriteAt(label, part2*512)
		f.Close()
		got, err := writeConfigDrivePartition(disk, iso)
		if err != nil || got != 2 {
			t.Fatalf("%s: partition %d %v", name, got, err)
		}
		data, _ := os.ReadFile(disk)
		if !bytes.Equal(data[:512], sec) || !bytes.Equal(data[part2*512:part2*512+len(iso)], iso) {
			t.Fatalf("%s: the table changed or the ISO is not in partition 2", name)
		}
	}
	sec := bootSector(&mbrEntry{Type: 0x83, Start: 2048, Sectors: 2048}, &mbrEntry{Type: 0x83, Start: part2, Sectors: 4096})
	disk := sparseDisk(t, 64<<20, sec)
	f, _ := os.OpenFile(disk, os.O_RDWR, 0)
	f.WriteAt(iso, 2048*512)
	f.WriteAt(iso, part2*512)
	f.Close()
	if _, err := writeConfigDrivePartition(disk, iso); !errors.Is(err, errManyConfigDrives) {
		t.Fatalf("two config-2 partitions: %v", err)
	}
}

func TestConfigDriveReusesTheImagesConfig2OnGPT(t *testing.T) {
	img := gptImage(t, 8<<20, "")
	iso := make([]byte, 17*2048)
	copy(iso[16*2048:], "\x01CD001\x01")
	copy(iso[16*2048+40:], "config-2")
	copy(img[1<<20:], iso)
	disk := sparseDisk(t, 100<<20, img)
	copy(iso[:8], "NEW ISO!")
	if got, err := writeConfigDrivePartition(disk, iso); err != nil || got != 1 {
		t.Fatalf("partition %d %v", got, err)
	}
	data, _ := os.ReadFile(disk)
	if !bytes.Equal(data[:1<<20], img[:1<<20]) || !bytes.Equal(data[1<<20:1<<20+len(iso)], iso) {
		t.Fatal("the GPT changed or the ISO is not in partition 1")
	}
}
