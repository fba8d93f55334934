package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/cryptpw"
)

func TestParseCmdlineOfflineRescue(t *testing.T) {
	s, err := ParseCmdline("console=ttyS0 corral.rescue=offline corral.rescue-ssh-port=2222")
	if err != nil || !s.OfflineRescue || s.APIURL != "" || s.SSHPort != 2222 {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := ParseCmdline("corral.rescue=online"); err == nil {
		t.Fatal("an unknown rescue mode is accepted")
	}
	if s, _ := ParseCmdline("ipa-api-url=http://10.0.0.1:6385"); s.OfflineRescue {
		t.Fatal("offline rescue without asking for it")
	}
}

func writeOfflineRescue(t *testing.T, tm *testMachine, p any) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(tm.EtcDir, OfflineRescueFile)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunOfflineRescue boots the agent in offline mode: the rescue user
// comes from the file (then gone), the network comes up once, and the
// rescue user logs in over SSH with the password and with the key.
func TestRunOfflineRescue(t *testing.T) {
	tm := newTestMachine(t)
	nw := &fakeNet{}
	tm.Net = nw
	hash, err := cryptpw.Hash(cryptpw.SHA512, sshTestPassword)
	if err != nil {
		t.Fatal(err)
	}
	signer, line := newSSHKey(t)
	path := writeOfflineRescue(t, tm, agentapi.FinalizeRescueParams{RescuePassword: hash, Hashed: true, SSHPublicKeys: []string{line}})
	sshPort := bmctest.FreeTCPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	// No API URL at all: an offline rescue never looks anything up.
	go func() { done <- Run(ctx, Settings{OfflineRescue: true, SSHPort: sshPort}, tm.Machine) }()
	waitOutput(t, tm.console, "RESCUE-READY")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the rescue file is still there: %v", err)
	}
	shadow, _ := os.ReadFile(filepath.Join(tm.EtcDir, "shadow"))
	if !strings.Contains(string(shadow), RescueUser+":"+hash+":") || !strings.Contains(string(shadow), "root:*:") {
		t.Fatalf("shadow:\n%s", shadow)
	}
	for name, auth := range map[string]ssh.AuthMethod{"password": ssh.Password(sshTestPassword), "key": ssh.PublicKeys(signer)} {
		sc, err := ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", sshPort), &ssh.ClientConfig{User: RescueUser,
			Auth: []ssh.AuthMethod{auth}, Timeout: 10 * time.Second, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
		if err != nil {
			t.Fatalf("ssh with the %s: %v\n%s", name, err, tm.console)
		}
		if out := runOn(t, sc, "echo OFFLINE-$((6*7))"); out != "OFFLINE-42\n" {
			t.Fatalf("ssh output %q", out)
		}
		sc.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	if strings.Contains(tm.console.String(), hash) {
		t.Fatalf("the console shows the hash:\n%s", tm.console)
	}
}

// TestOfflineRescueRefusesBadFiles: a boot whose file is missing, holds a
// clear password or an unknown field fails, and writes no rescue user.
func TestOfflineRescueRefusesBadFiles(t *testing.T) {
	for name, content := range map[string]any{
		"missing":        nil,
		"clear password": agentapi.FinalizeRescueParams{RescuePassword: "clear-pw"},
		"not crypt":      agentapi.FinalizeRescueParams{RescuePassword: "$2y$10$abc", Hashed: true},
		"unknown field":  map[string]any{"rescue_password": "$5$a$b", "hashed": true, "rescue_pasword": "x"},
	} {
		t.Run(name, func(t *testing.T) {
			tm := newTestMachine(t)
			tm.Net = &fakeNet{}
			if content != nil {
				writeOfflineRescue(t, tm, content)
			}
			err := Run(context.Background(), Settings{OfflineRescue: true}, tm.Machine)
			if err == nil {
				t.Fatal("the boot succeeded")
			}
			shadow, _ := os.ReadFile(filepath.Join(tm.EtcDir, "shadow"))
			if strings.Contains(string(shadow), RescueUser+":") {
				t.Fatalf("rescue user written: %s", shadow)
			}
		})
	}
}
