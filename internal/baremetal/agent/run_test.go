package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/bmc/bmctest"
)

type fakeNet struct {
	mu    sync.Mutex
	redos int
}

func (n *fakeNet) Up() ([]string, string, error) {
	return []string{"52:54:00:00:00:01", "52:54:00:00:00:02"}, "127.0.0.1", nil
}

func (n *fakeNet) Redo() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.redos++
	return nil
}

// TestRunLooksUpHeartbeatsAndStopsAfterRescue runs the agent's whole boot
// against an API that refuses the first lookup (the machine is not yet
// waiting for its agent), then finalizes the rescue as the conductor does
// on the first heartbeat: the command API closes, the rescue user logs in
// over SSH with the host key the console shows, and Run ends with its
// context.
func TestRunLooksUpHeartbeatsAndStopsAfterRescue(t *testing.T) {
	tm := newTestMachine(t)
	nw := &fakeNet{}
	tm.Net = nw
	var mu sync.Mutex
	var lookups int
	var versions []string
	beats := make(chan agentapi.Heartbeat, 10)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		versions = append(versions, r.Header.Get("X-OpenStack-Ironic-API-Version"))
		mu.Unlock()
		switch {
		case r.URL.Path == "/":
			fmt.Fprint(w, `{"default_version":{"version":"1.80"}}`)
		case r.URL.Path == "/v1/lookup":
			mu.Lock()
			lookups++
			n := lookups
			mu.Unlock()
			if n == 1 || r.URL.Query().Get("addresses") != "52:54:00:00:00:01,52:54:00:00:00:02" {
				http.Error(w, "{}", http.StatusNotFound)
				return
			}
			json.NewEncoder(w).Encode(agentapi.LookupReply{Node: agentapi.LookupNode{UUID: "u1"},
				Config: agentapi.LookupConfig{HeartbeatTimeout: 3, AgentToken: testToken, AgentTokenRequired: true}})
		case r.URL.Path == "/v1/heartbeat/u1":
			var hb agentapi.Heartbeat
			json.NewDecoder(r.Body).Decode(&hb)
			beats <- hb
			w.WriteHeader(http.StatusAccepted)
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	port, sshPort := bmctest.FreeTCPPort(t), bmctest.FreeTCPPort(t)
	s := Settings{APIURL: api.URL, ListenPort: port, AdvertiseHost: "127.0.0.1", SSHPort: sshPort}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- Run(ctx, s, tm.Machine) }()

	var hb agentapi.Heartbeat
	select {
	case hb = <-beats:
	case err := <-done:
		t.Fatalf("Run ended: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no heartbeat")
	}
	if hb.CallbackURL != fmt.Sprintf("http://127.0.0.1:%d", port) || hb.AgentToken != testToken ||
		hb.AgentStatus != agentapi.AgentStatusStart || hb.AgentVersion != agentapi.AgentVersion {
		t.Fatalf("heartbeat %+v", hb)
	}
	c, _ := agentapi.NewClient(hb.CallbackURL, testToken, agentapi.ClientOptions{})
	defer c.Close()
	res, err := c.RunCommand(context.Background(), agentapi.CmdFinalizeRescue,
		agentapi.FinalizeRescueParams{RescuePassword: sshTestPassword}, false)
	if err != nil || res.CommandStatus != agentapi.StatusSucceeded {
		t.Fatalf("%+v %v", res, err)
	}
	waitOutput(t, tm.console, "RESCUE-READY")
	if _, err := c.Commands(context.Background()); err == nil {
		t.Fatal("the command API still answers after the rescue")
	}
	fp := regexp.MustCompile(`RESCUE-SSH: port \d+, host key ssh-ed25519 (SHA256:\S+)`).FindStringSubmatch(tm.console.String())
	if fp == nil {
		t.Fatalf("no host key on the console:\n%s", tm.console)
	}
	sc, err := ssh.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", sshPort), &ssh.ClientConfig{User: RescueUser,
		Auth: []ssh.AuthMethod{ssh.Password(sshTestPassword)}, Timeout: 10 * time.Second,
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if ssh.FingerprintSHA256(k) != fp[1] {
				return fmt.Errorf("host key %s, the console shows %s", ssh.FingerprintSHA256(k), fp[1])
			}
			return nil
		}})
	if err != nil {
		t.Fatalf("ssh after rescue: %v\n%s", err, tm.console)
	}
	if out := runOn(t, sc, "echo RUN-SSH-$((6*7))"); out != "RUN-SSH-42\n" {
		t.Fatalf("ssh output %q", out)
	}
	select {
	case err := <-done:
		t.Fatalf("Run ended while serving SSH: %v", err)
	default:
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
	sc.Close()
	nw.mu.Lock()
	if nw.redos != 1 {
		t.Fatalf("DHCP redone %d times, want 1", nw.redos)
	}
	nw.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if lookups != 2 || versions[len(versions)-1] != statusVersion {
		t.Fatalf("lookups %d, versions %v", lookups, versions)
	}
	if strings.Contains(tm.console.String(), testToken) {
		t.Fatalf("the console shows the token:\n%s", tm.console)
	}
}
