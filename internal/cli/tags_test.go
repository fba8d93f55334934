package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// fakeTags keeps tags for the fake master: the tag opcodes change them with
// the master's rules and QueryTags reads them.
type fakeTags struct {
	f    *fakeMaster
	mu   sync.Mutex
	tags map[string][]string // "kind/name" -> sorted tags
}

// withTags makes f answer the tag opcodes and QueryTags, and adds the
// instance web1. Besides the fake's nodes and instances it knows the node
// group "default".
func withTags(f *fakeMaster) *fakeTags {
	ft := &fakeTags{f: f, tags: map[string][]string{}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outcome = ft.outcome
	f.instances["web1"] = map[string]any{"name": "web1"}
	f.handle["QueryTags"] = func(_ context.Context, args []any) (any, error) {
		kind, _ := argAt(args, 0).(string)
		name, _ := argAt(args, 1).(string)
		f.mu.Lock()
		err := ft.exists(kind, name)
		f.mu.Unlock()
		if err != nil {
			return nil, err
		}
		ft.mu.Lock()
		defer ft.mu.Unlock()
		return append([]string{}, ft.tags[kind+"/"+name]...), nil
	}
	return ft
}

// exists is called with f.mu held.
func (ft *fakeTags) exists(kind, name string) error {
	if err := opcodes.ValidateTagKind(kind); err != nil {
		return err
	}
	switch kind {
	case "instance":
		if _, ok := ft.f.instances[name]; !ok {
			return ecode.Errorf(ecode.NoEnt, "Instance '%s' not known", name)
		}
	case "node":
		if _, ok := ft.f.nodes[name]; !ok {
			return ecode.Errorf(ecode.NoEnt, "Node '%s' not known", name)
		}
	case "nodegroup":
		if name != "default" {
			return ecode.Errorf(ecode.NoEnt, "Node group '%s' not found", name)
		}
	}
	return nil
}

func (ft *fakeTags) outcome(op map[string]any) jobOutcome {
	id, _ := op["OP_ID"].(string)
	fail := func(err error) jobOutcome {
		e, _ := ecode.As(err)
		return jobOutcome{status: "error", result: encErr(e.Kind, e.Class, e.Msg)}
	}
	kind, _ := op["kind"].(string)
	name, _ := op["name"].(string)
	ft.mu.Lock()
	defer ft.mu.Unlock()
	switch id {
	case "OP_TAGS_SET", "OP_TAGS_DEL":
		if err := ft.exists(kind, name); err != nil {
			return fail(err)
		}
		key := kind + "/" + name
		cur := ft.tags[key]
		req := strs(op["tags"])
		for _, t := range req {
			if err := opcodes.ValidateTag(t); err != nil {
				return fail(err)
			}
		}
		if id == "OP_TAGS_DEL" {
			var missing []string
			for _, t := range req {
				if !slices.Contains(cur, t) {
					missing = append(missing, "'"+t+"'")
				}
			}
			if len(missing) > 0 {
				return fail(ecode.Errorf(ecode.NoEnt, "Tag(s) %s not found", strings.Join(missing, ", ")))
			}
			cur = slices.DeleteFunc(slices.Clone(cur), func(t string) bool { return slices.Contains(req, t) })
		} else {
			cur = append(slices.Clone(cur), req...)
		}
		if op["dry_run"] != true {
			slices.Sort(cur)
			ft.tags[key] = slices.Compact(cur)
		}
		return jobOutcome{status: "success"}
	case "OP_TAGS_SEARCH":
		pattern, _ := op["pattern"].(string)
		res := []any{}
		for key, tags := range ft.tags {
			kind, name, _ := strings.Cut(key, "/")
			path := map[string]string{"cluster": "/cluster", "instance": "/instances/" + name,
				"node": "/nodes/" + name, "nodegroup": "/nodegroup/" + name}[kind]
			for _, t := range tags {
				if strings.Contains(t, pattern) {
					res = append(res, []any{path, t})
				}
			}
		}
		return jobOutcome{status: "success", result: res}
	}
	return ft.f.defaultOutcome(op)
}

// TestTagScripts runs the tag scenarios in testdata/tags against a fake
// master that keeps tags (the shared scripts' master does not).
func TestTagScripts(t *testing.T) {
	runScripts(t, "testdata/tags", func(f *fakeMaster) { withTags(f) })
}

func TestTagOpcodesSent(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		want  string // the submitted opcode, as JSON
	}{
		{[]string{"instance", "add-tags", "web1", "a", "b"}, "",
			`{"OP_ID":"OP_TAGS_SET","kind":"instance","name":"web1","tags":["a","b"]}`},
		{[]string{"node", "remove-tags", "--priority", "high", "node1", "rack:1"}, "",
			`{"OP_ID":"OP_TAGS_DEL","kind":"node","name":"node1","tags":["rack:1"],"priority":-10}`},
		{[]string{"cluster", "add-tags", "--from", "-", "x"}, "y\n\n  z  \n",
			`{"OP_ID":"OP_TAGS_SET","kind":"cluster","tags":["x","y","z"]}`},
		{[]string{"cluster", "search-tags", "^env"}, "",
			`{"OP_ID":"OP_TAGS_SEARCH","pattern":"^env"}`},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			f := newFake(t)
			withTags(f)
			r := f.runEnv(t, func(e *Env) { e.Stdin = strings.NewReader(tc.stdin) }, tc.args...)
			if tc.args[1] == "remove-tags" {
				// The fake refuses removing an absent tag; only the opcode matters here.
				if r.code != 3 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
			} else if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			sub := f.submitted()
			if len(sub) != 1 {
				t.Fatalf("submitted %v", sub)
			}
			op := sub[0]
			delete(op, "reason")
			if !sameJSON(t, op, tc.want) {
				t.Errorf("opcode %v\nwant %s", op, tc.want)
			}
		})
	}
}

