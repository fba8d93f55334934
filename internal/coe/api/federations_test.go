package api

import (
	"net/http"
	"reflect"
	"testing"
)

// TestFederations walks Magnum's federation requests: create (202 uuid,
// Magnum's refusals), list with its fields, detail and show, join and
// unjoin as the client patches them, a property change, a change Magnum
// refuses, another project's view, and the delete.
func TestFederations(t *testing.T) {
	a := newAPITest(t)
	a.template()
	host, m1, m2 := a.cluster("host"), a.cluster("m1"), a.cluster("m2")

	a.wantError(a.do("POST", "/v1/federations", `{"name": "f1", "properties": {"dns-zone": "example.com."}}`),
		http.StatusBadRequest, "No hostcluster specified. Please specify a hostcluster_id.")
	a.wantError(a.do("POST", "/v1/federations", `{"name": "f1", "hostcluster_id": "host"}`),
		http.StatusBadRequest, "Please specify a `properties` dict for the federation.")
	a.wantError(a.do("POST", "/v1/federations", `{"name": "f1", "hostcluster_id": "host", "properties": {"x": "y"}}`),
		http.StatusBadRequest, "No DNS zone specified. Please specify a `dns-zone`.")
	a.wantError(a.do("POST", "/v1/federations", `{"name": "f1", "hostcluster_id": "nope", "properties": {"dns-zone": "z."}}`),
		http.StatusNotFound, "Cluster nope could not be found.")
	a.wantError(a.do("POST", "/v1/federations", `{"name": "1bad", "hostcluster_id": "host", "properties": {"dns-zone": "z."}}`),
		http.StatusBadRequest, "Invalid input for field/attribute name.")
	a.wantError(a.do("POST", "/v1/federations", `{"name": "f1", "hostcluster_id": "host", "properties": {"dns-zone": "z."}, "color": "red"}`),
		http.StatusBadRequest, "Unknown attribute for argument body: color")

	r := a.want(a.do("POST", "/v1/federations", `{"name": "f1", "hostcluster_id": "host", "member_ids": ["m1"],
		"properties": {"dns-zone": "example.com."}}`), http.StatusAccepted)
	fed, _ := r.body["uuid"].(string)
	if len(r.body) != 1 || !isUUID(fed) {
		t.Fatalf("create reply %s: want only the uuid", r.raw)
	}

	r = a.want(a.do("GET", "/v1/federations", ""), http.StatusOK)
	list := r.body["federations"].([]any)
	if len(list) != 1 {
		t.Fatalf("list: %s", r.raw)
	}
	got := list[0].(map[string]any)
	if got["uuid"] != fed || got["name"] != "f1" || got["hostcluster_id"] != host || got["status"] != "CREATE_COMPLETE" ||
		!reflect.DeepEqual(got["member_ids"], []any{m1}) || !reflect.DeepEqual(got["properties"], map[string]any{"dns-zone": "example.com."}) ||
		got["links"] == nil || got["created_at"] != nil || got["status_reason"] != nil {
		t.Fatalf("list entry: %v", got)
	}
	for _, path := range []string{"/v1/federations/detail", "/v1/federations/f1", "/v1/federations/" + fed} {
		r = a.want(a.do("GET", path, ""), http.StatusOK)
		doc := r.body
		if path == "/v1/federations/detail" {
			doc = r.body["federations"].([]any)[0].(map[string]any)
		}
		if doc["created_at"] == nil || doc["project_id"] != "p1" || doc["status_reason"] != "CREATE completed successfully" {
			t.Fatalf("%s: %v", path, doc)
		}
	}

	// Join, as the client sends it: an add of one cluster.
	a.want(a.do("PATCH", "/v1/federations/f1", `[{"op": "add", "path": "/member_ids", "value": "m2"}]`), http.StatusAccepted)
	if got := a.federation("f1")["member_ids"]; !reflect.DeepEqual(got, []any{m1, m2}) {
		t.Fatalf("members after the join: %v", got)
	}
	a.wantError(a.do("PATCH", "/v1/federations/f1", `[{"op": "add", "path": "/member_ids", "value": "`+m2+`"}]`),
		http.StatusConflict, "A cluster with UUID "+m2+" is already a member of the federation f1.")
	a.wantError(a.do("PATCH", "/v1/federations/f1", `[{"op": "add", "path": "/member_ids", "value": "nope"}]`),
		http.StatusNotFound, "Cluster nope could not be found.")
	// Unjoin: a remove naming the cluster.
	a.want(a.do("PATCH", "/v1/federations/"+fed, `[{"op": "remove", "path": "/member_ids", "value": "`+m1+`"}]`), http.StatusAccepted)
	if got := a.federation("f1")["member_ids"]; !reflect.DeepEqual(got, []any{m2}) {
		t.Fatalf("members after the unjoin: %v", got)
	}
	a.wantError(a.do("PATCH", "/v1/federations/f1", `[{"op": "remove", "path": "/member_ids", "value": "`+m1+`"}]`),
		http.StatusNotFound, "Cluster "+m1+" is not a member of the federation f1.")
	if last := a.be.lastCall(); last != `federation-update ["`+fed+`",{"member_ids":["`+m2+`"]}]` {
		t.Fatalf("the unjoin reached the backend as %s", last)
	}

	a.want(a.do("PATCH", "/v1/federations/f1", `[{"op": "replace", "path": "/properties/dns-zone", "value": "other.org."}]`), http.StatusAccepted)
	if got := a.federation("f1"); !reflect.DeepEqual(got["properties"], map[string]any{"dns-zone": "other.org."}) || got["status"] != "UPDATE_COMPLETE" {
		t.Fatalf("after the property change: %v", got)
	}
	a.wantError(a.do("PATCH", "/v1/federations/f1", `[{"op": "remove", "path": "/properties/dns-zone"}]`),
		http.StatusBadRequest, "No DNS zone specified.")
	a.wantError(a.do("PATCH", "/v1/federations/f1", `[{"op": "replace", "path": "/hostcluster_id", "value": "`+m1+`"}]`),
		http.StatusBadRequest, "cannot change federation property(ies) hostcluster_id.")

	// Another project sees nothing of it.
	other := []string{"X-Test-Project", "p2", "X-Test-Admin", ""}
	r = a.want(a.do("GET", "/v1/federations", "", other...), http.StatusOK)
	if len(r.body["federations"].([]any)) != 0 {
		t.Fatalf("another project's list: %s", r.raw)
	}
	a.wantError(a.do("GET", "/v1/federations/f1", "", other...), http.StatusNotFound, "Federation f1 could not be found.")
	a.wantError(a.do("DELETE", "/v1/federations/f1", "", other...), http.StatusNotFound, "Federation f1 could not be found.")

	if r := a.do("DELETE", "/v1/federations/f1", ""); r.code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.code, r.raw)
	}
	a.wantError(a.do("GET", "/v1/federations/"+fed, ""), http.StatusNotFound, "Federation "+fed+" could not be found.")
}

func (a *apiTest) federation(ident string) map[string]any {
	a.t.Helper()
	return a.want(a.do("GET", "/v1/federations/"+ident, ""), http.StatusOK).body
}
