package baremetalapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/cryptpw"
)

const latest = "1.78"

func newTestHandler(t *testing.T) (*Handler, *fakeBackend) {
	t.Helper()
	be := newFakeBackend()
	return NewHandler(Config{Backend: be}), be
}

func do(t *testing.T, h http.Handler, method, path, version, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://bm.example:6385"+path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Auth-Token", "notused")
	if version != "" {
		r.Header.Set(versionHeader, version)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func decode(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("reply %d is not a JSON object: %v: %s", w.Code, err, w.Body)
	}
	return out
}

// fault decodes an Ironic error body and returns faultcode and faultstring.
func fault(t *testing.T, w *httptest.ResponseRecorder) (string, string) {
	t.Helper()
	outer := decode(t, w)
	s, ok := outer["error_message"].(string)
	if !ok || len(outer) != 1 {
		t.Fatalf("error body is not {\"error_message\": string}: %s", w.Body)
	}
	var inner map[string]any
	if err := json.Unmarshal([]byte(s), &inner); err != nil {
		t.Fatalf("error_message is not JSON: %v: %q", err, s)
	}
	if _, ok := inner["debuginfo"]; !ok || inner["debuginfo"] != nil {
		t.Errorf("debuginfo missing or not null: %q", s)
	}
	return inner["faultcode"].(string), inner["faultstring"].(string)
}

func wantFault(t *testing.T, w *httptest.ResponseRecorder, code int, text string) {
	t.Helper()
	if w.Code != code {
		t.Fatalf("status %d, want %d: %s", w.Code, code, w.Body)
	}
	fc, fs := fault(t, w)
	if want := map[bool]string{true: "Client", false: "Server"}[code < 500]; fc != want {
		t.Errorf("faultcode %q, want %q", fc, want)
	}
	if fs != text {
		t.Errorf("faultstring\n got %q\nwant %q", fs, text)
	}
}

func createNode(t *testing.T, h http.Handler, body string) map[string]any {
	t.Helper()
	w := do(t, h, "POST", "/v1/nodes", latest, body)
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	n := decode(t, w)
	if loc := w.Header().Get("Location"); loc != "http://bm.example:6385/v1/nodes/"+n["uuid"].(string) {
		t.Errorf("Location %q", loc)
	}
	return n
}

func TestDiscoveryAndVersionNegotiation(t *testing.T) {
	h, _ := newTestHandler(t)
	w := do(t, h, "GET", "/", "", "")
	root := decode(t, w)
	if w.Code != 200 || root["name"] != "OpenStack Ironic API" || w.Header().Get(maxVersionHeader) != "" {
		t.Fatalf("GET /: %d %v %v", w.Code, root, w.Header())
	}
	dv := root["default_version"].(map[string]any)
	if dv["version"] != "1.78" || dv["min_version"] != "1.1" || dv["id"] != "v1" {
		t.Errorf("default_version %v", dv)
	}

	w = do(t, h, "GET", "/v1", "", "")
	if w.Code != 200 || w.Header().Get(versionHeader) != "1.1" || w.Header().Get(minVersionHeader) != "1.1" ||
		w.Header().Get(maxVersionHeader) != "1.78" || !strings.HasPrefix(w.Header().Get("Openstack-Request-Id"), "req-") {
		t.Fatalf("GET /v1: %d %v", w.Code, w.Header())
	}
	v1 := decode(t, w)
	for _, k := range []string{"id", "links", "media_types", "chassis", "nodes", "ports", "drivers", "version"} {
		if _, ok := v1[k]; !ok {
			t.Errorf("GET /v1 lacks %s", k)
		}
	}

	for _, asked := range []string{"1.99", "1.0", "2.1"} {
		w = do(t, h, "GET", "/v1/nodes", asked, "")
		if w.Code != http.StatusNotAcceptable {
			t.Fatalf("%s: status %d", asked, w.Code)
		}
		if w.Header().Get(minVersionHeader) != "1.1" || w.Header().Get(maxVersionHeader) != "1.78" ||
			w.Header().Get(versionHeader) != "" || w.Header().Get("Openstack-Request-Id") != "" {
			t.Errorf("%s: 406 headers %v", asked, w.Header())
		}
		want := `{"error_message":"{\"code\":406,\"title\":\"Not Acceptable\",\"description\":\"Version ` + asked +
			` was requested but the minor version is not supported by this service. The supported version range is: [1.1, 1.78].\"}"}`
		if w.Body.String() != want {
			t.Errorf("%s: 406 body\n got %s\nwant %s", asked, w.Body, want)
		}
	}
	if w = do(t, h, "GET", "/v1/nodes", "latest", ""); w.Header().Get(versionHeader) != "1.78" {
		t.Errorf("latest served %q", w.Header().Get(versionHeader))
	}
	if w = do(t, h, "GET", "/v1/nodes", "one.two", ""); w.Code != http.StatusNotAcceptable {
		t.Errorf("malformed version: %d", w.Code)
	}
	wantFault(t, do(t, h, "GET", "/v1/nothing", latest, ""), 404, "The resource could not be found.")
	if w = do(t, h, "GET", "/v1/chassis", latest, ""); w.Code != 200 || w.Body.String() != `{"chassis":[]}` {
		t.Errorf("chassis: %d %s", w.Code, w.Body)
	}
}

// nodeKeys178 are the node object's keys at 1.78 (real Ironic 21.4).
const nodeKeys178 = `allocation_uuid automated_clean bios_interface boot_interface boot_mode chassis_uuid clean_step
conductor conductor_group console_enabled console_interface created_at deploy_interface deploy_step description
driver driver_info driver_internal_info extra fault inspect_interface inspection_finished_at inspection_started_at
instance_info instance_uuid last_error lessee links maintenance maintenance_reason management_interface name
network_data network_interface owner portgroups ports power_interface power_state properties protected
protected_reason provision_state provision_updated_at raid_config raid_interface rescue_interface reservation
resource_class retired retired_reason secure_boot states storage_interface target_power_state
target_provision_state target_raid_config traits updated_at uuid vendor_interface volume`

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestNodeObjectKeysFollowTheVersion(t *testing.T) {
	h, _ := newTestHandler(t)
	n := createNode(t, h, `{"driver": "fake-hardware", "name": "bm1"}`)
	if got, want := strings.Join(keys(n), " "), strings.Join(strings.Fields(nodeKeys178), " "); got != want {
		t.Errorf("keys at 1.78\n got %s\nwant %s", got, want)
	}
	if n["provision_state"] != "enroll" || n["target_provision_state"] != nil || n["power_state"] != nil {
		t.Errorf("new node states: %v %v %v", n["provision_state"], n["target_provision_state"], n["power_state"])
	}
	if ts, _ := n["created_at"].(string); !strings.HasSuffix(ts, "+00:00") || len(ts) != len("2026-11-29T17:29:02+00:00") {
		t.Errorf("created_at %q", ts)
	}
	old := decode(t, do(t, h, "GET", "/v1/nodes/"+n["uuid"].(string), "1.1", ""))
	for _, k := range []string{"name", "driver_internal_info", "rescue_interface", "boot_interface", "states", "portgroups", "owner"} {
		if _, ok := old[k]; ok {
			t.Errorf("1.1 shows %s", k)
		}
	}
	if _, ok := old["driver_info"]; !ok {
		t.Error("1.1 lacks driver_info")
	}
	n37 := decode(t, do(t, h, "GET", "/v1/nodes/bm1", "1.37", ""))
	if _, ok := n37["rescue_interface"]; ok {
		t.Error("1.37 shows rescue_interface (1.38)")
	}
	if _, ok := n37["traits"]; !ok {
		t.Error("1.37 lacks traits")
	}
	// Before 1.11 a new machine is ready at once.
	w := do(t, h, "POST", "/v1/nodes", "1.10", `{"driver": "fake-hardware"}`)
	if decode(t, w)["provision_state"] != "available" {
		t.Errorf("create at 1.10: %s", w.Body)
	}
	// A field newer than the version is not accepted.
	if w = do(t, h, "POST", "/v1/nodes", "1.37", `{"driver": "fake-hardware", "rescue_interface": "agent"}`); w.Code != 406 {
		t.Errorf("rescue_interface at 1.37: %d", w.Code)
	}
	got := decode(t, do(t, h, "GET", "/v1/nodes/bm1?fields=uuid,provision_state", latest, ""))
	if strings.Join(keys(got), " ") != "links provision_state uuid" {
		t.Errorf("fields: %v", keys(got))
	}
}

func TestNodeCreateRefusesBadBodies(t *testing.T) {
	h, _ := newTestHandler(t)
	cases := map[string]string{
		`{"name": "x"}`: `'driver' is a required property`,
		`{"driver": "fake-hardware", "bogus": 1}`:                  `Additional properties are not allowed ('bogus' was unexpected)`,
		`{"driver": "fake-hardware", "provision_state": "active"}`: `Additional properties are not allowed ('provision_state' was unexpected)`,
		`{"driver": 3}`: `Invalid value for driver: a JSON number is not a string`,
		`{"driver": "fake-hardware", "name": "a b"}`:  `Expected a logical name but received a b.`,
		`{"driver": "fake-hardware", "uuid": "nope"}`: `Expected a UUID but received nope.`,
		`[1]`:                            `The request body must be a JSON object.`,
		`{"driver": "fake-hardware"} {}`: `The request body has data after its JSON object.`,
		`{"driver": "fake-hardware", "driver_info": []}`: `Invalid value for driver_info: a JSON array is not a JSON object`,
	}
	for body, want := range cases {
		wantFault(t, do(t, h, "POST", "/v1/nodes", latest, body), 400, want)
	}
	createNode(t, h, `{"driver": "fake-hardware", "name": "dup"}`)
	wantFault(t, do(t, h, "POST", "/v1/nodes", latest, `{"driver": "fake-hardware", "name": "dup"}`), 409, "A node with name dup already exists.")
	big := `{"driver": "fake-hardware", "extra": {"x": "` + strings.Repeat("a", maxBodyBytes) + `"}}`
	if w := do(t, h, "POST", "/v1/nodes", latest, big); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized body: %d", w.Code)
	}
}

