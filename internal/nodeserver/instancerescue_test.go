package nodeserver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/initrd"
	"github.com/corral/corral/internal/nodeapi"
)

const rescueTestUUID = "0c6a1f5e-3b7d-4f0e-9a51-2d7c8e9f0a1b"

func rescueTestServer(t *testing.T) (*Server, string) {
	t.Helper()
	ramdisk := t.TempDir()
	var base bytes.Buffer
	if err := initrd.WriteGzipCPIO(&base, []initrd.Entry{{Name: "init", Mode: 0o755, Data: []byte("#!/bin/sh\n")}}); err != nil {
		t.Fatal(err)
	}
	base.WriteString("x") // a base whose length is not a multiple of 4
	if err := os.WriteFile(filepath.Join(ramdisk, "initrd.img"), base.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ramdisk, "vmlinuz"), []byte("kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Server{opts: Options{StateDir: t.TempDir(), MachineMedia: MachineMediaOptions{AgentRamdisk: ramdisk}},
		log: slog.New(slog.DiscardHandler), name: "node1"}, ramdisk
}

// TestInstanceRescueInitrd writes an instance's rescue initrd: the base
// unchanged, then an archive whose etc/corral-rescue.json holds the hash
// and keys; the file is root's only, and cleanup removes it (twice is no
// error).
func TestInstanceRescueInitrd(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio is not installed")
	}
	s, ramdisk := rescueTestServer(t)
	ctx := context.Background()
	hash := "$6$saltsalt$" + strings.Repeat("a", 86)
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB tester@host"
	r, err := s.instanceRescuePrepare(ctx, nodeapi.InstanceRescuePrepareArgs{InstanceUUID: rescueTestUUID,
		RescuePasswordHash: hash, SSHPublicKeys: []string{key}})
	if err != nil {
		t.Fatal(err)
	}
	reply := r.(nodeapi.InstanceRescuePrepareReply)
	if reply.KernelPath != filepath.Join(ramdisk, "vmlinuz") || !strings.HasPrefix(reply.InitrdPath, s.opts.StateDir) {
		t.Fatalf("reply %+v", reply)
	}
	st, err := os.Stat(reply.InitrdPath)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("initrd %v %v", st, err)
	}
	if dst, _ := os.Stat(filepath.Dir(reply.InitrdPath)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("directory mode %v", dst.Mode())
	}
	got, _ := os.ReadFile(reply.InitrdPath)
	base, _ := os.ReadFile(filepath.Join(ramdisk, "initrd.img"))
	if !bytes.HasPrefix(got, base) {
		t.Fatal("the ramdisk's initrd is not kept as it is")
	}
	zr, err := gzip.NewReader(bytes.NewReader(bytes.TrimLeft(got[len(base):], "\x00")))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-i", "-d", "--quiet", "--no-absolute-filenames")
	cmd.Dir, cmd.Stdin = dir, zr
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	var f struct {
		RescuePassword string   `json:"rescue_password"`
		Hashed         bool     `json:"hashed"`
		SSHPublicKeys  []string `json:"ssh_public_keys"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "etc", "corral-rescue.json"))
	if err != nil || json.Unmarshal(data, &f) != nil || f.RescuePassword != hash || !f.Hashed || len(f.SSHPublicKeys) != 1 || f.SSHPublicKeys[0] != key {
		t.Fatalf("rescue file %s %v", data, err)
	}
	for i := 0; i < 2; i++ {
		if _, err := s.instanceRescueCleanup(ctx, nodeapi.InstanceRescueCleanupArgs{InstanceUUID: rescueTestUUID}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(reply.InitrdPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("initrd still there: %v", err)
	}
}

func TestInstanceRescuePrepareRefuses(t *testing.T) {
	s, _ := rescueTestServer(t)
	ctx := context.Background()
	good := "$5$saltsalt$" + strings.Repeat("b", 43)
	for name, a := range map[string]nodeapi.InstanceRescuePrepareArgs{
		"clear password":  {InstanceUUID: rescueTestUUID, RescuePasswordHash: "secret"},
		"bcrypt":          {InstanceUUID: rescueTestUUID, RescuePasswordHash: "$2y$10$abc"},
		"hash with colon": {InstanceUUID: rescueTestUUID, RescuePasswordHash: "$5$a:b$c"},
		"two-line key":    {InstanceUUID: rescueTestUUID, RescuePasswordHash: good, SSHPublicKeys: []string{"ssh-ed25519 A\nssh-rsa B"}},
		"path as uuid":    {InstanceUUID: "../../etc/passwd", RescuePasswordHash: good},
	} {
		_, err := s.instanceRescuePrepare(ctx, a)
		if e, ok := ecode.As(err); !ok || e.Class != ecode.Inval {
			t.Errorf("%s: %v", name, err)
		}
	}
	s.opts.MachineMedia.AgentRamdisk = ""
	_, err := s.instanceRescuePrepare(ctx, nodeapi.InstanceRescuePrepareArgs{InstanceUUID: rescueTestUUID, RescuePasswordHash: good})
	if e, ok := ecode.As(err); !ok || e.Class != ecode.Environ || !strings.Contains(err.Error(), "--agent-ramdisk") {
		t.Errorf("no ramdisk: %v", err)
	}
	entries, _ := os.ReadDir(s.opts.StateDir)
	for _, e := range entries {
		if sub, _ := os.ReadDir(filepath.Join(s.opts.StateDir, e.Name())); len(sub) > 0 {
			t.Errorf("a refused prepare left %s/%v", e.Name(), sub)
		}
	}
}
