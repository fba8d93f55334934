package bmctest

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// TestAgentAPI: lookup by another MAC finds nothing, lookup by the
// machine's MAC hands out the token and heartbeat timeout, a heartbeat
// without the token is refused and one with it beats once; the image is
// served only when set; Forget drops what was seen.
func TestAgentAPI(t *testing.T) {
	api := &AgentAPI{UUID: "u1", MAC: "52:54:00:00:00:01", Token: "tok", HeartbeatTimeout: 7, Image: []byte("IMG")}
	api.Start(t)
	base := "http://" + api.Addr
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, body
	}
	if code, _ := get("/v1/lookup?addresses=52:54:00:00:00:02"); code != http.StatusNotFound {
		t.Fatalf("lookup of another MAC: %d", code)
	}
	code, body := get("/v1/lookup?addresses=52:54:00:00:00:02,52:54:00:00:00:01")
	var reply agentapi.LookupReply
	if err := json.Unmarshal(body, &reply); code != http.StatusOK || err != nil || reply.Node.UUID != "u1" ||
		reply.Config.AgentToken != "tok" || reply.Config.HeartbeatTimeout != 7 {
		t.Fatalf("lookup: %d %s", code, body)
	}
	if at, from := api.FirstLookup(); at.IsZero() || !strings.HasPrefix(from, "127.0.0.1:") || api.Lookups() != 2 {
		t.Fatalf("first lookup %v from %q, %d lookups", at, from, api.Lookups())
	}
	beat := func(token string) int {
		t.Helper()
		data, _ := json.Marshal(agentapi.Heartbeat{CallbackURL: "http://127.0.0.1:9999", AgentToken: token})
		resp, err := http.Post(base+"/v1/heartbeat/u1", "application/json", bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := beat("wrong"); code != http.StatusBadRequest {
		t.Fatalf("heartbeat with a wrong token: %d", code)
	}
	select {
	case <-api.Beat():
		t.Fatal("a refused heartbeat beat")
	default:
	}
	if code := beat("tok"); code != http.StatusAccepted {
		t.Fatalf("heartbeat: %d", code)
	}
	select {
	case <-api.Beat():
	case <-time.After(5 * time.Second):
		t.Fatal("no beat after a heartbeat")
	}
	if hbs := api.Heartbeats(); len(hbs) != 1 || hbs[0].CallbackURL != "http://127.0.0.1:9999" {
		t.Fatalf("heartbeats %+v", hbs)
	}
	if code, body := get(AgentImagePath); code != http.StatusOK || string(body) != "IMG" {
		t.Fatalf("image: %d %q", code, body)
	}
	beat("tok")
	api.Forget()
	select {
	case <-api.Beat():
		t.Fatal("a beat left after Forget")
	default:
	}
	if at, _ := api.FirstLookup(); !at.IsZero() || api.Lookups() != 0 || len(api.Heartbeats()) != 0 {
		t.Fatal("Forget kept what was seen")
	}

	noImage := &AgentAPI{UUID: "u2"}
	noImage.Start(t)
	resp, err := http.Get("http://" + noImage.Addr + AgentImagePath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("image without one: %d", resp.StatusCode)
	}
}

// TestSerialConsole: positions move past what was waited for, text before
// from is not found again, what is sent reaches the other side.
func TestSerialConsole(t *testing.T) {
	machine, test := net.Pipe()
	defer machine.Close()
	con := NewSerialConsole(test, test)
	typed := make(chan string, 1)
	go func() {
		io.WriteString(machine, "login: ")
		b := make([]byte, 64)
		n, _ := machine.Read(b)
		typed <- string(b[:n])
		io.WriteString(machine, "rescue\nPassword: ")
	}()
	pos := con.WaitFor(t, 0, "login: ", 5*time.Second)
	if pos != len("login: ") {
		t.Fatalf("position after the prompt %d", pos)
	}
	con.Send(t, "rescue\n")
	if got := <-typed; got != "rescue\n" {
		t.Fatalf("the machine read %q", got)
	}
	end := con.WaitFor(t, pos, "Password: ", 5*time.Second)
	if got := con.Printed(pos, end); got != "rescue\nPassword: " {
		t.Fatalf("printed %q", got)
	}
	if p := con.TryWaitFor(pos, "login: ", 200*time.Millisecond); p != -1 {
		t.Fatalf("found the prompt before from again: %d", p)
	}
}

// TestSelfSignedCert: the certificate and key load as a TLS pair for
// 127.0.0.1.
func TestSelfSignedCert(t *testing.T) {
	certFile, keyFile := SelfSignedCert(t, t.TempDir(), "api", "test API")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := pair.Leaf.VerifyHostname("127.0.0.1"); err != nil || pair.Leaf.Subject.CommonName != "test API" {
		t.Fatalf("certificate %v: %v", pair.Leaf.Subject, err)
	}
}
