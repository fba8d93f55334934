package bmctest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// AgentImagePath is where AgentAPI serves its Image.
const AgentImagePath = "/images/disk.raw"

// AgentAPI plays the Bare Metal API's agent endpoints for one machine, as
// the agent in its ramdisk sees them: the root document (API version
// 1.78), lookup by the machine's MAC, which hands out the agent token, and
// heartbeats, which are refused without that token. When Image is set it
// is also served at AgentImagePath, for the agent's prepare_image.
//
// Fill in the fields, then Start it.
type AgentAPI struct {
	UUID, MAC, Token string
	// HeartbeatTimeout is the lookup reply's heartbeat_timeout in seconds:
	// how often the agent heartbeats.
	HeartbeatTimeout int
	Image            []byte

	// Addr (127.0.0.1:port) and Port are where Start serves the API.
	Addr string
	Port int

	beat        chan struct{}
	mu          sync.Mutex
	lookups     int
	firstLookup time.Time
	lookupFrom  string
	heartbeats  []agentapi.Heartbeat
}

// Start serves the API on loopback until the test ends.
func (a *AgentAPI) Start(t testing.TB) {
	t.Helper()
	a.beat = make(chan struct{}, 1)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	a.Addr = srv.Listener.Addr().String()
	a.Port = srv.Listener.Addr().(*net.TCPAddr).Port
}

// ServeHTTP answers the agent's requests.
func (a *AgentAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/":
		fmt.Fprint(w, `{"default_version": {"version": "1.78"}}`)
	case r.URL.Path == "/v1/lookup":
		a.mu.Lock()
		a.lookups++
		if a.firstLookup.IsZero() {
			a.firstLookup, a.lookupFrom = time.Now(), r.RemoteAddr
		}
		a.mu.Unlock()
		if !strings.Contains(r.URL.Query().Get("addresses"), a.MAC) {
			http.Error(w, `{"error_message": "Resource could not be found."}`, http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(agentapi.LookupReply{Node: agentapi.LookupNode{UUID: a.UUID},
			Config: agentapi.LookupConfig{HeartbeatTimeout: a.HeartbeatTimeout, AgentToken: a.Token, AgentTokenRequired: true}})
	case r.URL.Path == "/v1/heartbeat/"+a.UUID && r.Method == http.MethodPost:
		var hb agentapi.Heartbeat
		if err := json.NewDecoder(r.Body).Decode(&hb); err != nil || hb.AgentToken != a.Token {
			http.Error(w, `{"error_message": "Invalid or missing agent token received."}`, http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.heartbeats = append(a.heartbeats, hb)
		a.mu.Unlock()
		select {
		case a.beat <- struct{}{}:
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	case r.URL.Path == AgentImagePath && a.Image != nil:
		w.Write(a.Image)
	default:
		http.NotFound(w, r)
	}
}

// Beat receives when a heartbeat has been accepted (heartbeats while
// nobody receives count once).
func (a *AgentAPI) Beat() <-chan struct{} { return a.beat }

// Heartbeats are the heartbeats accepted so far, oldest first.
func (a *AgentAPI) Heartbeats() []agentapi.Heartbeat {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]agentapi.Heartbeat(nil), a.heartbeats...)
}

// Lookups counts the lookups, found or not.
func (a *AgentAPI) Lookups() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lookups
}

// FirstLookup is when the first lookup came and from which address (zero
// before any).
func (a *AgentAPI) FirstLookup() (at time.Time, from string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.firstLookup, a.lookupFrom
}

// Forget drops the lookups and heartbeats seen so far, and a beat not yet
// received, as before the machine boots again.
func (a *AgentAPI) Forget() {
	a.mu.Lock()
	a.lookups, a.firstLookup, a.lookupFrom, a.heartbeats = 0, time.Time{}, "", nil
	a.mu.Unlock()
	select {
	case <-a.beat:
	default:
	}
}
