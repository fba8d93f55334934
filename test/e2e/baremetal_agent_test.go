package e2e

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/devcluster"
)

// bmAPI is a Bare Metal API client for tests: Ironic's requests with the
// dev cluster's http_basic credentials.
type bmAPI struct {
	t          *testing.T
	http       *http.Client
	url        string
	user, pass string
}

func newBMAPI(t *testing.T, c *cluster) *bmAPI {
	t.Helper()
	env, err := devcluster.ReadBaremetalEnv(c.st.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	pem, err := os.ReadFile(vars["OS_CACERT"])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &bmAPI{t: t, http: &http.Client{Transport: tr, Timeout: time.Minute}, url: vars["OS_ENDPOINT"],
		user: vars["OS_USERNAME"], pass: vars["OS_PASSWORD"]}
}

// do sends one request and decodes the answer into out; it returns the
// status and the raw body.
func (a *bmAPI) do(method, path string, body, out any) (int, string) {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, a.url+path, rd)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	req.SetBasicAuth(a.user, a.pass)
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, string(raw)
}

func (a *bmAPI) must(method, path string, body, out any) {
	a.t.Helper()
	if code, raw := a.do(method, path, body, out); code >= 300 {
		a.t.Fatalf("%s %s: HTTP %d: %s", method, path, code, raw)
	}
}

// node reads a machine as the API shows it.
func (a *bmAPI) node(ident string) map[string]any {
	a.t.Helper()
	var n map[string]any
	a.must("GET", "/v1/nodes/"+ident, nil, &n)
	return n
}

// waitState polls until the machine shows state with no target.
func (a *bmAPI) waitState(ident, state string, within time.Duration) map[string]any {
	a.t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := a.node(ident)
		if n["provision_state"] == state && n["target_provision_state"] == nil {
			return n
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s: %v -> %v (last error %v), want %s", ident, n["provision_state"], n["target_provision_state"], n["last_error"], state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// walkToActive enrolls a fake-hardware machine with the agent's rescue
// and a port, and deploys it.
func (a *bmAPI) walkToActive(name, mac string) string {
	a.t.Helper()
	var n map[string]any
	a.must("POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": name, "rescue_interface": "agent"}, &n)
	uuid := n["uuid"].(string)
	a.must("POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": uuid}, nil)
	for _, s := range [][2]string{{"manage", "manageable"}, {"provide", "available"}, {"active", "active"}} {
		a.must("PUT", "/v1/nodes/"+name+"/states/provision", map[string]any{"target": s[0]}, nil)
		a.waitState(name, s[1], 30*time.Second)
	}
	return uuid
}

// fakeAgent answers the conductor's agent commands as the agent does.
type fakeAgent struct {
	mu       sync.Mutex
	commands []map[string]any
	srv      *httptest.Server
}

func newFakeAgent(t *testing.T) *fakeAgent {
	f := &fakeAgent{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var cmd map[string]any
		if err := json.NewDecoder(r.Body).Decode(&cmd); err != nil || r.Method != "POST" {
			http.Error(w, "bad command", http.StatusBadRequest)
			return
		}
		cmd["agent_token"] = r.URL.Query().Get("agent_token")
		f.mu.Lock()
		f.commands = append(f.commands, cmd)
		f.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"id": "c1", "command_name": cmd["name"], "command_status": "SUCCEEDED"})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// TestBaremetalAgentRescueSurvivesMasterCrash plays a machine's agent
