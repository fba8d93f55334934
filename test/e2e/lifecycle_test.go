package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// diskPath finds an instance disk file in a node's storage directory.
func (c *cluster) diskFiles(node, instUUID string) []string {
	files, _ := filepath.Glob(filepath.Join(c.dir, node, "storage", "file", instUUID, "*"))
	var out []string
	for _, f := range files {
		if !strings.HasPrefix(filepath.Base(f), ".") {
			out = append(out, f)
		}
	}
	return out
}

func (c *cluster) instanceField(name, field string) any {
	c.t.Helper()
	rows, err := c.luxi.QueryInstances(context.Background(), []string{name}, []string{field}, false)
	if err != nil {
		c.t.Fatalf("query %s.%s: %v", name, field, err)
	}
	return rows[0][0]
}

func createOp(name, node string, sizeMiB int) map[string]any {
	op := map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "disk_template": "file",
		"disks": []any{map[string]any{"size": sizeMiB}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "fake", "beparams": map[string]any{"memory": 256},
	}
	if node != "" {
		op["pnode"] = node
	}
	return op
}

func TestInstanceLifecycleFake(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 2, hypervisors: []string{"fake"}})
	ctx := context.Background()

	rows, err := c.luxi.QueryNodes(ctx, nil, []string{"name", "role", "pip", "mtotal", "offline"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("want 3 nodes, got %v", rows)
	}
	if rows[0][1] != "M" || rows[0][3] == nil {
		t.Fatalf("master row %v: want role M and live memory", rows[0])
	}

	// Create on node2 with a 64 MiB file disk and the tiny OS.
	id, status, res := c.submit(createOp("web1", "node2", 64))
	if status != "success" {
		t.Fatalf("create job %d: %s %v", id, status, res)
	}
	if got := res[0].([]any); len(got) != 1 || got[0] != "node2" {
		t.Fatalf("create result %v, want [node2]", res)
	}
	uuid := c.instanceField("web1", "uuid").(string)
	files := c.diskFiles("node2", uuid)
	if len(files) != 1 {
		t.Fatalf("want one disk file for %s on node2, got %v", uuid, files)
	}
	st, err := os.Stat(files[0])
	if err != nil || st.Size() != 64<<20 {
		t.Fatalf("disk %s: %v size %d, want 64 MiB", files[0], err, st.Size())
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("disk %s mode %v: readable by others", files[0], st.Mode())
	}
	// The OS create script wrote an ext2 filesystem: magic 0xEF53 at 1080.
	f, _ := os.Open(files[0])
	var magic [2]byte
	_, _ = f.ReadAt(magic[:], 1080)
	f.Close()
	if binary.LittleEndian.Uint16(magic[:]) != 0xEF53 {
		t.Fatalf("disk has no ext2 filesystem written by the OS create script (magic %x)", magic)
	}
	// The job log tells what happened.
	logs, err := c.luxi.QueryJobs(ctx, []int64{id}, []string{"oplog", "summary"})
	if err != nil {
		t.Fatal(err)
	}
	if lb := strings.ToLower(toJSON(logs)); !strings.Contains(lb, "creating disk 0") || !strings.Contains(lb, "instance_create(web1)") {
		t.Fatalf("job log lacks the expected entries: %s", lb)
	}
	if s := c.instanceField("web1", "status"); s != "running" {
		t.Fatalf("status %v, want running", s)
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"})
	if s := c.instanceField("web1", "status"); s != "ADMIN_down" {
		t.Fatalf("after shutdown: %v", s)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REINSTALL", "instance_name": "web1"})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_RENAME", "instance_name": "web1", "new_name": "web2"})
	if c.instanceField("web2", "uuid") != uuid {
		t.Fatal("rename lost the instance")
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web2"})
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REBOOT", "instance_name": "web2", "reboot_type": "hard"})
	if s := c.instanceField("web2", "status"); s != "running" {
		t.Fatalf("after reboot: %v", s)
	}
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": "web2", "beparams": map[string]any{"vcpus": 2}})
	if v := c.instanceField("web2", "be/vcpus"); v != float64(2) {
		t.Fatalf("vcpus after modify: %v", v)
	}

	// An allocator-placed instance lands on some node with room.
	c.mustSucceed(createOp("auto1", "", 32))
	if pn := c.instanceField("auto1", "pnode"); pn == nil || pn == "" {
		t.Fatal("allocator did not place auto1")
	}

	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "web2"})
	if files := c.diskFiles("node2", uuid); len(files) != 0 {
		t.Fatalf("disk files left after remove: %v", files)
	}
	if rows, _ := c.luxi.QueryInstances(ctx, nil, []string{"name"}, false); len(rows) != 1 {
		t.Fatalf("instances after remove: %v", rows)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	ctx := context.Background()
	c.mustSucceed(createOp("db1", "node1", 16))
	before := configSerials(t, c)

	// Unknown opcode: refused at submission with a classified error.
	if _, err := c.luxi.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_NO_SUCH"}}); err == nil || !strings.Contains(err.Error(), "OP_NO_SUCH") {
		t.Fatalf("unknown opcode: %v", err)
	}
	// Unknown parameter, wrong type, name clash, offline node, too large.
	c.mustFail("wrong_input", map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "db1", "bogus": 1})
	c.mustFail("wrong_input", map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": "soon"})
	c.mustFail("already_exists", createOp("db1", "node2", 16))
	c.mustFail("unknown_entity", map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "nope"})
	c.mustFail("insufficient_resources", createOp("huge", "node2", 64<<30))
	c.mustSucceed(map[string]any{"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "offline": true})
	c.mustFail("wrong_state", createOp("off1", "node2", 16))

	after := configSerials(t, c)
	delete(after, "node/node2") // the one intended change
	delete(before, "node/node2")
	if toJSON(before) != toJSON(after) {
		t.Fatalf("configuration changed by failed jobs:\nbefore %v\nafter  %v", before, after)
	}
	if rows, _ := c.luxi.QueryInstances(ctx, nil, []string{"name"}, false); len(rows) != 1 {
		t.Fatalf("failed creates left instances: %v", rows)
	}
}

// configSerials maps every object to its serial number.
func configSerials(t *testing.T, c *cluster) map[string]any {
	t.Helper()
	ctx := context.Background()
	out := map[string]any{}
	insts, err := c.luxi.QueryInstances(ctx, nil, []string{"name", "serial_no"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range insts {
		out["instance/"+r[0].(string)] = r[1]
	}
	nodes, err := c.luxi.QueryNodes(ctx, nil, []string{"name", "serial_no"}, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range nodes {
		out["node/"+r[0].(string)] = r[1]
	}
	return out
}

func toJSON(v any) string {
	var b bytes.Buffer
	enc := jsonEncoder(&b)
	_ = enc.Encode(v)
	return b.String()
}
