package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/configdrive"
	"github.com/corral/corral/internal/bmc/bmctest"
)

// isoFileOf extracts path from the ISO 9660 volume in iso with xorriso,
// and returns it with the volume's label.
func isoFileOf(t *testing.T, iso []byte, path string) (label, data string) {
	t.Helper()
	dir := t.TempDir()
	img := filepath.Join(dir, "cd.iso")
	if err := os.WriteFile(img, iso, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xorriso", "-indev", img, "-pvd_info").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso -pvd_info: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Volume Id") {
			label = strings.TrimSpace(l[strings.Index(l, ":")+1:])
		}
	}
	dst := filepath.Join(dir, "out")
	if b, err := exec.Command("xorriso", "-osirrox", "on", "-indev", img, "-extract", path, dst).CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract %s: %v\n%s", path, err, b)
	}
	raw, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	return label, string(raw)
}

// TestPrepareImageWritesConfigDrive deploys an image with an MBR and one
// partition with a config drive: the disk then has a second partition at
// its end holding an ISO labelled config-2 with the user data, and the
// image (its boot sector apart from the new entry, its partition) is
// unchanged.
func TestPrepareImageWritesConfigDrive(t *testing.T) {
	bmctest.NeedISOTools(t)
	const userData = "#cloud-config\nwrite_files:\n  - path: /etc/joined\n    content: token-abc\n"
	enc, err := configdrive.Builder{}.Encode(context.Background(),
		map[string]any{"meta_data": map[string]any{}, "user_data": userData}, configdrive.Machine{UUID: "u-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The image: boot sector, partition 1 at 1 MiB for 1 MiB.
	img := make([]byte, 2<<20)
	copy(img, bootSector(&mbrEntry{Boot: 0x80, Type: 0x83, Start: 2048, Sectors: 2048}))
	copy(img[1<<20:], bytes.Repeat([]byte("root fs "), 1<<17))
	sum := sha256.Sum256(img)

	tm := newTestMachine(t)
	_, c := serve(t, tm)
	res, err := c.RunCommand(context.Background(), agentapi.CmdPrepareImage, agentapi.PrepareImageParams{
		ImageInfo: agentapi.ImageInfo{ID: "i1", URLs: []string{imageServer(t, img) + "/img"},
			OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(sum[:])},
		ConfigDrive: enc}, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommandStatus != agentapi.StatusSucceeded {
		t.Fatalf("prepare_image: %+v %v", res, res.CommandError)
	}
	var out agentapi.PrepareImageResult
	if err := json.Unmarshal(res.CommandResult, &out); err != nil || !strings.Contains(out.Result, "config drive written to partition 2") {
		t.Fatalf("result %s %v", res.CommandResult, err)
	}
	if shown, _ := json.Marshal(res.CommandParams); strings.Contains(string(shown), enc[:40]) || !strings.Contains(string(shown), `"configdrive":true`) {
		t.Fatalf("the command's parameters show %s", shown)
	}
	if strings.Contains(tm.console.String(), "token-abc") {
		t.Fatal("the agent logged the user data")
	}

	disk, _ := os.ReadFile(tm.Disk)
	f, err := os.Open(tm.Disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec, ents, err := readMBR(f)
	if err != nil {
		t.Fatal(err)
	}
	// 4 MiB disk: the partition takes what follows the image's, from 2 MiB.
	want := mbrEntry{Type: 0x83, Start: 4096, Sectors: 4096}
	if ents[0] != (mbrEntry{Boot: 0x80, Type: 0x83, Start: 2048, Sectors: 2048}) || ents[1] != want || ents[2].used() || ents[3].used() {
		t.Fatalf("partitions %+v", ents)
	}
	if !bytes.Equal(sec[:mbrTableOffset+mbrEntrySize], img[:mbrTableOffset+mbrEntrySize]) || !bytes.Equal(disk[512:2<<20], img[512:]) {
		t.Fatal("the image's boot code or partition changed")
	}
	label, got := isoFileOf(t, disk[2<<20:], "/openstack/latest/user_data")
	if label != configdrive.Label || got != userData {
		t.Fatalf("partition 2: label %q user_data %q", label, got)
	}
}

// TestPrepareImageConfigDriveNeedsAPartitionTable refuses a config drive
// on an image with no partition table, after writing the image.
func TestPrepareImageConfigDriveNeedsAPartitionTable(t *testing.T) {
	bmctest.NeedISOTools(t)
	enc, err := configdrive.Builder{}.Encode(context.Background(), map[string]any{"user_data": "x"}, configdrive.Machine{UUID: "u-1"})
	if err != nil {
		t.Fatal(err)
	}
	img := bytes.Repeat([]byte{1}, 1<<20)
	sum := sha256.Sum256(img)
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	res, err := c.RunCommand(context.Background(), agentapi.CmdPrepareImage, agentapi.PrepareImageParams{
		ImageInfo: agentapi.ImageInfo{ID: "i1", URLs: []string{imageServer(t, img) + "/img"},
			OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(sum[:])},
		ConfigDrive: enc}, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommandStatus != agentapi.StatusFailed || !strings.Contains(res.CommandError.Details, "no partition table") {
		t.Fatalf("reply %+v %v", res, res.CommandError)
	}
}
