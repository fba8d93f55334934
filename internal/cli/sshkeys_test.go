package cli

import (
	"strings"
	"testing"
)

func TestSSHOpcodes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cluster", "modify", "--modify-ssh-setup", "no", "--master-capability-rapi-modifiable", "yes", "--ssh-key-type", "ecdsa", "--ssh-key-bits", "384"},
			`{"OP_ID":"OP_CLUSTER_SET_PARAMS","modify_ssh_setup":false,"master_capability_rapi_modifiable":true,"ssh_key_type":"ecdsa","ssh_key_bits":384}`},
		{[]string{"cluster", "upgrade-ssh"}, `{"OP_ID":"OP_CLUSTER_RENEW_CRYPTO","renew_ssh_keys":true,"upgrade_ssh":true}`},
		{[]string{"cluster", "upgrade-ssh", "--ssh-key-type", "ed25519"},
			`{"OP_ID":"OP_CLUSTER_RENEW_CRYPTO","renew_ssh_keys":true,"upgrade_ssh":true,"ssh_key_type":"ed25519"}`},
	} {
		f := newFake(t)
		r := f.run(t, tc.args...)
		if r.code != 0 {
			t.Fatalf("%q: exit %d\n%s", tc.args, r.code, r.stderr)
		}
		ops := f.submitted()
		if len(ops) != 1 || !sameJSON(t, ops[0], tc.want) {
			got, _ := jsonText(ops)
			t.Fatalf("%q: submitted %s, want %s", tc.args, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"cluster", "modify", "--ssh-key-type", "dsa"}, "rsa, ecdsa or ed25519"},
		{[]string{"cluster", "modify", "--modify-ssh-setup", "maybe"}, "expected yes or no"},
		{[]string{"cluster", "upgrade-ssh", "--ssh-key-bits", "0"}, "must be positive"},
	} {
		f := newFake(t)
		r := f.run(t, tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.msg)
		}
		if n := f.callCount(); n != 0 {
			t.Errorf("%q: %d calls to the master", tc.args, n)
		}
	}
}
