package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/configdrive"
	"github.com/corral/corral/internal/bmc/bmctest"
)

// agentRamdisk is the kernel and initrd of the agent ramdisk, once the
// tools a qemu boot of it needs are there.
func agentRamdisk(t *testing.T) (kernel, initrd string) {
	t.Helper()
	bmctest.NeedTools(t, "qemu-system-x86_64", "socat", "openssl")
	dir := bmctest.AgentRamdisk(t)
	return filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initrd.img")
}

// TestAgentRamdiskInQemu boots the agent ramdisk in qemu (TCG, user-mode
// network: the Bare Metal API is a guestfwd to an httptest server, the
// command port a hostfwd), and drives one boot as the conductor would:
// lookup and heartbeat arrive, erase_devices_metadata and prepare_image
// write a raw image to the machine's disk, finalize_rescue sets the rescue
// password and an SSH key, the agent stops serving, the rescue user logs in
// over SSH (a hostfwd to port 22, host key checked against the fingerprint
// on the console) with the key and with the password, then on the serial
// console with the password (a wrong one gives no shell), powers the
// machine off, and the disk file holds the image and, in a partition the
// agent added, the config drive.
func TestAgentRamdiskInQemu(t *testing.T) {
	if testing.Short() && os.Getenv("CORRAL_REQUIRE_BAREMETAL") != "1" {
		t.Skip("boots a machine; skipped in -short mode")
	}
	kernel, initrd := agentRamdisk(t)
	dir := t.TempDir()

	image := make([]byte, 3<<20+777)
	rand.Read(image)
	copy(image, "CORRAL-IMAGE-HEAD")
	// An MBR whose partition 1 runs from 1 MiB to 4 MiB; the config
	// drive goes after it, in the disk's second half.
	copy(image[mbrTableOffset:512], bootSector(&mbrEntry{Type: 0x83, Start: 2048, Sectors: 6144})[mbrTableOffset:])
	sum := sha256.Sum256(image)
	bmctest.NeedISOTools(t)
	const userData = "#cloud-config\nhostname: qemu-machine\n"
	configDrive, err := configdrive.Builder{}.Encode(context.Background(), map[string]any{"user_data": userData},
		configdrive.Machine{UUID: "6c0b3ad4-9a7e-4e57-9d7a-3f1c2b0e9a11"})
	if err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, 16)
	rand.Read(tok)
	ironic := &bmctest.AgentAPI{UUID: "6c0b3ad4-9a7e-4e57-9d7a-3f1c2b0e9a11", Token: hex.EncodeToString(tok),
		MAC: "52:54:00:c0:0a:11", HeartbeatTimeout: 3, Image: image}
	ironic.Start(t)

	disk := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(disk, bytes.Repeat([]byte{0xAA}, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	cbPort, sshPort := bmctest.FreeTCPPort(t), bmctest.FreeTCPPort(t)
	sock := filepath.Join(dir, "serial.sock")
	logFile := filepath.Join(dir, "serial.log")
	qemu := bmctest.StartQemu(t, kernel, initrd,
		fmt.Sprintf("console=ttyS0 quiet ipa-api-url=http://10.0.2.100:6385 ipa-advertise-host=127.0.0.1 ipa-advertise-port=%d", cbPort),
		"-chardev", fmt.Sprintf("socket,id=ser0,path=%s,server=on,wait=off,logfile=%s", sock, logFile),
		"-serial", "chardev:ser0",
		"-netdev", fmt.Sprintf("user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:6385-cmd:socat - TCP:127.0.0.1:%d,hostfwd=tcp:127.0.0.1:%d-:9999,hostfwd=tcp:127.0.0.1:%d-:22", ironic.Port, cbPort, sshPort),
		"-device", "virtio-net-pci,netdev=n0,mac="+ironic.MAC,
		"-drive", "file="+disk+",format=raw,if=virtio")
	dumpLog := func() string { b, _ := os.ReadFile(logFile); return string(b) + "\nqemu: " + qemu.Output() }

	select {
	case <-ironic.Beat():
	case <-qemu.Exited:
		t.Fatalf("qemu exited before the first heartbeat: %v\n%s", qemu.Err(), dumpLog())
	case <-time.After(90 * time.Second):
		t.Fatalf("no heartbeat within 90 s; serial log:\n%s", dumpLog())
	}
	t.Logf("power on to first heartbeat: %s", time.Since(qemu.Started).Round(10*time.Millisecond))
	hb := ironic.Heartbeats()[0]
	if want := fmt.Sprintf("http://127.0.0.1:%d", cbPort); hb.CallbackURL != want || hb.AgentStatus != agentapi.AgentStatusStart {
		t.Fatalf("heartbeat %+v, want callback %s and status start", hb, want)
	}

	ctx := context.Background()
	bad, _ := agentapi.NewClient(hb.CallbackURL, "wrong-token", agentapi.ClientOptions{})
	defer bad.Close()
	var ae *agentapi.AgentError
	if _, err := bad.Commands(ctx); !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %v, want 401", err)
	}
	cl, err := agentapi.NewClient(hb.CallbackURL, hb.AgentToken, agentapi.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := cl.RunCommand(ctx, agentapi.CmdEraseDevicesMetadata, nil, true)
	if err != nil || res.CommandStatus != agentapi.StatusSucceeded {
		t.Fatalf("erase_devices_metadata: %+v %v\n%s", res, err, dumpLog())
	}
	res, err = cl.RunCommand(ctx, agentapi.CmdPrepareImage, agentapi.PrepareImageParams{ImageInfo: agentapi.ImageInfo{
		ID: "img1", URLs: []string{"http://10.0.2.100:6385" + bmctest.AgentImagePath}, DiskFormat: "raw",
		OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(sum[:])}, ConfigDrive: configDrive}, false)
	if err != nil {
		t.Fatalf("prepare_image: %v", err)
	}
	imageStart := time.Now()
	for !res.Done() {
		time.Sleep(200 * time.Millisecond)
		if res, err = cl.Command(ctx, res.ID); err != nil {
			t.Fatalf("prepare_image status: %v", err)
		}
	}
	if res.CommandStatus != agentapi.StatusSucceeded || res.CommandName != "prepare_image" {
		t.Fatalf("prepare_image: %+v %v\n%s", res, res.CommandError, dumpLog())
	}

	t.Logf("prepare_image of %d bytes: %s", len(image), time.Since(imageStart).Round(10*time.Millisecond))
	const password = "Rescue-pw-7"
	hash, err := exec.Command("openssl", "passwd", "-5", password).Output()
	if err != nil {
		t.Fatalf("openssl passwd: %v", err)
	}
	sshKey, sshKeyLine := newSSHKey(t)
	res, err = cl.RunCommand(ctx, agentapi.CmdFinalizeRescue, agentapi.FinalizeRescueParams{
		RescuePassword: strings.TrimSpace(string(hash)), Hashed: true, SSHPublicKeys: []string{sshKeyLine}}, false)
	if err != nil || res.CommandStatus != agentapi.StatusSucceeded || res.CommandName != "finalize_rescue" {
		t.Fatalf("finalize_rescue: %+v %v\n%s", res, err, dumpLog())
	}

	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("serial socket: %v", err)
	}
	defer conn.Close()
	con := bmctest.NewSerialConsole(conn, conn)
	bmctest.WaitFile(t, logFile, "RESCUE-READY", 30*time.Second)
	if _, err := cl.Commands(ctx); err == nil || errors.As(err, &ae) {
		t.Fatalf("the agent still answers after finalize_rescue: %v", err)
	}
	sshStart := time.Now()
	hostKey := consoleHostKey(t, dumpLog())
	for _, auth := range []ssh.AuthMethod{ssh.PublicKeys(sshKey), ssh.Password(password)} {
		if out := sshRun(t, sshPort, hostKey, auth, false, "id -u; echo SSH-OK"); out != "0\nSSH-OK\n" {
			t.Fatalf("ssh output %q", out)
		}
	}
	if out := sshRun(t, sshPort, hostKey, ssh.PublicKeys(sshKey), true, "tty; stty size"); out != "/dev/pts/0\r\n24 80\r\n" {
		t.Fatalf("ssh output on a terminal %q", out)
	}
	t.Logf("three ssh logins and commands: %s", time.Since(sshStart).Round(10*time.Millisecond))
	if strings.Contains(dumpLog(), hb.AgentToken) || strings.Contains(dumpLog(), strings.TrimSpace(string(hash))) ||
		strings.Contains(dumpLog(), password) {
		t.Fatalf("the console shows the agent token, the password or its hash")
	}

	con.Send(t, "\n")
	pos := con.WaitFor(t, 0, "login: ", 20*time.Second)
	con.Send(t, "rescue\n")
	pos = con.WaitFor(t, pos, "Password: ", 10*time.Second)
	con.Send(t, "not-the-password\n")
	wrong := pos
	pos = con.WaitFor(t, pos, "Login incorrect", 15*time.Second)
	pos = con.WaitFor(t, pos, "login: ", 15*time.Second)
	if seg := con.Printed(wrong, pos); strings.Contains(seg, "#") {
		t.Fatalf("a wrong password gave a shell: %q", seg)
	}
	con.Send(t, "rescue\n")
	pos = con.WaitFor(t, pos, "Password: ", 10*time.Second)
	con.Send(t, password+"\n")
	con.Send(t, "echo LOGIN-OK-$((6*7)) $(id -u)\n")
	pos = con.WaitFor(t, pos, "LOGIN-OK-42 0", 15*time.Second)
	con.Send(t, "sync; poweroff -f\n")
	select {
	case <-qemu.Exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("the machine did not power off; console:\n%s", dumpLog())
	}
	got, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:462], image[:462]) || !bytes.Equal(got[478:len(image)], image[478:]) {
		t.Fatalf("the disk does not start with the image (apart from partition 2's entry)")
	}
	if tail := got[len(got)-metadataWipe:]; !bytes.Equal(tail, make([]byte, metadataWipe)) {
		t.Fatalf("erase_devices_metadata left the disk's last MiB")
	}
	// The agent added partition 2 over the disk's second half through
	// the machine's virtio disk, holding the config drive.
	ents := [4]mbrEntry{}
	for i := range ents {
		b := got[mbrTableOffset+i*mbrEntrySize:]
		ents[i] = mbrEntry{Type: b[4], Start: binary.LittleEndian.Uint32(b[8:]), Sectors: binary.LittleEndian.Uint32(b[12:])}
	}
	if ents[1] != (mbrEntry{Type: 0x83, Start: 8192, Sectors: 8192}) || ents[2].used() || ents[3].used() {
		t.Fatalf("partitions after the deploy: %+v", ents)
	}
	if label, ud := isoFileOf(t, got[4<<20:], "/openstack/latest/user_data"); label != configdrive.Label || ud != userData {
		t.Fatalf("partition 2: label %q user_data %q", label, ud)
	}
	t.Logf("lookups %d, heartbeats %d", ironic.Lookups(), len(ironic.Heartbeats()))
}

