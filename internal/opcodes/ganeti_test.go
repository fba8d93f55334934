package opcodes

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// ganetiOpcodes is testdata/ganeti30_opcodes.json, written by the script
// beside it from Ganeti 3.0's own opcode classes.
type ganetiOpcodes struct {
	Opcodes map[string][]struct {
		Name     string `json:"name"`
		Default  any    `json:"default"`
		Type     string `json:"type"`
		Required bool   `json:"required"`
	} `json:"opcodes"`
	ClientDicts map[string]struct {
		Minimal json.RawMessage `json:"minimal"`
		Full    json.RawMessage `json:"full"`
	} `json:"client_dicts"`
}

func loadGanetiOpcodes(t *testing.T) *ganetiOpcodes {
	t.Helper()
	b, err := os.ReadFile("testdata/ganeti30_opcodes.json")
	if err != nil {
		t.Fatal(err)
	}
	var g ganetiOpcodes
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Opcodes) < 70 {
		t.Fatalf("only %d Ganeti opcodes in the testdata", len(g.Opcodes))
	}
	return &g
}

// Corral's defaults that differ from Ganeti's on purpose: Ganeti requires
// these, Corral fills a default for its own callers.
var lenientDefaults = map[string]bool{
	"OP_INSTANCE_CREATE.mode":        true, // Corral: "create"
	"OP_INSTANCE_REBOOT.reboot_type": true, // Corral: "soft"
	// Ganeti's {} and Corral's null both mean "leave the OS parameters".
	"OP_INSTANCE_SET_PARAMS.osparams": true,
}

// TestGanetiClientDictsDecode decodes, for every Ganeti opcode Corral
// implements, the dicts Ganeti 3.0's client sends: with only the required
// values, and with every parameter at Ganeti's default.
func TestGanetiClientDictsDecode(t *testing.T) {
	g := loadGanetiOpcodes(t)
	tab := Default()
	for _, id := range tab.IDs() {
		if _, ganeti := g.Opcodes[id]; ganeti {
			if _, ok := g.ClientDicts[id]; !ok {
				t.Errorf("%s: no client dicts in the testdata; add it to the script's REQUIRED", id)
			}
		}
	}
	for id, dicts := range g.ClientDicts {
		d, ok := tab.Lookup(id)
		if !ok {
			t.Errorf("%s: the testdata has client dicts but Corral does not implement it", id)
			continue
		}
		for kind, raw := range map[string]json.RawMessage{"minimal": dicts.Minimal, "full": dicts.Full} {
			op, err := tab.Decode(raw)
			if err != nil {
				t.Errorf("%s (%s): %v\n%s", id, kind, err, raw)
				continue
			}
			for _, p := range g.Opcodes[id] {
				if _, ok := op.Params[p.Name]; !ok {
					t.Errorf("%s (%s): Ganeti's parameter %q is missing after decoding", id, kind, p.Name)
				}
			}
		}
		for _, p := range g.Opcodes[id] {
			cp, ok := d.byName[p.Name]
			if !ok {
				t.Errorf("%s: no parameter %q (Ganeti: %s)", id, p.Name, p.Type)
				continue
			}
			key := id + "." + p.Name
			if cp.Required && !p.Required {
				t.Errorf("%s: Corral requires it, Ganeti defaults it to %v", key, p.Default)
			}
			if p.Required || p.Default == nil || lenientDefaults[key] {
				continue
			}
			if want := normalize(p.Default); !reflect.DeepEqual(cp.Default, want) {
				t.Errorf("%s: default %#v, Ganeti's is %#v", key, cp.Default, want)
			}
		}
	}
}

// TestGanetiOpIDsMatchGaneti keeps GanetiOpIDs equal to Ganeti's list.
func TestGanetiOpIDsMatchGaneti(t *testing.T) {
	g := loadGanetiOpcodes(t)
	var want []string
	for id := range g.Opcodes {
		want = append(want, id)
	}
	sort.Strings(want)
	if got := GanetiOpIDs(); !slices.Equal(got, want) {
		t.Fatalf("GanetiOpIDs() = %q\nwant %q", got, want)
	}
}