func TestNodeListFiltersPagesAndSorts(t *testing.T) {
	h, be := newTestHandler(t)
	for _, n := range []string{"c", "a", "b"} {
		createNode(t, h, `{"driver": "fake-hardware", "name": "`+n+`", "owner": "o-`+n+`"}`)
	}
	w := do(t, h, "GET", "/v1/nodes", latest, "")
	nodes := decode(t, w)["nodes"].([]any)
	if len(nodes) != 3 {
		t.Fatalf("list: %s", w.Body)
	}
	if got := strings.Join(keys(nodes[0].(map[string]any)), " "); got != "instance_uuid links maintenance name power_state provision_state uuid" {
		t.Errorf("list keys: %s", got)
	}
	res := decode(t, do(t, h, "GET", "/v1/nodes?sort_key=name&sort_dir=desc&limit=2", latest, ""))
	page1 := res["nodes"].([]any)
	if len(page1) != 2 || page1[0].(map[string]any)["name"] != "c" || page1[1].(map[string]any)["name"] != "b" {
		t.Fatalf("page 1: %v", res)
	}
	next, _ := res["next"].(string)
	if !strings.HasPrefix(next, "http://bm.example:6385/v1/nodes?") || !strings.Contains(next, "marker="+page1[1].(map[string]any)["uuid"].(string)) {
		t.Fatalf("next %q", next)
	}
	res = decode(t, do(t, h, "GET", strings.TrimPrefix(next, "http://bm.example:6385"), latest, ""))
	if p2 := res["nodes"].([]any); len(p2) != 1 || p2[0].(map[string]any)["name"] != "a" || res["next"] != nil {
		t.Errorf("page 2: %v", res)
	}
	res = decode(t, do(t, h, "GET", "/v1/nodes/detail?owner=o-b", latest, ""))
	if d := res["nodes"].([]any); len(d) != 1 || d[0].(map[string]any)["driver"] != "fake-hardware" {
		t.Errorf("detail by owner: %v", res)
	}
	be.machines[nodes[0].(map[string]any)["uuid"].(string)].ProvisionState = "available"
	res = decode(t, do(t, h, "GET", "/v1/nodes?provision_state=available&maintenance=false", latest, ""))
	if len(res["nodes"].([]any)) != 1 {
		t.Errorf("provision_state filter: %v", res)
	}
	if w := do(t, h, "GET", "/v1/nodes?owner=o-b", "1.49", ""); w.Code != 406 {
		t.Errorf("owner filter at 1.49: %d", w.Code)
	}
	wantFault(t, do(t, h, "GET", "/v1/nodes?sort_dir=up", latest, ""), 400, "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'")
	wantFault(t, do(t, h, "GET", "/v1/nodes?limit=0", latest, ""), 400, "Limit must be positive")
	wantFault(t, do(t, h, "GET", "/v1/nodes?marker=nope", latest, ""), 400, "Marker nope could not be found.")
}