// against a real dev cluster: a rescue parks in rescue wait, the agent
// looks itself up (the token is given once), corrald is SIGKILLed and
// started again, the agent's heartbeat then wakes the resumed job, which
// finalizes the rescue with the password's hash through the node daemon.
// A second machine's agent never calls back: the rescue fails after the
// callback timeout with the password removed.
func TestBaremetalAgentRescueSurvivesMasterCrash(t *testing.T) {
	c := newClusterWith(t, devcluster.Options{Hypervisors: []string{"fake"}, WatcherEvery: time.Hour,
		CorraldArgs: []string{"--baremetal-api-url", "https://192.0.2.1:6385", "--rescue-callback-timeout", "15s"}})
	api := newBMAPI(t, c)
	agent := newFakeAgent(t)
	const pw = "Agent-Rescue-Pw-4471"
	uuid := api.walkToActive("bm1", "52:54:00:aa:00:01")

	api.must("PUT", "/v1/nodes/bm1/states/provision", map[string]any{"target": "rescue", "rescue_password": pw}, nil)
	deadline := time.Now().Add(30 * time.Second)
	for api.node("bm1")["provision_state"] != "rescue wait" {
		if time.Now().After(deadline) {
			t.Fatalf("never in rescue wait: %v", api.node("bm1"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var look struct {
		Node   map[string]any `json:"node"`
		Config map[string]any `json:"config"`
	}
	api.must("GET", "/v1/lookup?addresses=52:54:00:aa:00:01", nil, &look)
	token, _ := look.Config["agent_token"].(string)
	if len(token) < 32 || look.Node["uuid"] != uuid {
		t.Fatalf("lookup: %+v", look)
	}
	var again struct {
		Config map[string]any `json:"config"`
	}
	api.must("GET", "/v1/lookup?node_uuid="+uuid, nil, &again)
	if again.Config["agent_token"] == token {
		t.Fatal("a second lookup got the token in clear")
	}

	c.killCorrald()
	c.restartCorrald()
	hb := map[string]any{"callback_url": agent.srv.URL, "agent_token": token, "agent_version": "e2e"}
	if code, raw := api.do("POST", "/v1/heartbeat/"+uuid, map[string]any{"callback_url": agent.srv.URL, "agent_token": "wrong"}, nil); code != 400 || !strings.Contains(raw, "Invalid or missing agent token") {
		t.Fatalf("heartbeat with a wrong token: %d %s", code, raw)
	}
	// corral-rapi reaches the restarted corrald on its next call.
	deadline = time.Now().Add(30 * time.Second)
	for code, raw := api.do("POST", "/v1/heartbeat/"+uuid, hb, nil); code != 202; code, raw = api.do("POST", "/v1/heartbeat/"+uuid, hb, nil) {
		if time.Now().After(deadline) {
			t.Fatalf("heartbeat: %d %s", code, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := api.waitState("bm1", "rescue", 30*time.Second)
	if info, _ := n["instance_info"].(map[string]any); len(info) != 0 {
		t.Errorf("instance_info after the rescue: %v", info)
	}
	agent.mu.Lock()
	cmds := agent.commands
	agent.mu.Unlock()
	if len(cmds) != 1 || cmds[0]["name"] != "rescue.finalize_rescue" || cmds[0]["agent_token"] != token {
		t.Fatalf("agent commands: %v", cmds)
	}
	params, _ := cmds[0]["params"].(map[string]any)
	hash, _ := params["rescue_password"].(string)
	if params["hashed"] != true || !strings.HasPrefix(hash, "$5$") || !cryptpw.Verify(hash, pw) {
		t.Fatalf("finalize_rescue params: %v", params)
	}

	// An agent that never calls back.
	api.walkToActive("bm2", "52:54:00:aa:00:02")
	api.must("PUT", "/v1/nodes/bm2/states/provision", map[string]any{"target": "rescue", "rescue_password": pw}, nil)
	deadline = time.Now().Add(90 * time.Second)
	var m2 map[string]any
	for m2 = api.node("bm2"); m2["provision_state"] != "rescue failed"; m2 = api.node("bm2") {
		if time.Now().After(deadline) {
			t.Fatalf("bm2 never failed its rescue: %v", m2)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if last, _ := m2["last_error"].(string); !strings.Contains(last, "Timeout reached while waiting for callback") {
		t.Errorf("last_error %q", last)
	}
	if info, _ := m2["instance_info"].(map[string]any); len(info) != 0 {
		t.Errorf("instance_info after the failed rescue: %v", info)
	}
	if m2["target_provision_state"] != "rescue" {
		t.Errorf("target after the failed rescue: %v", m2["target_provision_state"])
	}
	// The password never shows in clear: not in the jobs, nor the logs.
	out, err := c.corral("job", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		id := strings.Fields(line)[0]
		info, _ := c.corral("job", "info", id)
		if strings.Contains(info, pw) || strings.Contains(info, hash) {
			t.Fatalf("job %s shows the rescue password or its hash", id)
		}
	}
	for _, p := range c.st.Procs {
		if raw, _ := os.ReadFile(p.Log); bytes.Contains(raw, []byte(pw)) {
			t.Fatalf("%s's log holds the rescue password", p.Name)
		}
	}
}
