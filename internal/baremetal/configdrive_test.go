package baremetal

import (
	"context"
	"strings"
	"testing"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/configdrive"
	"github.com/corral/corral/internal/bmc/bmctest"

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

// TestDeployCommandCarriesTheConfigDriveISO: the deploy's agent command
// has the config drive as an encoded ISO labelled config-2 (built from
// the object form), and none without a config drive.
func TestDeployCommandCarriesTheConfigDriveISO(t *testing.T) {
	bmctest.NeedISOTools(t)
	m := &config.Machine{InstanceInfo: map[string]any{
		"image_source": "http://i/x.raw", "image_checksum": strings.Repeat("a", 32),
		keyConfigDrive: map[string]any{"user_data": "#cloud-config\n{}"}}}
	m.UUID, m.Name = "m-1", "bm1"
	u := &provisionUnit{}
	cmd, p, err := u.commandOf(context.Background(), workDeploy, m, nil)
	if err != nil || cmd != agentapi.CmdPrepareImage {
		t.Fatalf("%s %v", cmd, err)
	}
	enc, _ := p["configdrive"].(string)
	iso, err := configdrive.Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(iso) < 17*2048 || string(iso[16*2048+1:16*2048+6]) != "CD001" || strings.TrimSpace(string(iso[16*2048+40:16*2048+72])) != configdrive.Label {
		t.Fatal("the config drive is not an ISO 9660 volume labelled config-2")
	}
	m.InstanceInfo[keyConfigDrive] = enc
	if _, p2, err := u.commandOf(context.Background(), workDeploy, m, nil); err != nil || p2["configdrive"] != enc {
		t.Fatalf("the encoded form was not passed as is: %v", err)
	}
	delete(m.InstanceInfo, keyConfigDrive)
	if _, p3, err := u.commandOf(context.Background(), workDeploy, m, nil); err != nil || p3["configdrive"] != nil {
		t.Fatalf("a deploy without a config drive sends %v (%v)", p3["configdrive"], err)
	}
	m.InstanceInfo[keyConfigDrive] = "not base64 SECRET"
	if _, _, err := u.commandOf(context.Background(), workDeploy, m, nil); err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("a bad config drive: %v", err)
	}
}