func TestProvisionActionsAndErrors(t *testing.T) {
	h, be := newTestHandler(t)
	n := createNode(t, h, `{"driver": "fake-hardware", "name": "bm1"}`)
	uuid := n["uuid"].(string)
	for _, target := range []string{"manage", "provide", "active"} {
		w := do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "`+target+`"}`)
		if w.Code != http.StatusAccepted || w.Body.Len() != 0 || w.Header().Get("Location") != "http://bm.example:6385/v1/nodes/bm1/states" {
			t.Fatalf("%s: %d %q %v", target, w.Code, w.Body, w.Header())
		}
	}
	if st := decode(t, do(t, h, "GET", "/v1/nodes/bm1/states", latest, "")); st["provision_state"] != "active" {
		t.Fatalf("states: %v", st)
	}
	bad := fmtTransition("bogus", uuid, "active")
	wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "bogus"}`), 400, bad)
	wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "provide"}`), 400, fmtTransition("provide", uuid, "active"))
	const needPW = `A non-empty "rescue_password" is required when setting target provision state to rescue`
	for _, body := range []string{`{"target": "rescue"}`, `{"target": "rescue", "rescue_password": ""}`, `{"target": "rescue", "rescue_password": " \t"}`} {
		wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, body), 400, needPW)
	}
	if be.lastTarget == "rescue" {
		t.Fatal("a rescue without a password reached the backend")
	}
	if w := do(t, h, "PUT", "/v1/nodes/bm1/states/provision", "1.37", `{"target": "rescue", "rescue_password": "pw"}`); w.Code != 406 {
		t.Errorf("rescue at 1.37: %d", w.Code)
	}
	wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "unrescue", "rescue_password": "x"}`), 400,
		`"rescue_password" is only valid when setting target provision state to rescue`)

	const clear = "S3cret-rescue-pw"
	w := do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "rescue", "rescue_password": "`+clear+`", "ssh_public_keys": ["ssh-ed25519 AAAA k"]}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("rescue: %d %s", w.Code, w.Body)
	}
	hash := be.lastArgs.RescuePasswordHash
	if !strings.HasPrefix(hash, "$5$") || strings.Contains(hash, clear) {
		t.Fatalf("backend got %q, not a SHA-256 crypt hash", hash)
	}
	if !cryptpw.Verify(hash, clear) {
		t.Error("the hash is not of the password sent")
	}
	if len(be.lastArgs.SSHPublicKeys) != 1 {
		t.Errorf("ssh keys %v", be.lastArgs.SSHPublicKeys)
	}
	shown := do(t, h, "GET", "/v1/nodes/bm1", latest, "")
	if strings.Contains(shown.Body.String(), hash) || strings.Contains(shown.Body.String(), clear) {
		t.Errorf("the node shows the rescue password or its hash: %s", shown.Body)
	}
	if ii := decode(t, shown)["instance_info"].(map[string]any); ii["hashed_rescue_password"] != masked {
		t.Errorf("instance_info %v", ii)
	}

	be.machines[uuid].Reservation = "job-1"
	wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "unrescue"}`), 409,
		"Node "+uuid+" is locked by host 127.0.0.1, please retry after the current operation is completed.")
	be.machines[uuid].Reservation = ""
	wantFault(t, do(t, h, "PUT", "/v1/nodes/nope/states/provision", latest, `{"target": "manage"}`), 404, "Node nope could not be found.")
	wantFault(t, do(t, h, "GET", "/v1/nodes/nope", latest, ""), 404, "Node nope could not be found.")
	wantFault(t, do(t, h, "DELETE", "/v1/nodes/bm1", latest, ""), 409,
		`Can not delete node "`+uuid+`" while it is in provision state "rescue". Valid provision states to perform deletion are: "('manageable', 'enroll', 'adopt failed', 'available')", or set the node into maintenance mode`)
	wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "manage", "configdrive": "abc"}`), 400,
		"Adding a config drive is only supported when setting provision state to active or rebuild")

	for _, step := range []struct{ method, path, body string }{
		{"PUT", "/v1/nodes/bm1/maintenance", `{"reason": "disk"}`},
		{"PUT", "/v1/nodes/bm1/states/power", `{"target": "power off"}`},
	} {
		if w := do(t, h, step.method, step.path, latest, step.body); w.Code != http.StatusAccepted {
			t.Errorf("%s %s: %d %s", step.method, step.path, w.Code, w.Body)
		}
	}
	if m := be.machines[uuid]; !m.Maintenance || m.MaintenanceReason != "disk" || be.lastPower != "power off" {
		t.Errorf("maintenance/power not passed: %v %q %q", m.Maintenance, m.MaintenanceReason, be.lastPower)
	}
	wantFault(t, do(t, h, "PUT", "/v1/nodes/bm1/states/power", latest, `{"target": "dance"}`), 400, "Invalid state dance requested for the power state.")
	if w := do(t, h, "PUT", "/v1/nodes/bm1/states/power", "1.26", `{"target": "soft power off"}`); w.Code != 406 {
		t.Errorf("soft power off at 1.26: %d", w.Code)
	}
	if w := do(t, h, "DELETE", "/v1/nodes/bm1/maintenance", latest, ""); w.Code != 202 || be.machines[uuid].Maintenance {
		t.Errorf("maintenance unset: %d", w.Code)
	}
	val := decode(t, do(t, h, "GET", "/v1/nodes/bm1/validate", latest, ""))
	if r := val["rescue"].(map[string]any); r["result"] != false || r["reason"] != "no rescue network" {
		t.Errorf("validate %v", val)
	}
	if p := val["power"].(map[string]any); p["result"] != true || p["reason"] != nil {
		t.Errorf("validate %v", val)
	}
	be.machines[uuid].ProvisionState = "available"
	if w := do(t, h, "DELETE", "/v1/nodes/"+uuid, latest, ""); w.Code != http.StatusNoContent {
		t.Errorf("delete: %d %s", w.Code, w.Body)
	}
}

