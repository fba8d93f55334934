package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/cryptpw"
)

// TestInstanceRescueHashesThePassword: corral instance rescue sends only
// the crypt hash (sha512 when asked) and the keys; unrescue sends the name.
func TestInstanceRescueHashesThePassword(t *testing.T) {
	f := newFake(t)
	withInstance("web1")(f)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.pub")
	os.WriteFile(keys, []byte("ssh-ed25519 AAAAC3Nza k1@host\n"), 0o600)
	pwFile := filepath.Join(dir, "pw")
	const clear = "Cl3ar-rescue"
	os.WriteFile(pwFile, []byte(clear+"\n"), 0o600)
	if r := f.run(t, "instance", "rescue", "web1", "--rescue-password-file", pwFile, "--hash", "sha512", "--ssh-public-key", keys,
		"--shutdown-timeout", "30"); r.code != 0 {
		t.Fatalf("rescue: %d %s", r.code, r.stderr)
	}
	ops := f.submitted()
	raw, _ := json.Marshal(ops[0])
	var op map[string]any
	json.Unmarshal(raw, &op)
	hash, _ := op["rescue_password_hash"].(string)
	if strings.Contains(string(raw), clear) || op["OP_ID"] != "OP_INSTANCE_RESCUE" || op["instance_name"] != "web1" ||
		op["shutdown_timeout"] != 30.0 || !strings.HasPrefix(hash, "$6$") || !cryptpw.Verify(hash, clear) ||
		!sameJSON(t, op["ssh_public_keys"], `["ssh-ed25519 AAAAC3Nza k1@host"]`) {
		t.Fatalf("rescue op: %s", raw)
	}
	if r := f.run(t, "instance", "rescue", "web1", "--rescue-password", " "); r.code != 2 {
		t.Fatalf("an empty password: %d %s", r.code, r.stderr)
	}
	if r := f.run(t, "instance", "unrescue", "web1"); r.code != 0 {
		t.Fatalf("unrescue: %d %s", r.code, r.stderr)
	}
	ops = f.submitted()
	if len(ops) != 2 || !sameJSON(t, ops[1], `{"OP_ID":"OP_INSTANCE_UNRESCUE","instance_name":"web1"}`) {
		t.Fatalf("ops %v", ops)
	}
}
