package coe

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func (e *env) federationOp(id string, params map[string]any) string {
	e.t.Helper()
	op := map[string]any{"OP_ID": id, "project_id": "p1"}
	for k, v := range params {
		op[k] = v
	}
	return e.run(op)
}

// TestFederationRules checks what corrald holds a federation to: the host
// and members are clusters of its project, members complete and each
// once, a dns-zone, only members and properties change; the statuses
// are Magnum's.
func TestFederationRules(t *testing.T) {
	e := newEnv(t)
	e.template("t1")
	for _, k := range []string{"host", "m1", "m2"} {
		if err := e.createCluster(k, 0); err != "" {
			t.Fatal(err)
		}
	}
	e.drv.Fail("EtcdReady", errors.New("etcd would not start"))
	_ = e.createCluster("broken", 0)
	e.drv.Fail("EtcdReady", nil)
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": "theirs", "cluster_template": "t1",
		"node_count": float64(0), "project_id": ""}); err != "" {
		t.Fatal(err)
	}
	zone := map[string]any{"dns-zone": "example.com."}
	create := func(members ...string) string {
		return e.federationOp("OP_COE_FEDERATION_CREATE", map[string]any{"name": "f1", "hostcluster_id": "host",
			"member_ids": members, "properties": zone})
	}
	for _, c := range []struct {
		members []string
		err     string
	}{
		{[]string{"broken"}, "is in CREATE_FAILED: only a cluster in CREATE_COMPLETE or UPDATE_COMPLETE joins a federation."},
		{[]string{"theirs"}, "Cluster theirs could not be found."}, // of no project, not p1's
		{[]string{"m1", e.cluster("m1").UUID}, "is already a member of the federation f1."},
	} {
		if err := create(c.members...); !strings.Contains(err, c.err) {
			t.Fatalf("create with %v: %s, want %q", c.members, err, c.err)
		}
	}
	if err := e.federationOp("OP_COE_FEDERATION_CREATE", map[string]any{"name": "f1", "hostcluster_id": "host",
		"properties": map[string]any{"zone": "x"}}); !strings.Contains(err, "No DNS zone specified.") {
		t.Fatalf("create without a dns-zone: %s", err)
	}
	if _, ok := e.cfg.COEFederation("f1"); ok {
		t.Fatal("a refused federation was stored")
	}

	if err := create("m1"); err != "" {
		t.Fatal(err)
	}
	f, _ := e.cfg.COEFederation("f1")
	if f.Status != "CREATE_COMPLETE" || f.StatusReason != "CREATE completed successfully" || f.HostCluster != e.cluster("host").UUID ||
		!slices.Equal(f.Members, []string{e.cluster("m1").UUID}) || f.ProjectID != "p1" || f.Properties["dns-zone"] != "example.com." {
		t.Fatalf("federation %+v", f)
	}
	if err := create("m2"); !strings.Contains(err, "A federation with name f1 already exists.") {
		t.Fatalf("second f1: %s", err)
	}

	modify := func(changes map[string]any) string {
		return e.federationOp("OP_COE_FEDERATION_MODIFY", map[string]any{"federation": "f1", "changes": changes})
	}
	if err := modify(map[string]any{"member_ids": []any{"m2"}, "properties": map[string]any{"dns-zone": "other.org."}}); err != "" {
		t.Fatal(err)
	}
	f, _ = e.cfg.COEFederation("f1")
	if f.Status != "UPDATE_COMPLETE" || !slices.Equal(f.Members, []string{e.cluster("m2").UUID}) || f.Properties["dns-zone"] != "other.org." {
		t.Fatalf("federation after the update %+v", f)
	}
	if err := modify(map[string]any{"hostcluster_id": "m1"}); !strings.Contains(err, "cannot change federation property(ies) hostcluster_id.") {
		t.Fatalf("host change: %s", err)
	}
	if err := modify(map[string]any{"member_ids": []any{"m2", "broken"}}); !strings.Contains(err, "is in CREATE_FAILED") {
		t.Fatalf("join of a failed cluster: %s", err)
	}
	// A member's delete takes it out of the federation.
	if err := modify(map[string]any{"member_ids": []any{"m1", "m2"}}); err != "" {
		t.Fatal(err)
	}
	m1 := e.cluster("m1").UUID
	if err := e.run(map[string]any{"OP_ID": "OP_COE_CLUSTER_REMOVE", "cluster": "m2", "project_id": "p1"}); err != "" {
		t.Fatal(err)
	}
	if f, _ = e.cfg.COEFederation("f1"); !slices.Equal(f.Members, []string{m1}) {
		t.Fatalf("members after m2's delete: %v", f.Members)
	}
	if err := e.run(map[string]any{"OP_ID": "OP_COE_FEDERATION_REMOVE", "federation": "f1", "project_id": "p2"}); !strings.Contains(err, "Federation f1 could not be found.") {
		t.Fatalf("another project's remove: %s", err)
	}
	if err := e.federationOp("OP_COE_FEDERATION_REMOVE", map[string]any{"federation": "f1"}); err != "" {
		t.Fatal(err)
	}
	if _, ok := e.cfg.COEFederation("f1"); ok {
		t.Fatal("the federation is still there")
	}
}