func fmtTransition(target, uuid, state string) string {
	return `The requested action "` + target + `" can not be performed on node "` + uuid + `" while it is in state "` + state + `".`
}

func TestSecretsAreMasked(t *testing.T) {
	h, be := newTestHandler(t)
	n := createNode(t, h, `{"driver": "ipmi", "name": "bm1", "driver_info": {"ipmi_address": "10.0.0.5", "ipmi_password": "IPMIPW",
		"redfish_auth": {"Token": "TOKVAL"}, "ipmi_username": "admin", "kg_key": "KGKEY"}}`)
	uuid := n["uuid"].(string)
	m := be.machines[uuid]
	m.InstanceInfo = map[string]any{"rescue_password": "CLEARPW", "hashed_rescue_password": "$5$s$HASH", "configdrive": "CDRIVE", "image_source": "http://img"}
	m.DriverInternalInfo = map[string]any{"agent_secret_token": "AGENTTOK", "agent_url": "http://10.0.0.9:9999"}
	for _, path := range []string{"/v1/nodes/bm1", "/v1/nodes/detail", "/v1/nodes/bm1?fields=driver_info,instance_info"} {
		body := do(t, h, "GET", path, latest, "").Body.String()
		for _, secret := range []string{"IPMIPW", "TOKVAL", "KGKEY", "CLEARPW", "HASH", "CDRIVE", "AGENTTOK"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %s: %s", path, secret, body)
			}
		}
		for _, visible := range []string{"10.0.0.5", "admin", "http://img"} {
			if !strings.Contains(body, visible) {
				t.Errorf("%s hides %s", path, visible)
			}
		}
	}
	// The create answer masks too.
	if di := n["driver_info"].(map[string]any); di["ipmi_password"] != masked {
		t.Errorf("create shows %v", di)
	}
}

