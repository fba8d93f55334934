package agent

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/cryptpw"
)

// testMachine is a machine made of temporary files: a 4 MiB disk, /etc
// with root in passwd and shadow.
type testMachine struct {
	*Machine
	dir     string
	console *bmctest.SyncBuffer
	powered chan struct{}
}

func newTestMachine(t *testing.T) *testMachine {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"etc", "root", "tmp", "dev"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n")
	write("etc/shadow", "root:*:1:0:99999:7:::\n")
	write("dev/vda", strings.Repeat("\xaa", 4<<20))
	tm := &testMachine{dir: dir, console: &bmctest.SyncBuffer{}, powered: make(chan struct{}, 1)}
	tm.Machine = &Machine{
		Disk: filepath.Join(dir, "dev/vda"), DevDir: filepath.Join(dir, "dev"), EtcDir: filepath.Join(dir, "etc"),
		RescueHome: filepath.Join(dir, "root"), TmpDir: filepath.Join(dir, "tmp"), Console: tm.console,
		Now:      func() time.Time { return time.Unix(86400*20000, 0) },
		Sync:     func() error { return nil },
		PowerOff: func() error { tm.powered <- struct{}{}; return nil },
	}
	return tm
}

const testToken = "tok-0123456789abcdef"

// serve starts the command server of tm behind httptest and a client for it.
func serve(t *testing.T, tm *testMachine) (*Server, *agentapi.Client) {
	t.Helper()
	s := NewServer(tm.Machine, testToken, http.DefaultClient, log.New(tm.console, "corral-agent: ", 0))
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	c, err := agentapi.NewClient(hs.URL, testToken, agentapi.ClientOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c
}

func TestFinalizeRescueWritesShadowAndStops(t *testing.T) {
	tm := newTestMachine(t)
	s, c := serve(t, tm)
	const hash = "$5$saltsalt$Q0Wl9B3N7gdDQnpmwJhGwTtKhW3iF0vqRdiW6J1o8v0"
	res, err := c.RunCommand(context.Background(), agentapi.CmdFinalizeRescue, agentapi.FinalizeRescueParams{
		RescuePassword: hash, Hashed: true, SSHPublicKeys: []string{"ssh-ed25519 AAAAC3Nz key@host"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommandStatus != agentapi.StatusSucceeded || res.CommandName != "finalize_rescue" || res.CommandError != nil {
		t.Fatalf("reply %+v", res)
	}
	if b, _ := json.Marshal(res); bytes.Contains(b, []byte(hash)) {
		t.Fatalf("the reply shows the hash: %s", b)
	}
	select {
	case <-s.Rescued():
	case <-time.After(5 * time.Second):
		t.Fatal("Rescued not closed after finalize_rescue")
	}
	shadow, _ := os.ReadFile(filepath.Join(tm.dir, "etc/shadow"))
	if want := "root:*:1:0:99999:7:::\nrescue:" + hash + ":20000:0:99999:7:::\n"; string(shadow) != want {
		t.Fatalf("shadow:\n%s\nwant:\n%s", shadow, want)
	}
	passwd, _ := os.ReadFile(filepath.Join(tm.dir, "etc/passwd"))
	if !strings.Contains(string(passwd), "\nrescue:x:0:0:rescue:"+filepath.Join(tm.dir, "root")+":/bin/sh\n") {
		t.Fatalf("passwd:\n%s", passwd)
	}
	keys, err := os.ReadFile(filepath.Join(tm.dir, "root/.ssh/authorized_keys"))
	if err != nil || string(keys) != "ssh-ed25519 AAAAC3Nz key@host\n" {
		t.Fatalf("authorized_keys %q %v", keys, err)
	}
	if strings.Contains(tm.console.String(), hash) || strings.Contains(tm.console.String(), testToken) {
		t.Fatalf("console shows a secret:\n%s", tm.console)
	}
	// A second rescue replaces the entry instead of adding one.
	if _, err := c.RunCommand(context.Background(), agentapi.CmdFinalizeRescue,
		agentapi.FinalizeRescueParams{RescuePassword: "clear-pw"}, true); err != nil {
		t.Fatal(err)
	}
	shadow, _ = os.ReadFile(filepath.Join(tm.dir, "etc/shadow"))
	if strings.Count(string(shadow), "rescue:") != 1 || !strings.Contains(string(shadow), "rescue:$5$") || strings.Contains(string(shadow), "clear-pw") {
		t.Fatalf("shadow after a clear password:\n%s", shadow)
	}
}

func TestFinalizeRescueRefusesBadInput(t *testing.T) {
	for name, p := range map[string]agentapi.FinalizeRescueParams{
		"empty":         {Hashed: true},
		"bcrypt":        {RescuePassword: "$2b$12$abcdefghijklmnopqrstuv", Hashed: true},
		"shadow-inject": {RescuePassword: "$5$s$abc:0:0\nroot::1", Hashed: true},
		"key-newline":   {RescuePassword: "pw", SSHPublicKeys: []string{"ssh-rsa AAAA\nssh-rsa BBBB"}},
		"key-not-a-key": {RescuePassword: "pw", SSHPublicKeys: []string{"command=\"x\" foo"}},
	} {
		t.Run(name, func(t *testing.T) {
			tm := newTestMachine(t)
			s, c := serve(t, tm)
			res, err := c.RunCommand(context.Background(), agentapi.CmdFinalizeRescue, p, false)
			if err != nil {
				t.Fatal(err)
			}
			if res.CommandStatus != agentapi.StatusFailed || res.CommandError == nil {
				t.Fatalf("reply %+v", res)
			}
			select {
			case <-s.Rescued():
				t.Fatal("a failed finalize_rescue stopped the agent")
			case <-time.After(50 * time.Millisecond):
			}
			if shadow, _ := os.ReadFile(filepath.Join(tm.dir, "etc/shadow")); strings.Contains(string(shadow), "rescue") {
				t.Fatalf("shadow changed:\n%s", shadow)
			}
		})
	}
}

func TestCommandsNeedTheToken(t *testing.T) {
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	s := NewServer(tm.Machine, testToken, http.DefaultClient, log.New(io.Discard, "", 0))
	hs := httptest.NewServer(s)
	defer hs.Close()
	for _, tok := range []string{"", "wrong"} {
		bad, _ := agentapi.NewClient(hs.URL, tok, agentapi.ClientOptions{})
		_, err := bad.RunCommand(context.Background(), agentapi.CmdPowerOff, nil, true)
		var ae *agentapi.AgentError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized {
			t.Fatalf("token %q: %v", tok, err)
		}
	}
	select {
	case <-tm.powered:
		t.Fatal("powered off without the token")
	default:
	}
	if _, err := c.RunCommand(context.Background(), "nosuch.command", nil, true); err == nil {
		t.Fatal("an unknown command was accepted")
	}
	if _, err := c.RunCommand(context.Background(), agentapi.CmdPowerOff, nil, true); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tm.powered:
	case <-time.After(5 * time.Second):
		t.Fatal("power_off did not power off")
	}
}

// imageServer serves body at /img and counts requests.
func imageServer(t *testing.T, body []byte) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/img" {
			http.NotFound(w, r)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func waitDone(t *testing.T, c *agentapi.Client, res *agentapi.CommandResult) *agentapi.CommandResult {
	t.Helper()
	for !res.Done() {
		time.Sleep(10 * time.Millisecond)
		var err error
		if res, err = c.Command(context.Background(), res.ID); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func TestPrepareImageRaw(t *testing.T) {
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	img := bytes.Repeat([]byte("corral raw image "), 100000)
	url := imageServer(t, img)
	md := md5.Sum(img)
	res, err := c.RunCommand(context.Background(), agentapi.CmdPrepareImage, agentapi.PrepareImageParams{
		ImageInfo: agentapi.ImageInfo{ID: "i1", URLs: []string{url + "/missing", url + "/img"}, DiskFormat: "raw",
			Checksum: hex.EncodeToString(md[:])}}, false)
	if err != nil {
		t.Fatal(err)
	}
	res = waitDone(t, c, res)
	if res.CommandStatus != agentapi.StatusSucceeded {
		t.Fatalf("prepare_image: %+v %v", res, res.CommandError)
	}
	var out agentapi.PrepareImageResult
	if err := json.Unmarshal(res.CommandResult, &out); err != nil || out.BytesWritten != int64(len(img)) || out.Device != tm.Disk {
		t.Fatalf("result %s %v", res.CommandResult, err)
	}
	disk, _ := os.ReadFile(tm.Disk)
	if !bytes.Equal(disk[:len(img)], img) || disk[len(img)] != 0xaa || len(disk) != 4<<20 {
		t.Fatal("the disk does not hold the image followed by its old content")
	}
	list, err := c.Commands(context.Background())
	if err != nil || len(list) != 1 || list[0].ID != res.ID {
		t.Fatalf("commands %+v %v", list, err)
	}
}

func TestPrepareImageChecksumMismatchWipes(t *testing.T) {
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	img := bytes.Repeat([]byte{7}, 3<<20)
	wrong := sha256.Sum256([]byte("something else"))
	res, err := c.RunCommand(context.Background(), agentapi.CmdPrepareImage, agentapi.PrepareImageParams{
		ImageInfo: agentapi.ImageInfo{ID: "i1", URLs: []string{imageServer(t, img) + "/img"},
			OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(wrong[:])}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if res.CommandStatus != agentapi.StatusFailed || !strings.Contains(res.CommandError.Details, "checksum mismatch") {
		t.Fatalf("reply %+v %v", res, res.CommandError)
	}
	disk, _ := os.ReadFile(tm.Disk)
	if !bytes.Equal(disk[:metadataWipe], make([]byte, metadataWipe)) {
		t.Fatal("the disk's start was not wiped after the mismatch")
	}
}

func TestPrepareImageQcow2(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed")
	}
	dir := t.TempDir()
	raw := filepath.Join(dir, "in.raw")
	want := make([]byte, 2<<20)
	copy(want[4096:], "data in the second cluster")
	copy(want[1<<20+17:], bytes.Repeat([]byte("x"), 70000))
	if err := os.WriteFile(raw, want, 0o600); err != nil {
		t.Fatal(err)
	}
	qc := filepath.Join(dir, "in.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", "-o", "cluster_size=4096", raw, qc).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v\n%s", err, out)
	}
	img, _ := os.ReadFile(qc)
	sum := sha256.Sum256(img)
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	res, err := c.RunCommand(context.Background(), agentapi.CmdPrepareImage, agentapi.PrepareImageParams{
		ImageInfo: agentapi.ImageInfo{ID: "q", URLs: []string{imageServer(t, img) + "/img"}, DiskFormat: "qcow2",
			OSHashAlgo: "sha256", OSHashValue: hex.EncodeToString(sum[:])}}, true)
	if err != nil || res.CommandStatus != agentapi.StatusSucceeded {
		t.Fatalf("prepare_image: %+v %v", res, err)
	}
	disk, _ := os.ReadFile(tm.Disk)
	if !bytes.Equal(disk[:len(want)], want) {
		t.Fatal("the disk does not hold the qcow2 image's virtual disk")
	}
	if ents, _ := os.ReadDir(tm.TmpDir); len(ents) != 0 {
		t.Fatalf("temporary image left behind: %v", ents)
	}
}

func TestEraseDevicesMetadata(t *testing.T) {
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	res, err := c.RunCommand(context.Background(), agentapi.CmdEraseDevicesMetadata, nil, true)
	if err != nil || res.CommandStatus != agentapi.StatusSucceeded {
		t.Fatalf("%+v %v", res, err)
	}
	disk, _ := os.ReadFile(tm.Disk)
	zero := make([]byte, metadataWipe)
	if !bytes.Equal(disk[:metadataWipe], zero) || !bytes.Equal(disk[len(disk)-metadataWipe:], zero) ||
		disk[metadataWipe] != 0xaa || disk[len(disk)-metadataWipe-1] != 0xaa {
		t.Fatal("not exactly the first and last MiB were wiped")
	}
}

func TestBusyAgentRefusesASecondCommand(t *testing.T) {
	tm := newTestMachine(t)
	_, c := serve(t, tm)
	release := make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		<-release
	}))
	defer hs.Close()
	defer close(release)
	res, err := c.RunCommand(context.Background(), agentapi.CmdPrepareImage, agentapi.PrepareImageParams{
		ImageInfo: agentapi.ImageInfo{ID: "slow", URLs: []string{hs.URL}, Checksum: strings.Repeat("0", 32)}}, false)
	if err != nil || res.CommandStatus != agentapi.StatusRunning {
		t.Fatalf("%+v %v", res, err)
	}
	_, err = c.RunCommand(context.Background(), agentapi.CmdEraseDevicesMetadata, nil, false)
	var ae *agentapi.AgentError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		t.Fatalf("second command while busy: %v", err)
	}
}

// TestClearRescuePasswordIsHashed checks that a clear rescue password
// reaches /etc/shadow as a SHA-256 crypt hash of itself, never as is.
func TestClearRescuePasswordIsHashed(t *testing.T) {
	h, err := rescueHash(agentapi.FinalizeRescueParams{RescuePassword: "Rescue-pw-7"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$5$") || strings.Contains(h, "Rescue-pw-7") || !cryptpw.Verify(h, "Rescue-pw-7") || cryptpw.Verify(h, "Rescue-pw-8") {
		t.Fatalf("rescue hash %q", h)
	}
	if _, err := rescueHash(agentapi.FinalizeRescueParams{RescuePassword: "a\x00b"}); !errors.Is(err, errBadRescueParams) {
		t.Fatalf("a password with NUL: %v", err)
	}
}

func TestParseCmdline(t *testing.T) {
	pin := strings.Repeat("ab", 32)
	s, err := ParseCmdline("BOOT_IMAGE=/vmlinuz console=ttyS0 ipa-api-url=https://10.0.0.1:6385/ corral.api-ca-sha256=" + pin +
		" ipa-advertise-host=127.0.0.1 ipa-advertise-port=19999 quiet")
	if err != nil {
		t.Fatal(err)
	}
	if s.APIURL != "https://10.0.0.1:6385" || hex.EncodeToString(s.APICertSHA256) != pin || s.AdvertiseHost != "127.0.0.1" ||
		s.AdvertisePort != 19999 || s.ListenPort != 9999 || s.SSHPort != 22 {
		t.Fatalf("%+v", s)
	}
	for arg, want := range map[string]int{"corral.rescue-ssh-port=2222": 2222, "corral.rescue-ssh-port=0": 0} {
		if s, err := ParseCmdline("ipa-api-url=http://h " + arg); err != nil || s.SSHPort != want {
			t.Errorf("%s: %+v %v", arg, s, err)
		}
	}
	for _, bad := range []string{"ipa-api-url=ftp://x", "ipa-api-url=http://", "corral.api-ca-sha256=abc",
		"ipa-advertise-port=0", "ipa-listen-port=x", "ipa-advertise-host=a;b",
		"corral.rescue-ssh-port=-1", "corral.rescue-ssh-port=65536", "corral.rescue-ssh-port=ssh"} {
		if _, err := ParseCmdline(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if s, err := ParseCmdline("console=ttyS0 root=/dev/vda"); err != nil || s.APIURL != "" {
		t.Fatalf("no agent: %+v %v", s, err)
	}
}

func TestRootDisk(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"loop0", "sr0", "sdb", "vdb", "vda", "ram0"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	m := &Machine{SysBlock: dir, DevDir: "/dev"}
	if d, err := m.rootDisk(nil); err != nil || d != "/dev/vda" {
		t.Fatalf("%s %v", d, err)
	}
	if d, err := m.rootDisk(map[string]any{"name": "/dev/sdb"}); err != nil || d != "/dev/sdb" {
		t.Fatalf("%s %v", d, err)
	}
	if _, err := m.rootDisk(map[string]any{"size": ">= 10"}); err == nil {
		t.Fatal("an unsupported hint was ignored")
	}
}
