package baremetal

import (
	"testing"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/opcodes"
)

// TestDeployKeepsItsConfigDrive: a deploy (or rebuild) records its config
// drive in instance_info, a deploy without one drops the old one, and the
// tear-down drops it; other actions leave it.
func TestDeployKeepsItsConfigDrive(t *testing.T) {
	m := &config.Machine{InstanceInfo: map[string]any{"image_source": "http://i/x.raw"}}
	cd := map[string]any{"user_data": "#cloud-config\n{}"}
	keepConfigDrive(m, states.EventDeploy, &opcodes.Op{Params: map[string]any{"configdrive": cd}})
	if got, _ := m.InstanceInfo[keyConfigDrive].(map[string]any); got["user_data"] != cd["user_data"] || m.InstanceInfo["image_source"] != "http://i/x.raw" {
		t.Fatalf("after the deploy: %v", m.InstanceInfo)
	}
	keepConfigDrive(m, states.EventRescue, &opcodes.Op{Params: map[string]any{}})
	if m.InstanceInfo[keyConfigDrive] == nil {
		t.Fatal("a rescue dropped the config drive")
	}
	keepConfigDrive(m, states.EventDelete, &opcodes.Op{Params: map[string]any{}})
	if _, ok := m.InstanceInfo[keyConfigDrive]; ok {
		t.Fatal("the tear-down kept the config drive")
	}
	keepConfigDrive(m, states.EventRebuild, &opcodes.Op{Params: map[string]any{"configdrive": "H4sI..."}})
	if m.InstanceInfo[keyConfigDrive] != "H4sI..." {
		t.Fatalf("after the rebuild: %v", m.InstanceInfo)
	}
	keepConfigDrive(m, states.EventDeploy, &opcodes.Op{Params: map[string]any{"configdrive": nil}})
	if _, ok := m.InstanceInfo[keyConfigDrive]; ok {
		t.Fatal("a deploy without a config drive kept the old one")
	}
}