func TestNodePatch(t *testing.T) {
	h, be := newTestHandler(t)
	createNode(t, h, `{"driver": "ipmi", "name": "bm1", "driver_info": {"ipmi_address": "10.0.0.5", "ipmi_password": "pw"}, "properties": {"cpus": 2}}`)
	w := do(t, h, "PATCH", "/v1/nodes/bm1", latest, `[{"op": "replace", "path": "/driver_info/ipmi_address", "value": "10.0.0.6"},
		{"op": "add", "path": "/properties/cpus", "value": 4}, {"op": "add", "path": "/properties/memory_mb", "value": 2048},
		{"op": "replace", "path": "/description", "value": "rack 4"}]`)
	if w.Code != 200 {
		t.Fatalf("patch: %d %s", w.Code, w.Body)
	}
	u := be.lastUpdate
	if u.Serial != 1 || len(u.Fields) != 3 {
		t.Fatalf("update %+v", u)
	}
	di := u.Fields["driver_info"].(map[string]any)
	if di["ipmi_address"] != "10.0.0.6" || di["ipmi_password"] != "pw" {
		t.Errorf("driver_info passed %v (the stored password must be kept, not the mask)", di)
	}
	if p := u.Fields["properties"].(map[string]any); p["cpus"] != 4.0 || p["memory_mb"] != 2048.0 {
		t.Errorf("properties %v", p)
	}
	if n := decode(t, w); n["description"] != "rack 4" || n["driver_info"].(map[string]any)["ipmi_password"] != masked {
		t.Errorf("answer %v", n)
	}
	w = do(t, h, "PATCH", "/v1/nodes/bm1", latest, `[{"op": "remove", "path": "/description"}]`)
	if w.Code != 200 || be.lastUpdate.Fields["description"] != nil || len(be.lastUpdate.Fields) != 1 {
		t.Errorf("remove: %d %+v", w.Code, be.lastUpdate)
	}
	const allowed = "Only the following can be updated: automated_clean, bios_interface, boot_interface"
	for _, p := range []string{"/uuid", "/provision_state", "/power_state", "/driver_internal_info/x", "/reservation"} {
		w := do(t, h, "PATCH", "/v1/nodes/bm1", latest, `[{"op": "replace", "path": "`+p+`", "value": "x"}]`)
		_, fs := fault(t, w)
		if w.Code != 400 || !strings.HasPrefix(fs, "Cannot patch "+p+". "+allowed) {
			t.Errorf("%s: %d %q", p, w.Code, fs)
		}
	}
	wantFault(t, do(t, h, "PATCH", "/v1/nodes/bm1", latest, `[{"op": "add", "path": "/newroot", "value": 1}]`), 400,
		"Cannot patch /newroot. "+allowed+", conductor_group, console_interface, deploy_interface, description, driver, driver_info, extra, inspect_interface, instance_info, instance_uuid, lessee, maintenance, management_interface, name, network_interface, owner, power_interface, properties, raid_interface, rescue_interface, resource_class, storage_interface, vendor_interface")
	wantFault(t, do(t, h, "PATCH", "/v1/nodes/bm1", latest, `[{"op": "replace", "path": "/name", "value": 5}]`), 400, "Invalid value for name: wrong type")
	wantFault(t, do(t, h, "PATCH", "/v1/nodes/bm1", latest, `[{"op": "remove", "path": "/properties/nope"}]`), 400,
		`couldn't apply patch operation 0 (remove /properties/nope): member "nope" does not exist`)
	if w := do(t, h, "PATCH", "/v1/nodes/bm1", "1.37", `[{"op": "replace", "path": "/rescue_interface", "value": "agent"}]`); w.Code != 406 {
		t.Errorf("rescue_interface patch at 1.37: %d", w.Code)
	}
	wantFault(t, do(t, h, "PATCH", "/v1/nodes/bm1", latest, `{"op": "replace"}`), 400,
		"the patch must be a JSON list of operations: json: cannot unmarshal object into Go value of type []map[string]json.RawMessage")
}

