package cmdlib

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func tagOp(id, kind, name string, tags ...string) map[string]any {
	op := map[string]any{"OP_ID": id, "kind": kind}
	if name != "" {
		op["name"] = name
	}
	if id == "OP_TAGS_SET" || id == "OP_TAGS_DEL" {
		l := []any{}
		for _, t := range tags {
			l = append(l, t)
		}
		op["tags"] = l
	}
	return op
}

// objTags reads an object's tags and serial number from the configuration.
func objTags(t *testing.T, e *env, kind, name string) ([]string, int64) {
	t.Helper()
	switch kind {
	case "cluster":
		c := e.cfg.Cluster()
		return c.Tags, c.Serial
	case "instance":
		i, ok := e.cfg.Instance(name)
		if !ok {
			t.Fatalf("no instance %s", name)
		}
		return i.Tags, i.Serial
	case "node":
		n, ok := e.cfg.Node(name)
		if !ok {
			t.Fatalf("no node %s", name)
		}
		return n.Tags, n.Serial
	case "nodegroup":
		g, ok := e.cfg.Group(name)
		if !ok {
			t.Fatalf("no group %s", name)
		}
		return g.Tags, g.Serial
	}
	t.Fatalf("kind %s", kind)
	return nil, 0
}

func TestTagsSetGetDel(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("web1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	for _, c := range []struct{ kind, name string }{{"cluster", ""}, {"instance", "web1"}, {"node", "n1"}, {"nodegroup", "default"}} {
		_, serial := objTags(t, e, c.kind, c.name)
		if st, res := e.run(t, tagOp("OP_TAGS_SET", c.kind, c.name, "role:web", "env:prod", "role:web")); st != "success" {
			t.Fatalf("%s set: %s %v", c.kind, st, res)
		}
		tags, s2 := objTags(t, e, c.kind, c.name)
		if !slices.Equal(tags, []string{"env:prod", "role:web"}) || s2 != serial+1 {
			t.Fatalf("%s after set: tags %v serial %d (was %d)", c.kind, tags, s2, serial)
		}
		st, res := e.run(t, tagOp("OP_TAGS_GET", c.kind, c.name))
		if b, _ := json.Marshal(res); st != "success" || string(b) != `[["env:prod","role:web"]]` {
			t.Fatalf("%s get: %s %s", c.kind, st, b)
		}
		if st, res := e.run(t, map[string]any{"OP_ID": "OP_TAGS_GET", "kind": c.kind, "name": c.name, "use_locking": true}); st != "success" || len(res) != 1 {
			t.Fatalf("%s locked get: %s %v", c.kind, st, res)
		}
		if st, res := e.run(t, tagOp("OP_TAGS_DEL", c.kind, c.name, "env:prod")); st != "success" {
			t.Fatalf("%s del: %s %v", c.kind, st, res)
		}
		if tags, s3 := objTags(t, e, c.kind, c.name); !slices.Equal(tags, []string{"role:web"}) || s3 != s2+1 {
			t.Fatalf("%s after del: %v serial %d", c.kind, tags, s3)
		}
	}
}

