package move

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// checklistText renders a checklist for comparisons.
func checklistText(t *testing.T, cl Checklist) string {
	t.Helper()
	var b bytes.Buffer
	if err := cl.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// wantLines checks that every line prefix appears, in order.
func wantLines(t *testing.T, text string, prefixes ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) != len(prefixes) {
		t.Fatalf("checklist has %d lines, want %d:\n%s", len(lines), len(prefixes), text)
	}
	for i, p := range prefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("line %d: %q, want it to start with %q", i, lines[i], p)
		}
	}
}

func TestPreflightOK(t *testing.T) {
	p := newPair(t)
	cl := p.m.Preflight(context.Background(), []Request{{Instance: "web1", Overrides: Overrides{DestName: "web9"}}})
	text := checklistText(t, cl)
	if cl.Failed() {
		t.Errorf("Failed() on:\n%s", text)
	}
	wantLines(t, text,
		"ok       source cluster "+p.src.srv.URL+" answers (RAPI version 2)",
		"ok       destination cluster "+p.dst.srv.URL+" answers (RAPI version 2)",
		`ok       source credentials allow changes: user "admin" has write access`,
		`ok       destination credentials allow changes: user "admin" has write access`,
		"ok       instance web1 exists on the source: disk template file, 2 disk(s), 1 NIC(s), state up",
		"ok       source prepares the export of web1: handshake signed (dry run: no transfer certificate made)",
		`ok       destination accepts web1 as web9 (dry run): domain secret shared, name free, room found, nodes ["dn1"]`,
	)
	create, ok := p.dst.request("POST", "/2/instances")
	if !ok || create.Query != "dry-run=1" {
		t.Fatalf("destination creation %+v, want a dry run", create)
	}
	if b := create.Body.(map[string]any); b["mode"] != "remote-import" || b["name"] != "web9" || b["source_handshake"] == nil || b["source_x509_ca"] != srcCert {
		t.Errorf("dry-run body %v", b)
	}
	for _, r := range p.src.requests() {
		if strings.Contains(r, "/export") && !strings.Contains(r, "prepare-export") {
			t.Errorf("a preflight moved data: %s", r)
		}
	}
	if prep, ok := p.src.request("PUT", "/2/instances/web1/prepare-export"); !ok || !strings.Contains(prep.Query, "dry-run=1") {
		t.Errorf("prepare-export %+v, want a dry run (no transfer certificate)", prep)
	}
	if tags, _ := p.src.request("PUT", "/2/tags"); tags.Query != "dry-run=1" {
		t.Errorf("write check %+v, want a dry run", tags)
	}
}

func TestPreflightWrongPassword(t *testing.T) {
	p := newPair(t)
	p.m.Src = p.src.cluster(t, "admin", "wrong")
	cl := p.m.Preflight(context.Background(), []Request{{Instance: "web1"}})
	text := checklistText(t, cl)
	if !cl.Failed() {
		t.Errorf("Failed() false on:\n%s", text)
	}
	wantLines(t, text,
		`FAILED   source cluster `+p.src.srv.URL+` answers (RAPI version 2): source cluster: authentication failed for user "admin" at `+p.src.srv.URL,
		"ok       destination cluster",
		"skipped  source credentials allow changes: an earlier check failed",
		"ok       destination credentials allow changes",
		"skipped  instance web1 exists on the source",
		"skipped  source prepares the export of web1",
		"skipped  destination accepts web1 as web1 (dry run)",
	)
	if _, ok := p.dst.request("POST", "/2/instances"); ok {
		t.Error("the destination got a creation request")
	}
}

func TestPreflightReadOnlyUser(t *testing.T) {
	p := newPair(t)
	p.dst.users["viewer"] = "look"
	p.dst.readers["viewer"] = true
	p.m.Dest = p.dst.cluster(t, "viewer", "look")
	text := checklistText(t, p.m.Preflight(context.Background(), []Request{{Instance: "web1"}}))
	if !strings.Contains(text, `FAILED   destination credentials allow changes: destination cluster: user "viewer" may not change anything`) ||
		!strings.Contains(text, "skipped  destination accepts web1") {
		t.Errorf("checklist:\n%s", text)
	}
}

func TestPreflightHandshakeRefused(t *testing.T) {
	p := newPair(t)
	p.dstJobs["POST /2/instances?dry-run=1"] = func() *fakeJob {
		return failJob("OpPrereqError", "Invalid handshake: Clusters don't share the same domain secret", "wrong_input")
	}
	cl := p.m.Preflight(context.Background(), []Request{{Instance: "web1"}})
	text := checklistText(t, cl)
	if !cl.Failed() {
		t.Errorf("Failed() false on:\n%s", text)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"FAILED   destination accepts web1 as web1 (dry run): destination cluster: job ",
		"Clusters don't share the same domain secret", "must share the cluster domain secret"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q lacks %q", last, want)
		}
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "ok ") {
			t.Errorf("line %q, want ok", l)
		}
	}
}

func TestPreflightUnknownInstance(t *testing.T) {
	p := newPair(t)
	text := checklistText(t, p.m.Preflight(context.Background(), []Request{{Instance: "web1"}, {Instance: "nope"}}))
	if !strings.Contains(text, "FAILED   instance nope exists on the source: source cluster: instance nope not found") ||
		!strings.Contains(text, "ok       destination accepts web1") || !strings.Contains(text, "skipped  destination accepts nope") {
		t.Errorf("checklist:\n%s", text)
	}
}