func TestPorts(t *testing.T) {
	h, _ := newTestHandler(t)
	n := createNode(t, h, `{"driver": "fake-hardware", "name": "bm1"}`)
	w := do(t, h, "POST", "/v1/ports", latest, `{"address": "52:54:00:AA:BB:01", "node_uuid": "`+n["uuid"].(string)+`"}`)
	if w.Code != 201 {
		t.Fatalf("port create: %d %s", w.Code, w.Body)
	}
	p := decode(t, w)
	if p["address"] != "52:54:00:aa:bb:01" || p["pxe_enabled"] != true || w.Header().Get("Location") == "" {
		t.Errorf("port %v", p)
	}
	uuid := p["uuid"].(string)
	wantFault(t, do(t, h, "POST", "/v1/ports", latest, `{"address": "zz", "node_uuid": "bm1"}`), 400, "Expected a MAC address but received zz.")
	wantFault(t, do(t, h, "POST", "/v1/ports", latest, `{"address": "52:54:00:aa:bb:02", "node_uuid": "nope"}`), 404, "Node nope could not be found.")
	for _, path := range []string{"/v1/ports?node=bm1", "/v1/ports/?node=bm1", "/v1/ports?address=52:54:00:aa:bb:01", "/v1/nodes/bm1/ports", "/v1/ports?node_uuid=" + n["uuid"].(string)} {
		ps := decode(t, do(t, h, "GET", path, latest, ""))["ports"].([]any)
		if len(ps) != 1 || strings.Join(keys(ps[0].(map[string]any)), " ") != "address links uuid" {
			t.Errorf("%s: %v", path, ps)
		}
	}
	if ps := decode(t, do(t, h, "GET", "/v1/ports?address=52:54:00:aa:bb:09", latest, ""))["ports"].([]any); len(ps) != 0 {
		t.Errorf("address filter: %v", ps)
	}
	d := decode(t, do(t, h, "GET", "/v1/ports/detail", latest, ""))["ports"].([]any)[0].(map[string]any)
	if d["node_uuid"] != n["uuid"] || d["physical_network"] != nil {
		t.Errorf("detail %v", d)
	}
	w = do(t, h, "PATCH", "/v1/ports/"+uuid, latest, `[{"op": "replace", "path": "/pxe_enabled", "value": false}]`)
	if w.Code != 200 || decode(t, w)["pxe_enabled"] != false {
		t.Errorf("port patch: %d %s", w.Code, w.Body)
	}
	wantFault(t, do(t, h, "PATCH", "/v1/ports/"+uuid, latest, `[{"op": "replace", "path": "/uuid", "value": "x"}]`), 400,
		"Cannot patch /uuid. Only the following can be updated: address, extra, local_link_connection, node_uuid, physical_network, pxe_enabled")
	if w := do(t, h, "DELETE", "/v1/ports/"+uuid, latest, ""); w.Code != 204 {
		t.Errorf("port delete: %d", w.Code)
	}
	wantFault(t, do(t, h, "GET", "/v1/ports/"+uuid, latest, ""), 404, "Port "+uuid+" could not be found.")
}

