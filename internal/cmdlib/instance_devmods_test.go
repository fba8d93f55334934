package cmdlib

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

func TestParseDevMods(t *testing.T) {
	cases := []struct {
		name string
		raw  string
		want []devMod
		err  string
	}{
		{"add at end", `[["add", -1, {"size": 1024}]]`, []devMod{{ddmAdd, "-1", map[string]any{"size": 1024.0}}}, ""},
		{"remove by name", `[["remove", "data", {}]]`, []devMod{{ddmRemove, "data", map[string]any{}}}, ""},
		{"modify", `[["modify", 0, {"mode": "ro"}]]`, []devMod{{ddmModify, "0", map[string]any{"mode": "ro"}}}, ""},
		{"legacy add", `[["add", {"size": 10}]]`, []devMod{{ddmAdd, "-1", map[string]any{"size": 10.0}}}, ""},
		{"legacy modify", `[[1, {"mode": "rw"}]]`, []devMod{{ddmModify, "1", map[string]any{"mode": "rw"}}}, ""},
		{"legacy two adds", `[["add", {"size": 10}], ["remove", {}]]`, nil, "Only one disk add/attach/remove/detach operation is supported at a time"},
		{"remove with params", `[["remove", 0, {"size": 1}]]`, nil, "No settings should be passed when removing or detaching a disk"},
		{"unknown op", `[["grow", 0, {}]]`, nil, "Invalid disk operation 'grow'"},
		{"attach", `[["attach", 0, {"name": "x"}]]`, nil, "attach operation"},
		{"not a list", `[{"size": 1}]`, nil, "expected [operation, identifier, parameters]"},
		{"params not a dict", `[["add", -1, 5]]`, nil, "parameters must be a dict"},
	}
	for _, c := range cases {
		var raw []any
		if err := json.Unmarshal([]byte(c.raw), &raw); err != nil {
			t.Fatal(err)
		}
		got, err := parseDevMods("disk", raw)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(c.want)
		if string(gb) != string(wb) {
			t.Errorf("%s: got %s, want %s", c.name, gb, wb)
		}
	}
}