func TestTagUsageErrors(t *testing.T) {
	f := newFake(t)
	withTags(f)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"instance", "add-tags"}, ExitUsage, "expected the instance name and tags"},
		{[]string{"instance", "add-tags", "web1"}, 2, "No tags to be added"},
		{[]string{"cluster", "remove-tags"}, 2, "No tags to be removed"},
		{[]string{"instance", "list-tags"}, ExitUsage, "expected the instance name"},
		{[]string{"cluster", "list-tags", "extra"}, ExitUsage, "unexpected argument"},
		{[]string{"cluster", "search-tags"}, ExitUsage, "expected a pattern"},
		{[]string{"node", "add-tags", "--from", "/nonexistent/tags", "node1"}, 7, "Can't read tags from /nonexistent/tags"},
	} {
		r := f.run(t, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, r.code, r.stderr, tc.code, tc.msg)
		}
	}
	if sub := f.submitted(); len(sub) != 0 {
		t.Fatalf("refused commands submitted jobs: %v", sub)
	}
}

func TestTagSubmit(t *testing.T) {
	f := newFake(t)
	ft := withTags(f)
	r := f.run(t, "cluster", "add-tags", "--submit", "k")
	if r.code != 0 || r.stdout != "JobID: 1\n" {
		t.Fatalf("exit %d, stdout %q", r.code, r.stdout)
	}
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if got := fmt.Sprint(ft.tags["cluster/"]); got != "[k]" {
		t.Fatalf("cluster tags %s", got)
	}
}

// FuzzReadTags checks the --from reader: every tag it returns is a trimmed,
// non-empty line of the input, in order.
func FuzzReadTags(f *testing.F) {
	for _, s := range []string{"", "a\nb\n", "  x  \n\n\ty\r\n", "no-newline", "\n\n\n", "a b\nc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		a := &app{env: &Env{Stdin: strings.NewReader(in)}}
		tags, err := a.readTags("-")
		if err != nil {
			// Only lines longer than the scanner's buffer fail.
			return
		}
		var want []string
		for _, l := range strings.Split(in, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				want = append(want, l)
			}
		}
		if !slices.Equal(tags, want) {
			t.Fatalf("readTags(%q) = %q, want %q", in, tags, want)
		}
	})
}
