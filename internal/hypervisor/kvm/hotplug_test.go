package kvm

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/hypervisor"
)

// TestHotplugDevicesMatchColdStart: the ids and PCI slots a hot-add uses
// are those the command line gives the same device at a cold start, which
// is what a migration's destination is started with.
func TestHotplugDevicesMatchColdStart(t *testing.T) {
	spec, rt := testSpec(nil), testRuntime()
	spec.Disks = append(spec.Disks, hypervisor.DiskSpec{Index: 1, Path: "/srv/disks/web1.disk1", SizeMiB: 32})
	spec.NICs = append(spec.NICs, hypervisor.NICSpec{Index: 1, MAC: "aa:00:00:00:00:02", Tap: "crl6f1c2a3bn1"})
	argv, err := BuildCommand(spec, rt)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Join(argv, " ")
	hv := hypervisor.MergeParams(hypervisor.DefaultParams(hypervisor.KVM), spec.HVParams)
	disk := blockdevArgs(spec.Disks[1], hv, true)
	wantDisk := diskDriver + ",drive=" + driveID(1) + ",id=" + diskDeviceID(1) + ",addr=" + pciAddr(diskSlot(1))
	wantNIC := nicDevice(hv, spec.NICs[1])
	for _, want := range []string{"if=none,id=drive1", wantDisk, "tap,id=n1,ifname=crl6f1c2a3bn1", wantNIC} {
		if !strings.Contains(line, want) {
			t.Errorf("command line lacks %q:\n%s", want, line)
		}
	}
	if disk["node-name"] != "drive1" || wantDisk != "virtio-blk-pci,drive=drive1,id=disk1,addr=0x5" ||
		wantNIC != "virtio-net-pci,netdev=n1,mac=aa:00:00:00:00:02,id=nic1,addr=0x15" {
		t.Errorf("hot-add names: blockdev %v, disk %s, nic %s", disk["node-name"], wantDisk, wantNIC)
	}
	// The slot plan keeps 16 disks and 8 NICs apart and off the balloon.
	if diskSlot(maxDiskSlots-1) >= nicSlot(0) || nicSlot(maxNICSlots-1) > 31 || diskSlot(0) <= balloonSlot {
		t.Errorf("slot plan overlaps: disks %d..%d, nics %d..%d, balloon %d", diskSlot(0), diskSlot(maxDiskSlots-1), nicSlot(0), nicSlot(maxNICSlots-1), balloonSlot)
	}
}

func TestBlockdevArgsCache(t *testing.T) {
	d := hypervisor.DiskSpec{Index: 2, Path: "/x", ReadOnly: true}
	hv := map[string]string{hypervisor.ParamDiskCache: hypervisor.CacheNone, hypervisor.ParamDiskAIO: hypervisor.AIONative}
	a := blockdevArgs(d, hv, true)
	f := a["file"].(map[string]any)
	if f["aio"] != "native" || a["cache"].(map[string]any)["direct"] != true || a["read-only"] != true {
		t.Errorf("direct I/O: %v", a)
	}
	// Where the file refuses O_DIRECT, as at a cold start: writeback and threads.
	a = blockdevArgs(d, hv, false)
	f = a["file"].(map[string]any)
	if f["aio"] != "threads" || a["cache"].(map[string]any)["direct"] != false {
		t.Errorf("no O_DIRECT: %v", a)
	}
}

func TestHotplugRefusal(t *testing.T) {
	def := hypervisor.DefaultParams(hypervisor.KVM)
	if err := hotplugRefusal(def); err != nil {
		t.Errorf("defaults: %v", err)
	}
	for k, v := range map[string]string{hypervisor.ParamDiskType: "ide", hypervisor.ParamNICType: "e1000",
		hypervisor.ParamUseChroot: "true", hypervisor.ParamMachineVersion: "pc-q35-7.2"} {
		hv := hypervisor.MergeParams(def, map[string]string{k: v})
		if err := hotplugRefusal(hv); err == nil {
			t.Errorf("%s=%s: hotplug not refused", k, v)
		}
	}
}

// TestQMPPassesDescriptor: add-fd goes out with the file's descriptor
// attached (SCM_RIGHTS), which qemu needs to open a disk it cannot reach
// by path.
func TestQMPPassesDescriptor(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "disk")
	if err := os.WriteFile(data, []byte("disk-content"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "q.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan string, 1)
	go func() {
		conn, err := l.AcceptUnix()
		if err != nil {
			got <- err.Error()
			return
		}
		defer conn.Close()
		w := bufio.NewWriter(conn)
		w.WriteString(`{"QMP": {"version": {}, "capabilities": []}}` + "\n")
		w.Flush()
		buf, oob := make([]byte, 4096), make([]byte, 128)
		for {
			n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
			if err != nil {
				got <- "read: " + err.Error()
				return
			}
			var req struct {
				Execute string `json:"execute"`
				ID      int    `json:"id"`
			}
			_ = json.Unmarshal(buf[:n], &req)
			reply := `{"return": {}, "id": ` + strings.TrimSpace(string(mustJSON(req.ID))) + "}\n"
			if req.Execute == "add-fd" {
				msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
				content := "no descriptor"
				if len(msgs) == 1 {
					if fds, err := syscall.ParseUnixRights(&msgs[0]); err == nil && len(fds) == 1 {
						f := os.NewFile(uintptr(fds[0]), "passed")
						b := make([]byte, 12)
						n, _ := f.ReadAt(b, 0)
						content = string(b[:n])
						f.Close()
					}
				}
				got <- content
				reply = `{"return": {"fdset-id": 7, "fd": 42}, "id": ` + strings.TrimSpace(string(mustJSON(req.ID))) + "}\n"
			}
			w.WriteString(reply)
			w.Flush()
		}
	}()
	c, err := dialQMP(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	set, err := passDiskFile(context.Background(), c, hypervisor.DiskSpec{Index: 1, Path: data})
	if err != nil || set != 7 {
		t.Fatalf("passDiskFile: %d, %v", set, err)
	}
	if s := <-got; s != "disk-content" {
		t.Fatalf("qemu's side got %q", s)
	}
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