func TestTagsRefusalsChangeNothing(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, create("web1", nil)); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	if st, res := e.run(t, tagOp("OP_TAGS_SET", "instance", "web1", "keep")); st != "success" {
		t.Fatalf("set: %s %v", st, res)
	}
	many := make([]string, 4096)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	cases := []struct {
		op    map[string]any
		class ecode.Class
		msg   string
	}{
		{tagOp("OP_TAGS_SET", "instance", "web1", "ok", "bad tag"), ecode.Inval, "Tag contains invalid characters"},
		{tagOp("OP_TAGS_SET", "instance", "web1", strings.Repeat("x", 129)), ecode.Inval, "Tag too long ("},
		{tagOp("OP_TAGS_SET", "instance", "web1", ""), ecode.Inval, "Tags cannot be empty"},
		{tagOp("OP_TAGS_SET", "instance", "web1", many...), ecode.Inval, "Too many tags"},
		{tagOp("OP_TAGS_DEL", "instance", "web1", "keep", "nope", "also"), ecode.NoEnt, "Tag(s) 'also', 'nope' not found"},
		{tagOp("OP_TAGS_SET", "instance", "ghost", "a"), ecode.NoEnt, "Instance 'ghost' not known"},
		{tagOp("OP_TAGS_SET", "node", "ghost", "a"), ecode.NoEnt, "Node 'ghost' not known"},
		{tagOp("OP_TAGS_SET", "nodegroup", "ghost", "a"), ecode.NoEnt, "Node group 'ghost' not found"},
		{tagOp("OP_TAGS_SET", "network", "net1", "a"), ecode.NoEnt, "Network 'net1' not found"},
		{tagOp("OP_TAGS_SET", "volume", "v", "a"), ecode.Inval, "Wrong tag type requested (volume)"},
		{tagOp("OP_TAGS_SET", "instance", "", "a"), ecode.Inval, "needs an object name"},
		{tagOp("OP_TAGS_GET", "instance", "ghost"), ecode.NoEnt, "not known"},
		{map[string]any{"OP_ID": "OP_TAGS_SEARCH", "pattern": "(["}, ecode.Inval, "Invalid search pattern '(['"},
	}
	serial := e.cfg.Serial()
	for _, c := range cases {
		st, res := e.run(t, c.op)
		b, _ := json.Marshal(res)
		if st != "error" || !strings.Contains(string(b), string(c.class)) || !strings.Contains(string(b), c.msg) {
			t.Errorf("%v: got %s %.300s, want error %s containing %q", c.op["tags"], st, b, c.class, c.msg)
		}
	}
	// A dry run checks and changes nothing.
	op := tagOp("OP_TAGS_SET", "instance", "web1", "new")
	op["dry_run"] = true
	if st, res := e.run(t, op); st != "success" {
		t.Fatalf("dry run: %s %v", st, res)
	}
	if e.cfg.Serial() != serial {
		t.Fatal("a refused or dry-run tag operation changed the configuration")
	}
	if tags, _ := objTags(t, e, "instance", "web1"); !slices.Equal(tags, []string{"keep"}) {
		t.Fatalf("tags changed: %v", tags)
	}
}

func TestTagsSearch(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	for _, name := range []string{"web2", "web1"} {
		if st, res := e.run(t, create(name, nil)); st != "success" {
			t.Fatalf("create: %s %v", st, res)
		}
	}
	for _, op := range []map[string]any{
		tagOp("OP_TAGS_SET", "cluster", "", "site:ams", "owner"),
		tagOp("OP_TAGS_SET", "instance", "web2", "site:fra"),
		tagOp("OP_TAGS_SET", "instance", "web1", "site:ams", "x"),
		tagOp("OP_TAGS_SET", "node", "n1", "rack:4"),
		tagOp("OP_TAGS_SET", "nodegroup", "default", "site:any"),
	} {
		if st, res := e.run(t, op); st != "success" {
			t.Fatalf("%v: %s %v", op, st, res)
		}
	}
	st, res := e.run(t, map[string]any{"OP_ID": "OP_TAGS_SEARCH", "pattern": "^site:"})
	b, _ := json.Marshal(res)
	want := `[[["/cluster","site:ams"],["/instances/web1","site:ams"],["/instances/web2","site:fra"],["/nodegroup/default","site:any"]]]`
	if st != "success" || string(b) != want {
		t.Fatalf("search: %s %s\nwant %s", st, b, want)
	}
	st, res = e.run(t, map[string]any{"OP_ID": "OP_TAGS_SEARCH", "pattern": "nomatch"})
	if b, _ := json.Marshal(res); st != "success" || string(b) != `[[]]` {
		t.Fatalf("empty search: %s %s", st, b)
	}
}