// TestUnimplementedGanetiOpcodesRefused: each Ganeti opcode Corral lacks
// is refused as not supported, an OpPrereqError of class wrong_input, and
// docs/GANETI.md lists it.
func TestUnimplementedGanetiOpcodesRefused(t *testing.T) {
	tab := Default()
	doc, err := os.ReadFile("../../docs/GANETI.md")
	if err != nil {
		t.Fatal(err)
	}
	_, opcodesDoc, _ := strings.Cut(string(doc), "\n## Opcodes\n")
	opcodesDoc, _, _ = strings.Cut(opcodesDoc, "\n## ")
	n := 0
	for _, id := range GanetiOpIDs() {
		if _, ok := tab.Lookup(id); ok {
			continue
		}
		n++
		_, err := tab.Decode(json.RawMessage(fmt.Sprintf(`{"OP_ID": %q}`, id)))
		e, ok := ecode.As(err)
		if !ok || e.Kind != ecode.OpPrereqError || e.Class != ecode.Inval || !strings.Contains(e.Msg, "not supported") {
			t.Errorf("%s: %#v, want OpPrereqError wrong_input \"not supported\"", id, err)
		}
		if !strings.Contains(opcodesDoc, "`"+id+"`") {
			t.Errorf("%s is not listed in docs/GANETI.md's Opcodes section", id)
		}
	}
	if n == 0 {
		t.Fatal("every Ganeti opcode is implemented? the test found none to refuse")
	}
	// And the list names nothing Corral now implements.
	_, refused, _ := strings.Cut(opcodesDoc, "**Not implemented.**")
	for _, id := range regexp.MustCompile(`OP_[A-Z_]+`).FindAllString(refused, -1) {
		if _, ok := tab.Lookup(id); ok {
			t.Errorf("%s is implemented but docs/GANETI.md lists it as not implemented", id)
		}
	}
	if _, err := tab.Decode(json.RawMessage(`{"OP_ID": "OP_NO_SUCH_THING"}`)); err == nil || !strings.Contains(err.Error(), "unknown opcode") {
		t.Errorf("a non-Ganeti opcode: %v, want unknown opcode", err)
	}
}

// TestUnsupportedValuesRefused: a parameter Corral cannot honour accepts
// its default, null and the honoured values, and refuses anything else
// with an OpPrereqError naming the parameter.
func TestUnsupportedValuesRefused(t *testing.T) {
	tab := Default()
	cases := []struct {
		op     string
		refuse bool
	}{
		{`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","disks":[],"nics":[],"forthcoming":false,"commit":false}`, false},
		{`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","disks":[],"nics":[],"forthcoming":true}`, true},
		{`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","disks":[],"nics":[],"commit":true}`, true},
		{`{"OP_ID":"OP_CLUSTER_SET_PARAMS","vg_name":""}`, false},
		{`{"OP_ID":"OP_CLUSTER_SET_PARAMS","vg_name":"xenvg"}`, true},
		{`{"OP_ID":"OP_CLUSTER_SET_PARAMS","hv_state":{},"reserved_lvs":[],"modify_etc_hosts":false}`, false},
		{`{"OP_ID":"OP_CLUSTER_SET_PARAMS","modify_etc_hosts":true}`, true},
		{`{"OP_ID":"OP_NODE_SET_PARAMS","node_name":"n","disk_state":{"plain":{"xenvg":{"disk_total":100}}}}`, false},
		{`{"OP_ID":"OP_INSTANCE_SET_PARAMS","instance_name":"a","disk_template":"drbd"}`, true},
		{`{"OP_ID":"OP_INSTANCE_SET_PARAMS","instance_name":"a","instance_communication":false}`, false},
		{`{"OP_ID":"OP_CLUSTER_VERIFY","verify_clutter":true}`, true},
		{`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","disks":[],"nics":[],"file_driver":"loop"}`, false},
		{`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","disks":[],"nics":[],"file_driver":"blktap"}`, true},
		{`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"a","disks":[],"nics":[],"file_storage_dir":"web"}`, true},
	}
	for _, c := range cases {
		_, err := tab.Decode(json.RawMessage(c.op))
		if !c.refuse {
			if err != nil {
				t.Errorf("%s: %v", c.op, err)
			}
			continue
		}
		e, ok := ecode.As(err)
		if !ok || e.Kind != ecode.OpPrereqError || e.Class != ecode.Inval || !strings.Contains(e.Msg, "not supported") {
			t.Errorf("%s: %v, want an OpPrereqError wrong_input", c.op, err)
			continue
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(c.op), &m)
		named := false
		for k := range m {
			named = named || strings.Contains(e.Msg, fmt.Sprintf("%q", k))
		}
		if !named {
			t.Errorf("%s: %q names no parameter", c.op, e.Msg)
		}
	}
}