func TestDrivers(t *testing.T) {
	h, _ := newTestHandler(t)
	ds := decode(t, do(t, h, "GET", "/v1/drivers", latest, ""))["drivers"].([]any)
	if len(ds) != 2 || ds[0].(map[string]any)["name"] != "fake-hardware" || ds[0].(map[string]any)["type"] != "dynamic" {
		t.Fatalf("drivers %v", ds)
	}
	if _, ok := ds[0].(map[string]any)["enabled_power_interfaces"]; ok {
		t.Error("list without detail shows interfaces")
	}
	d := decode(t, do(t, h, "GET", "/v1/drivers/fake-hardware", latest, ""))
	if d["default_rescue_interface"] != "fake" || len(d["enabled_rescue_interfaces"].([]any)) != 2 || d["default_bios_interface"] != nil {
		t.Errorf("driver %v", d)
	}
	if p := decode(t, do(t, h, "GET", "/v1/drivers/ipmi/properties", latest, "")); p["ipmi_address"] == nil {
		t.Errorf("properties %v", p)
	}
	wantFault(t, do(t, h, "GET", "/v1/drivers/nope", latest, ""), 404, "Could not find the following driver(s) or hardware type(s): nope.")
}

func TestAgentLookupAndHeartbeat(t *testing.T) {
	h, be := newTestHandler(t)
	n := createNode(t, h, `{"driver": "fake-hardware", "name": "bm1", "properties": {"cpus": 1}}`)
	uuid := n["uuid"].(string)
	do(t, h, "POST", "/v1/ports", latest, `{"address": "52:54:00:aa:bb:01", "node_uuid": "bm1"}`)
	const lookup = "/v1/lookup?addresses=52:54:00:AA:BB:01,bogus"
	wantFault(t, do(t, h, "GET", lookup, latest, ""), 404, "Resource could not be found.") // enroll: no lookup
	be.machines[uuid].ProvisionState = "rescue wait"
	be.machines[uuid].InstanceInfo = map[string]any{"hashed_rescue_password": "$5$x$HASH"}
	w := do(t, h, "GET", lookup, latest, "")
	res := decode(t, w)
	node, cfg := res["node"].(map[string]any), res["config"].(map[string]any)
	if w.Code != 200 || node["uuid"] != uuid || cfg["agent_token"] != "tok-"+uuid || cfg["agent_token_required"] != true {
		t.Fatalf("lookup %d %v", w.Code, res)
	}
	if strings.Join(keys(node), " ") != "driver_internal_info instance_info links properties uuid" {
		t.Errorf("lookup node keys %v", keys(node))
	}
	if node["instance_info"].(map[string]any)["hashed_rescue_password"] != masked || node["driver_internal_info"].(map[string]any)["agent_secret_token"] != masked {
		t.Errorf("lookup shows secrets: %v", node)
	}
	if again := decode(t, do(t, h, "GET", "/v1/lookup?node_uuid="+uuid, latest, "")); again["config"].(map[string]any)["agent_token"] != masked {
		t.Errorf("second lookup shows the token: %v", again["config"])
	}
	wantFault(t, do(t, h, "GET", "/v1/lookup", latest, ""), 400, "One of 'addresses' and 'node_uuid' parameters is required")
	wantFault(t, do(t, h, "GET", lookup, "1.21", ""), 404, "Resource could not be found.")

	hb := `{"callback_url": "http://10.0.0.9:9999", "agent_token": "tok-` + uuid + `", "agent_version": "9.4.0", "agent_status": "start"}`
	if w := do(t, h, "POST", "/v1/heartbeat/"+uuid, latest, hb); w.Code != 202 || w.Body.Len() != 0 {
		t.Fatalf("heartbeat %d %s", w.Code, w.Body)
	}
	if be.lastHB.CallbackURL != "http://10.0.0.9:9999" || be.lastHB.AgentVersion != "9.4.0" || be.lastHB.AgentStatus != "start" {
		t.Errorf("heartbeat passed %+v", be.lastHB)
	}
	wantFault(t, do(t, h, "POST", "/v1/heartbeat/"+uuid, latest, `{"callback_url": "http://10.0.0.9:9999"}`), 400, "Agent token is required for heartbeat processing.")
	wantFault(t, do(t, h, "POST", "/v1/heartbeat/"+uuid, latest, `{"callback_url": "http://10.0.0.9:9999", "agent_token": "wrong"}`), 400, "Invalid or missing agent token received.")
	wantFault(t, do(t, h, "POST", "/v1/heartbeat/"+uuid, latest, `{"callback_url": "http://x", "agent_token": "t", "agent_status": "dancing"}`), 400,
		"Unknown agent status dancing; it must be one of start, end, error.")
	wantFault(t, do(t, h, "POST", "/v1/heartbeat/"+uuid, "1.71", hb), 400, "Field agent_status is not allowed in version 1.71.")
}

