package rapi

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// samplesDir holds responses recorded from a Ganeti 3.0.2 cluster: the
// request, status, headers and body of each.
const samplesDir = "testdata/ganeti-3.0.2"

// notImplemented are sample paths whose feature Corral lacks; they must
// answer 501 with the error body instead.
var notImplemented = map[string]bool{}

type sample struct {
	Request struct {
		Auth   bool   `json:"auth"`
		Body   any    `json:"body"`
		Method string `json:"method"`
		Path   string `json:"path"`
	} `json:"request"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Body    any               `json:"body"`
}

var sampleNames = strings.NewReplacer("sample-diskless.ganeti.test", "web1", "nope.ganeti.test", "nope",
	"vm.ganeti.test", "node1")

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// sameShape compares keys and JSON types down to depth levels of dicts
// (list elements do not count as a level, so bulk lists compare like items). A null on
// Corral's side stands for unavailable data, which Ganeti also answers
// with null, so it matches any type.
func sameShape(path string, want, got any, depth int) []string {
	if got == nil && want != nil && path != "" {
		return nil
	}
	if jsonKind(want) != jsonKind(got) {
		return []string{fmt.Sprintf("%s: %s, want %s", path, jsonKind(got), jsonKind(want))}
	}
	if depth == 0 {
		return nil
	}
	var diffs []string
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: missing", path, k))
				continue
			}
			diffs = append(diffs, sameShape(path+"."+k, wv, gv, depth-1)...)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: extra key", path, k))
			}
		}
	case []any:
		g := got.([]any)
		if len(w) > 0 && len(g) > 0 {
			diffs = append(diffs, sameShape(path+"[0]", w[0], g[0], depth)...)
		}
	}
	sort.Strings(diffs)
	return diffs
}

var jobPath = regexp.MustCompile(`^/2/jobs/\d+`)

func TestSampleShapes(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(samplesDir, "*.json"))
	if len(files) < 20 {
		t.Fatalf("recorded samples missing from %s: %v", samplesDir, files)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var s sample
		if err := json.Unmarshal(data, &s); err != nil || s.Request.Method == "" {
			continue // not a request/response record
		}
		t.Run(filepath.Base(file), func(t *testing.T) {
			path := jobPath.ReplaceAllString(sampleNames.Replace(s.Request.Path), "/2/jobs/7")
			var body string
			if s.Request.Body != nil {
				b, _ := json.Marshal(s.Request.Body)
				body = string(b)
			}
			var as *creds
			if s.Request.Auth {
				as = asAdmin
			}
			be := newFakeBackend()
			if s.Request.Method == "GET" && strings.HasSuffix(path, "/wait") {
				body = `{"fields":["status"],"previous_job_info":null,"previous_log_serial":null}`
			}
			base, _, _ := strings.Cut(path, "?")
			if setup := sampleSetup[base]; setup != nil {
				setup(be)
			}
			rec := do(t, newTestHandler(t, be, !s.Request.Auth), s.Request.Method, path, body, as)
			got := decode(t, rec)
			if notImplemented[base] {
				if rec.Code != 501 {
					t.Fatalf("status %d, want 501 for a missing feature", rec.Code)
				}
				return
			}
			if rec.Code != s.Status {
				t.Fatalf("status %d, want %d: %s", rec.Code, s.Status, rec.Body)
			}
			if want := s.Headers["WWW-Authenticate"]; want != rec.Header().Get("WWW-Authenticate") {
				t.Errorf("WWW-Authenticate %q, want %q", rec.Header().Get("WWW-Authenticate"), want)
			}
			// Parameter dicts inside (beparams, ndparams) hold corrald's
			// values, not the handler's, so one level is compared.
			depth := 1
			if base == "/2/info" {
				// The fake's values are placeholders; keys are what count here.
				for k := range got.(map[string]any) {
					got.(map[string]any)[k] = s.Body.(map[string]any)[k]
				}
			}
			for _, d := range sameShape("", s.Body, got, depth) {
				t.Error(d)
			}
		})
	}
}