func FuzzParseDevMods(f *testing.F) {
	for _, s := range []string{`[["add", -1, {"size": 1024}]]`, `[[0, {"mode": "ro"}]]`, `[["remove", {}]]`, `[[null]]`, `[["add", -1, null]]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var raw []any
		if json.Unmarshal([]byte(s), &raw) != nil {
			return
		}
		mods, err := parseDevMods("NIC", raw)
		if err != nil {
			return
		}
		for _, m := range mods {
			if m.Op != ddmAdd && m.Op != ddmRemove && m.Op != ddmModify || m.Params == nil {
				t.Fatalf("accepted %+v from %s", m, s)
			}
			if m.Op == ddmRemove && len(m.Params) > 0 {
				t.Fatalf("remove with parameters accepted from %s", s)
			}
		}
	})
}

func TestLookupDevice(t *testing.T) {
	names, uuids := []string{"boot", ""}, []string{"u0", "u1"}
	for id, want := range map[string]int{"0": 0, "1": 1, "-1": 1, "boot": 0, "u1": 1} {
		if got, err := lookupDevice("disk", id, names, uuids); err != nil || got != want {
			t.Errorf("lookup %s: %d %v, want %d", id, got, err, want)
		}
	}
	for id, msg := range map[string]string{"2": "Got disk index 2, but there are only 2", "-2": "Not accepting negative indices other than -1",
		"nope": "Cannot find disk with identifier nope"} {
		if _, err := lookupDevice("disk", id, names, uuids); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("lookup %s: %v, want %q", id, err, msg)
		}
	}
}

// hotplugLog records the node's instance_hotplug calls.
type hotplugLog struct {
	mu    sync.Mutex
	calls []nodeapi.HotplugArgs
}

func (h *hotplugLog) record(method string, args any) {
	if method != nodeapi.Hotplug {
		return
	}
	h.mu.Lock()
	h.calls = append(h.calls, args.(nodeapi.HotplugArgs))
	h.mu.Unlock()
}

func (h *hotplugLog) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, a := range h.calls {
		out = append(out, a.Action+" "+a.Target+" "+string(rune('0'+a.Index)))
	}
	h.calls = nil
	return out
}

func modifyOp(name string, kv ...any) map[string]any {
	op := map[string]any{"OP_ID": "OP_INSTANCE_SET_PARAMS", "instance_name": name}
	for i := 0; i+1 < len(kv); i += 2 {
		op[kv[i].(string)] = kv[i+1]
	}
	return op
}

// TestModifyDisksAndNICsStopped: cold changes change the configuration and
// the node's storage, with Ganeti's change descriptions.
func TestModifyDisksAndNICsStopped(t *testing.T) {
	node := newNodeDouble()
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()
	if st, res := e.run(t, create("web1", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	st, res := e.run(t, modifyOp("web1", "disks", []any{[]any{"add", -1, map[string]any{"size": 200, "name": "data"}}},
		"nics", []any{[]any{"add", -1, map[string]any{"link": "br1"}}}))
	b, _ := json.Marshal(res)
	if st != "success" || !strings.Contains(string(b), `["disk/1","add:size=200,mode=rw"]`) || !strings.Contains(string(b), `"nic.1","add:mac=aa:00:00:`) {
		t.Fatalf("add: %s %s", st, b)
	}
	if n := node.count(nodeapi.DiskCreate); n != 2 { // the create's and the add's
		t.Errorf("blockdev_create called %d times, want 2", n)
	}
	inst, _ := e.cfg.Instance("web1")
	if len(inst.Disks) != 2 || inst.Disks[1].SizeMiB != 200 || inst.Disks[1].Name != "data" || len(inst.NICs) != 2 || inst.NICs[1].Link != "br1" ||
		!strings.HasPrefix(inst.NICs[1].MAC, "aa:00:00:") || inst.NICs[1].MAC == inst.NICs[0].MAC {
		t.Fatalf("config after add: %+v %+v", inst.Disks, inst.NICs)
	}
	st, res = e.run(t, modifyOp("web1", "disks", []any{[]any{"modify", "data", map[string]any{"mode": "ro"}}},
		"nics", []any{[]any{"modify", 1, map[string]any{"ip": "192.0.2.7"}}}))
	b, _ = json.Marshal(res)
	if st != "success" || !strings.Contains(string(b), `["disk.mode/1","ro"]`) || !strings.Contains(string(b), `["nic.ip/1","192.0.2.7"]`) {
		t.Fatalf("modify: %s %s", st, b)
	}
	st, res = e.run(t, modifyOp("web1", "disks", []any{[]any{"remove", 0, map[string]any{}}}, "nics", []any{[]any{"remove", 0, map[string]any{}}}))
	b, _ = json.Marshal(res)
	if st != "success" || !strings.Contains(string(b), `["disk/0","remove"]`) || !strings.Contains(string(b), `["nic/0","remove"]`) {
		t.Fatalf("remove: %s %s", st, b)
	}
	inst, _ = e.cfg.Instance("web1")
	if len(inst.Disks) != 1 || inst.Disks[0].Name != "data" || inst.Disks[0].Mode != "ro" || len(inst.NICs) != 1 || inst.NICs[0].IP != "192.0.2.7" {
		t.Fatalf("config after remove: %+v %+v", inst.Disks, inst.NICs)
	}
	if n := node.count(nodeapi.DiskRemove); n != 1 {
		t.Errorf("blockdev_remove called %d times, want 1", n)
	}
	mac := inst.NICs[0].MAC
	if st, res := e.run(t, create("web2", map[string]any{"start": false})); st != "success" {
		t.Fatalf("create web2: %s %v", st, res)
	}
	e.expectRefusals(t, []refusal{
		{"last disk", modifyOp("web1", "disks", []any{[]any{"remove", 0, map[string]any{}}}), ecode.Inval, "Cannot remove the last disk of instance web1"},
		{"size change", modifyOp("web1", "disks", []any{[]any{"modify", 0, map[string]any{"size": 5}}}), ecode.Inval, "Disk size change not possible, use grow-disk"},
		{"no size", modifyOp("web1", "disks", []any{[]any{"add", -1, map[string]any{}}}), ecode.Inval, "Required disk parameter 'size' missing"},
		{"bad index", modifyOp("web1", "disks", []any{[]any{"modify", 4, map[string]any{"mode": "rw"}}}), ecode.Inval, "Got disk index 4, but there are only 1"},
		{"bad mode", modifyOp("web1", "disks", []any{[]any{"modify", 0, map[string]any{"mode": "rx"}}}), ecode.Inval, "Invalid disk access mode 'rx'"},
		{"mac in use", modifyOp("web2", "nics", []any{[]any{"modify", 0, map[string]any{"mac": mac}}}), ecode.NotUnique, "already in use"},
		{"auto mac", modifyOp("web1", "nics", []any{[]any{"modify", 0, map[string]any{"mac": "auto"}}}), ecode.Inval,
			"'auto' is not a valid MAC address when modifying an existing NIC"},
		{"bad ip", modifyOp("web1", "nics", []any{[]any{"add", -1, map[string]any{"ip": "300.1.1.1"}}}), ecode.Inval, "Invalid IP address '300.1.1.1'"},
		{"hotplug stopped", modifyOp("web1", "hotplug", true, "nics", []any{[]any{"add", -1, map[string]any{}}}), ecode.State, "Hotplug is not possible: instance web1 is not running"},
		{"runtime_mem stopped", modifyOp("web1", "runtime_mem", 128), ecode.State, "Instance web1 is not running"},
	})
}