func TestServiceUnavailableWhenBusy(t *testing.T) {
	be := newFakeBackend()
	h := NewHandler(Config{Backend: be, MaxClients: 1})
	release, ok := h.limit.Acquire()
	if !ok {
		t.Fatal("no slot")
	}
	defer release()
	wantFault(t, do(t, h, "GET", "/v1/nodes", latest, ""), 503, "Too many concurrent requests, please retry.")
}

// The rescue password is hashed with the algorithm the API is configured
// with; one the hash cannot take is refused without reaching the backend
// and without being echoed.
func TestRescuePasswordHashAlgorithm(t *testing.T) {
	be := newFakeBackend()
	h := NewHandler(Config{Backend: be, RescueHash: cryptpw.SHA512})
	createNode(t, h, `{"driver": "fake-hardware", "name": "bm1"}`)
	for _, target := range []string{"manage", "provide", "active"} {
		if w := do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "`+target+`"}`); w.Code != http.StatusAccepted {
			t.Fatalf("%s: %d %s", target, w.Code, w.Body)
		}
	}
	long := strings.Repeat("p", cryptpw.MaxPasswordLen+1)
	w := do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "rescue", "rescue_password": "`+long+`"}`)
	if w.Code != http.StatusBadRequest || strings.Contains(w.Body.String(), long) || be.lastTarget == "rescue" {
		t.Fatalf("over-long password: %d %s (backend target %q)", w.Code, w.Body, be.lastTarget)
	}
	const clear = "Sha512-rescue"
	if w := do(t, h, "PUT", "/v1/nodes/bm1/states/provision", latest, `{"target": "rescue", "rescue_password": "`+clear+`"}`); w.Code != http.StatusAccepted {
		t.Fatalf("rescue: %d %s", w.Code, w.Body)
	}
	if hash := be.lastArgs.RescuePasswordHash; !strings.HasPrefix(hash, "$6$") || !cryptpw.Verify(hash, clear) {
		t.Fatalf("backend got %q, not a SHA-512 crypt hash of the password", hash)
	}
}