// consoleHostKey is the SSH host key fingerprint the agent printed.
func consoleHostKey(t *testing.T, console string) string {
	t.Helper()
	m := regexp.MustCompile(`RESCUE-SSH: port 22, host key ssh-ed25519 (SHA256:[A-Za-z0-9+/]+)`).FindStringSubmatch(console)
	if m == nil {
		t.Fatalf("no SSH host key on the console:\n%s", console)
	}
	return m[1]
}

// sshRun logs in as the rescue user on 127.0.0.1:port, checking the host
// key against fingerprint, and returns cmd's output, run on an 80x24
// terminal when terminal is set.
func sshRun(t *testing.T, port int, fingerprint string, auth ssh.AuthMethod, terminal bool, cmd string) string {
	t.Helper()
	c, err := ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &ssh.ClientConfig{
		User: RescueUser, Auth: []ssh.AuthMethod{auth}, Timeout: 20 * time.Second,
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if got := ssh.FingerprintSHA256(k); got != fingerprint {
				return fmt.Errorf("host key %s, the console shows %s", got, fingerprint)
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("ssh login: %v", err)
	}
	defer c.Close()
	if !terminal {
		return runOn(t, c, cmd)
	}
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if err := sess.RequestPty("vt100", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatalf("pty-req: %v", err)
	}
	out, err := sess.CombinedOutput(cmd)
	if err != nil {
		t.Fatalf("%q on a terminal: %v\n%s", cmd, err, out)
	}
	return string(out)
}
