package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// ganetiClientDict returns the dict Ganeti 3.0's client sends for an
// opcode with every parameter at its default (from the opcodes package's
// testdata, written by Ganeti's own code).
func ganetiClientDict(t *testing.T, id string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoDir, "internal/opcodes/testdata/ganeti30_opcodes.json"))
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		ClientDicts map[string]struct {
			Full map[string]any `json:"full"`
		} `json:"client_dicts"`
	}
	if err := json.Unmarshal(b, &data); err != nil {
		t.Fatal(err)
	}
	d, ok := data.ClientDicts[id]
	if !ok {
		t.Fatalf("no client dict for %s", id)
	}
	return d.Full
}

// TestGanetiClientOpcodes runs, on real daemons, the create and remove
// dicts Ganeti 3.0's client sends with every default (commit, forthcoming,
// pnode_uuid, instance_uuid... included), and checks that an opcode of
// Ganeti's that Corral lacks is refused at submission as not supported.
func TestGanetiClientOpcodes(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"}})
	create := ganetiClientDict(t, "OP_INSTANCE_CREATE")
	create["os_type"] = "tiny+default"
	create["disks"] = []any{map[string]any{"size": 16}}
	create["nics"] = []any{}
	create["start"] = false
	c.mustSucceed(create)
	name := create["instance_name"].(string)
	if dt := c.instanceField(name, "disk_template"); dt != "file" {
		t.Errorf("%s has disk template %v, want the cluster's first enabled", name, dt)
	}

	remove := ganetiClientDict(t, "OP_INSTANCE_REMOVE")
	remove["instance_uuid"] = "0000-another-instance"
	msg := c.mustFail(string(ecode.NotUnique), remove)
	if !strings.Contains(msg, "instance_uuid") {
		t.Errorf("mismatched uuid: %s", msg)
	}
	remove["instance_uuid"] = c.instanceField(name, "uuid")
	c.mustSucceed(remove)

	// Corral has no DRBD, so no disk replacement.
	_, err := c.luxi.SubmitJob(t.Context(), []any{map[string]any{"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": name}})
	e, ok := ecode.As(err)
	if !ok || e.Kind != ecode.OpPrereqError || e.Class != ecode.Inval || !strings.Contains(e.Msg, "OP_INSTANCE_REPLACE_DISKS is not supported") {
		t.Fatalf("submitting OP_INSTANCE_REPLACE_DISKS: %#v, want OpPrereqError wrong_input not supported", err)
	}
}
