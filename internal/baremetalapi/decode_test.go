package baremetalapi

import (
	"strings"
	"testing"
)

// FuzzDecodeBodies feeds arbitrary bodies to every request decoder: none
// may panic, and an accepted rescue always carries a non-blank password.
func FuzzDecodeBodies(f *testing.F) {
	f.Add(`{"driver": "ipmi", "name": "n", "driver_info": {"ipmi_address": "h"}}`)
	f.Add(`{"target": "rescue", "rescue_password": "pw"}`)
	f.Add(`{"target": "clean", "clean_steps": [{"interface": "deploy", "step": "erase_devices"}]}`)
	f.Add(`{"callback_url": "http://10.0.0.1:9999", "agent_token": "t", "agent_status": "start"}`)
	f.Fuzz(func(t *testing.T, body string) {
		for _, v := range []Version{MinVersion, {1, 38}, MaxVersion} {
			if m, err := decodeNodeCreate([]byte(body), v); err == nil && (m.Driver == "" || m.UUID == "") {
				t.Fatalf("accepted a machine without driver or uuid: %+v", m)
			}
			if p, err := decodeProvision([]byte(body), v); err == nil && p.target == "rescue" &&
				(p.rescuePassword == nil || strings.TrimSpace(*p.rescuePassword) == "") {
				t.Fatalf("accepted a rescue without a password: %s", body)
			}
			if hb, err := decodeHeartbeat([]byte(body), v); err == nil && (hb.AgentToken == "" || hb.CallbackURL == "") {
				t.Fatalf("accepted a heartbeat without token or callback: %+v", hb)
			}
		}
		_, _ = decodeObject([]byte(body), []string{"reason"}, true)
	})
}
