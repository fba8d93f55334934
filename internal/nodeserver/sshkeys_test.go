package nodeserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/sshkeys"
)

func newTestSSH(t *testing.T) *sshKeys {
	dir := t.TempDir()
	return &sshKeys{dir: filepath.Join(dir, "ssh"), pubFile: filepath.Join(dir, FilePubKeys), node: "node1"}
}

func TestSSHEnsureCommit(t *testing.T) {
	ctx := context.Background()
	k := newTestSSH(t)
	r1, err := k.ensure(ctx, nodeapi.SSHKeyArgs{Type: "ed25519"})
	if err != nil {
		t.Fatal(err)
	}
	first := r1.(nodeapi.SSHKeyReply)
	if !first.Managed || !first.Created || !strings.HasSuffix(first.PublicKey, "root@node1") {
		t.Fatalf("first ensure: %+v", first)
	}
	priv := filepath.Join(k.dir, "id_ed25519")
	if fi, err := os.Stat(priv); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", fi, err)
	}
	if keygen, err := exec.LookPath("ssh-keygen"); err == nil {
		out, err := exec.Command(keygen, "-l", "-f", priv).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "ED25519") {
			t.Fatalf("ssh-keygen -l: %v: %s", err, out)
		}
	}
	r2, _ := k.ensure(ctx, nodeapi.SSHKeyArgs{Type: "ed25519"})
	if again := r2.(nodeapi.SSHKeyReply); again.Created || again.PublicKey != first.PublicKey {
		t.Fatalf("a second ensure replaced the key: %+v", again)
	}
	r3, err := k.ensure(ctx, nodeapi.SSHKeyArgs{Type: "ed25519", Stage: true})
	if err != nil {
		t.Fatal(err)
	}
	staged := r3.(nodeapi.SSHKeyReply).PublicKey
	// Until the commit, the pair in place is the old one.
	r4, _ := k.ensure(ctx, nodeapi.SSHKeyArgs{Type: "ed25519"})
	if r4.(nodeapi.SSHKeyReply).PublicKey != first.PublicKey {
		t.Fatal("staging replaced the key in place")
	}
	for range 2 { // a repeated commit answers the same key
		r5, err := k.commit(ctx, nodeapi.SSHKeyArgs{Type: "ed25519"})
		if err != nil {
			t.Fatal(err)
		}
		if got := r5.(nodeapi.SSHKeyReply).PublicKey; got != staged {
			t.Fatalf("after commit %q, want %q", got, staged)
		}
	}
	if _, err := k.ensure(ctx, nodeapi.SSHKeyArgs{Type: "dsa"}); err == nil {
		t.Fatal("a dsa key was made")
	}
	off := &sshKeys{}
	if r, _ := off.ensure(ctx, nodeapi.SSHKeyArgs{Type: "rsa"}); r.(nodeapi.SSHKeyReply).Managed {
		t.Fatal("a daemon without an SSH directory manages keys")
	}
}

func TestSSHFilesWrite(t *testing.T) {
	ctx := context.Background()
	k := newTestSSH(t)
	a, _ := sshkeys.Generate("ed25519", 0, "root@a")
	b, _ := sshkeys.Generate("ed25519", 0, "root@b")
	stranger, _ := sshkeys.Generate("ed25519", 0, "evil@x")
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	authPath := filepath.Join(k.dir, "authorized_keys")
	admin := "# admin\n" + stranger.Public + "\n"
	if err := os.WriteFile(authPath, []byte(admin), 0o600); err != nil {
		t.Fatal(err)
	}
	pub := "uuid-a " + a.Public + "\nuuid-b " + b.Public + "\n"
	trusted := []string{a.Public}
	if _, err := k.write(ctx, nodeapi.SSHFilesWriteArgs{PubKeys: &pub, Authorized: &trusted}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(k.pubFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("public-key file: %v %v", fi, err)
	}
	r, _ := k.read(ctx, struct{}{})
	got := r.(nodeapi.SSHFilesReply)
	if got.PubKeys != pub || !slices.Equal(got.Authorized, trusted) {
		t.Fatalf("read back %+v", got)
	}
	data, _ := os.ReadFile(authPath)
	if !strings.HasPrefix(string(data), admin) {
		t.Fatalf("the administrator's lines were not kept:\n%s", data)
	}
	// A key missing from the public-key file is refused, and nothing changes.
	bad := []string{a.Public, stranger.Public}
	if _, err := k.write(ctx, nodeapi.SSHFilesWriteArgs{Authorized: &bad}); err == nil || !strings.Contains(err.Error(), "not in the public-key file") {
		t.Fatalf("stranger's key: %v", err)
	}
	if again, _ := os.ReadFile(authPath); string(again) != string(data) {
		t.Fatal("a refused write changed authorized_keys")
	}
	// Leaving the potential candidates: no file, no block, dropped key gone.
	none, empty := "", []string{}
	if _, err := k.write(ctx, nodeapi.SSHFilesWriteArgs{PubKeys: &none, Authorized: &empty, Drop: []string{stranger.Public}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(k.pubFile); !os.IsNotExist(err) {
		t.Fatalf("public-key file still there: %v", err)
	}
	if data, _ := os.ReadFile(authPath); string(data) != "# admin\n" {
		t.Fatalf("authorized_keys:\n%q", data)
	}
}