// TestModifyRunningHotplug: on a running instance the node is asked to
// plug and unplug devices, in the right order around the configuration
// change; without hotplug a removal is refused and an add waits for the
// next start.
func TestModifyRunningHotplug(t *testing.T) {
	node := newNodeDouble()
	var hp hotplugLog
	node.withArgs = hp.record
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), node, true)
	defer e.close()
	if st, res := e.run(t, create("web1", map[string]any{"beparams": map[string]any{"minmem": 128, "maxmem": 256}})); st != "success" {
		t.Fatalf("create: %s %v", st, res)
	}
	st, res := e.run(t, modifyOp("web1", "hotplug", true, "disks", []any{[]any{"add", -1, map[string]any{"size": 64}}},
		"nics", []any{[]any{"add", -1, map[string]any{}}}))
	b, _ := json.Marshal(res)
	if st != "success" || !strings.Contains(string(b), `["disk/1","hotplug:done"]`) || !strings.Contains(string(b), `["nic.1","hotplug:done"]`) {
		t.Fatalf("hot add: %s %s", st, b)
	}
	if got := strings.Join(hp.take(), ","); got != "check  0,add disk 1,add nic 1" {
		t.Errorf("hotplug calls %q", got)
	}
	e.expectRefusals(t, []refusal{
		{"cold remove while running", modifyOp("web1", "disks", []any{[]any{"remove", 1, map[string]any{}}}), ecode.State,
			"Instance web1 is running, can't remove volume from a running instance without using hotplug"},
		{"hot remove of a middle disk", modifyOp("web1", "hotplug", true, "disks", []any{[]any{"remove", 0, map[string]any{}}}), ecode.State,
			"Hotplug is not possible: only the last disk can be hot-removed"},
		{"hot insert", modifyOp("web1", "hotplug", true, "nics", []any{[]any{"add", 0, map[string]any{}}}), ecode.State,
			"Hotplug is not possible: NICs are hot-added at the end"},
		{"runtime_mem above maxmem", modifyOp("web1", "runtime_mem", 512), ecode.Inval,
			"Instance web1 must have memory between 128 and 256 MB of memory unless --force is given"},
	})
	hp.take()
	st, res = e.run(t, modifyOp("web1", "hotplug", true, "disks", []any{[]any{"remove", -1, map[string]any{}}},
		"nics", []any{[]any{"remove", 1, map[string]any{}}}, "runtime_mem", 192))
	b, _ = json.Marshal(res)
	if st != "success" || !strings.Contains(string(b), `["disk/1","hotplug:done"]`) || !strings.Contains(string(b), `["runtime_memory",192]`) {
		t.Fatalf("hot remove: %s %s", st, b)
	}
	if got := strings.Join(hp.take(), ","); got != "check  0,remove disk 1,remove nic 1,memory  0" {
		t.Errorf("hotplug calls %q", got)
	}
	// A changed NIC is replaced on the running instance: removed, added.
	st, res = e.run(t, modifyOp("web1", "hotplug", true, "nics", []any{[]any{"modify", 0, map[string]any{"ip": "192.0.2.9"}}}))
	b, _ = json.Marshal(res)
	if st != "success" || !strings.Contains(string(b), `["nic/0","hotplug:done"]`) {
		t.Fatalf("hot modify: %s %s", st, b)
	}
	if got := strings.Join(hp.take(), ","); got != "check  0,remove nic 0,add nic 0" {
		t.Errorf("hotplug calls for a NIC change %q", got)
	}
	// Without hotplug an add waits for the next start: the node is not asked.
	if st, res := e.run(t, modifyOp("web1", "nics", []any{[]any{"add", -1, map[string]any{}}})); st != "success" {
		t.Fatalf("cold add: %s %v", st, res)
	}
	if got := hp.take(); len(got) != 0 {
		t.Errorf("cold add called the node: %v", got)
	}
	inst, _ := e.cfg.Instance("web1")
	if len(inst.Disks) != 1 || len(inst.NICs) != 2 {
		t.Errorf("config: %d disks, %d nics", len(inst.Disks), len(inst.NICs))
	}
}

// TestModifyNewPrimary: pnode moves a stopped instance whose disks every
// node sees; a file instance is pointed to instance move, a running one
// refused as Ganeti does.
func TestModifyNewPrimary(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "127.0.0.3"}); st != "success" {
		t.Fatalf("node add: %s %v", st, res)
	}
	if st, res := e.run(t, create("d1", map[string]any{"disk_template": "diskless", "disks": []any{}, "pnode": "n1"})); st != "success" {
		t.Fatalf("create d1: %s %v", st, res)
	}
	if st, res := e.run(t, create("f1", map[string]any{"start": false, "pnode": "n1"})); st != "success" {
		t.Fatalf("create f1: %s %v", st, res)
	}
	e.expectRefusals(t, []refusal{
		{"running", modifyOp("d1", "pnode", "n2"), ecode.State, "Instance is still running on n1"},
		{"file", modifyOp("f1", "pnode", "n2"), ecode.Inval, "use instance move (OP_INSTANCE_MOVE)"},
	})
	if st, res := e.run(t, map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "d1"}); st != "success" {
		t.Fatalf("shutdown: %s %v", st, res)
	}
	if st, res := e.run(t, modifyOp("d1", "pnode", "n2")); st != "success" {
		t.Fatalf("new primary: %s %v", st, res)
	}
	inst, _ := e.cfg.Instance("d1")
	n2, _ := e.cfg.Node("n2")
	if inst.PrimaryNode != n2.UUID {
		t.Errorf("primary node %s, want n2's %s", inst.PrimaryNode, n2.UUID)
	}
}
