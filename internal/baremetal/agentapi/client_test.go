package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// agentStub records requests and answers as an agent would.
type agentStub struct {
	mu    sync.Mutex
	reqs  []*http.Request
	body  []CommandRequest
	block chan struct{}
}

func (a *agentStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.reqs = append(a.reqs, r)
	a.mu.Unlock()
	if r.URL.Query().Get("agent_token") != "secret-token" {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"type":"Unauthorized","code":401,"message":"invalid or missing agent token"}`))
		return
	}
	if a.block != nil {
		<-a.block
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/commands/":
		var c CommandRequest
		json.NewDecoder(r.Body).Decode(&c)
		a.mu.Lock()
		a.body = append(a.body, c)
		a.mu.Unlock()
		json.NewEncoder(w).Encode(CommandResult{ID: "c1", CommandName: "finalize_rescue", CommandStatus: StatusSucceeded})
	case r.Method == http.MethodGet && r.URL.Path == "/v1/commands/":
		w.Write([]byte(`{"commands":[{"id":"c1","command_name":"prepare_image","command_status":"FAILED","command_error":{"type":"CommandExecutionError","code":500,"message":"failed","details":"checksum mismatch"},"command_result":null}]}`))
	case r.Method == http.MethodGet && r.URL.Path == "/v1/commands/c1":
		w.Write([]byte(`{"id":"c1","command_name":"prepare_image","command_status":"RUNNING","command_result":null,"command_error":null}`))
	default:
		http.NotFound(w, r)
	}
}

func TestClientSpeaksTheAgentAPI(t *testing.T) {
	stub := &agentStub{}
	hs := httptest.NewServer(stub)
	defer hs.Close()
	c, err := NewClient(hs.URL+"/", "secret-token", ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	res, err := c.RunCommand(ctx, CmdFinalizeRescue, FinalizeRescueParams{RescuePassword: "$5$x$y", Hashed: true}, false)
	if err != nil || res.CommandStatus != StatusSucceeded || !res.Done() {
		t.Fatalf("%+v %v", res, err)
	}
	r := stub.reqs[0]
	if r.URL.Query().Get("wait") != "false" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %v", r.URL, r.Header)
	}
	var p FinalizeRescueParams
	if stub.body[0].Name != CmdFinalizeRescue || json.Unmarshal(stub.body[0].Params, &p) != nil || p.RescuePassword != "$5$x$y" || !p.Hashed {
		t.Fatalf("body %+v", stub.body[0])
	}
	list, err := c.Commands(ctx)
	if err != nil || len(list) != 1 || list[0].CommandError == nil || list[0].CommandError.Details != "checksum mismatch" {
		t.Fatalf("%+v %v", list, err)
	}
	one, err := c.Command(ctx, "c1")
	if err != nil || one.Done() {
		t.Fatalf("%+v %v", one, err)
	}
}

func TestClientErrorsNeverShowTheToken(t *testing.T) {
	stub := &agentStub{}
	hs := httptest.NewServer(stub)
	defer hs.Close()
	// A refused token.
	c, _ := NewClient(hs.URL, "wrong-secret", ClientOptions{})
	_, err := c.Commands(context.Background())
	var ae *AgentError
	if !errors.As(err, &ae) || ae.Status != 401 || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("%v", err)
	}
	// A connection refused.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c2, _ := NewClient("http://"+addr, "secret-token", ClientOptions{})
	_, err = c2.RunCommand(context.Background(), CmdSync, nil, true)
	if err == nil || strings.Contains(err.Error(), "secret-token") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("%v", err)
	}
	// A timeout.
	stub.block = make(chan struct{})
	defer close(stub.block)
	c3, _ := NewClient(hs.URL, "secret-token", ClientOptions{Timeout: 100 * time.Millisecond})
	_, err = c3.RunCommand(context.Background(), CmdSync, nil, false)
	if err == nil || strings.Contains(err.Error(), "secret-token") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}

// TestClientsDoNotShareConnections checks that each client (one per boot)
// dials its own connection: a connection pooled by an earlier boot's
// client is never reused.
func TestClientsDoNotShareConnections(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]bool{}
	hs := httptest.NewUnstartedServer(&agentStub{})
	hs.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			conns[c.RemoteAddr().String()] = true
			mu.Unlock()
		}
	}
	hs.Start()
	defer hs.Close()
	for range 2 {
		c, _ := NewClient(hs.URL, "secret-token", ClientOptions{})
		for range 3 {
			if _, err := c.Commands(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(conns) != 2 {
		t.Fatalf("%d connections for 2 clients of 3 requests each, want 2", len(conns))
	}
}

func TestNewClientRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "ftp://x:1", "http://", "::"} {
		if _, err := NewClient(u, "t", ClientOptions{}); err == nil {
			t.Errorf("%q accepted", u)
		}
	}
}

// TestClientDialsThroughTheGivenDialer: a callback URL on a network the
// host has no route to is reached through ClientOptions.DialContext,
// which gets the callback's own address.
func TestClientDialsThroughTheGivenDialer(t *testing.T) {
	hs := httptest.NewServer(&agentStub{})
	defer hs.Close()
	var mu sync.Mutex
	var dialled []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialled = append(dialled, addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, hs.Listener.Addr().String())
	}
	c, err := NewClient("http://10.231.0.150:9999", "secret-token", ClientOptions{DialContext: dial})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.RunCommand(context.Background(), CmdFinalizeRescue, map[string]any{}, true)
	if err != nil || res.CommandStatus != StatusSucceeded {
		t.Fatalf("%+v %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 1 || dialled[0] != "10.231.0.150:9999" {
		t.Fatalf("dialled %v", dialled)
	}
}
