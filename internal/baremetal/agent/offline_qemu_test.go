package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/initrd"
)

// TestOfflineRescueRamdiskInQemu boots the agent ramdisk as corral-node
// rescues a VM instance: its initrd with an archive holding
// etc/corral-rescue.json appended (package initrd), the command line
// corral.rescue=offline and no API; the rescue user logs in over SSH with
// the password (host key as the console shows it) and finds the disk.
func TestOfflineRescueRamdiskInQemu(t *testing.T) {
	if testing.Short() && os.Getenv("CORRAL_REQUIRE_BAREMETAL") != "1" {
		t.Skip("boots a machine; skipped in -short mode")
	}
	kernel, base := agentRamdisk(t)
	dir := t.TempDir()
	const password = "Offline-pw-3"
	hash, err := cryptpw.Hash(cryptpw.SHA512, password)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(agentapi.FinalizeRescueParams{RescuePassword: hash, Hashed: true})
	rescueInitrd := filepath.Join(dir, "rescue.initrd")
	err = atomicfile.WriteFrom(rescueInitrd, 0o600, func(w io.Writer) error {
		return initrd.Append(w, base, []initrd.Entry{
			{Name: "etc", Mode: fs.ModeDir | 0o755}, {Name: "etc/" + OfflineRescueFile, Mode: 0o600, Data: data}})
	})
	if err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, append([]byte("CORRAL-INSTANCE-DISK"), make([]byte, 4<<20)...), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPort := bmctest.FreeTCPPort(t)
	logFile := filepath.Join(dir, "serial.log")
	qemu := bmctest.StartQemu(t, kernel, rescueInitrd, "console=ttyS0 quiet corral.rescue=offline",
		"-chardev", "file,id=ser0,path="+logFile, "-serial", "chardev:ser0",
		"-netdev", fmt.Sprintf("user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22", sshPort),
		"-device", "virtio-net-pci,netdev=n0",
		"-drive", "file="+disk+",format=raw,if=virtio")
	bmctest.WaitFile(t, logFile, "RESCUE-READY", 90*time.Second)
	t.Logf("power on to RESCUE-READY: %s", time.Since(qemu.Started).Round(10*time.Millisecond))
	console, _ := os.ReadFile(logFile)
	if bytes.Contains(console, []byte(hash)) {
		t.Fatal("the console shows the hash")
	}
	out := sshRun(t, sshPort, consoleHostKey(t, string(console)), ssh.Password(password), false,
		"id -u; head -c 20 /dev/vda; echo; test -e /etc/"+OfflineRescueFile+" || echo FILE-GONE")
	if out != "0\nCORRAL-INSTANCE-DISK\nFILE-GONE\n" {
		t.Fatalf("ssh output %q\nconsole:\n%s", out, console)
	}
}
