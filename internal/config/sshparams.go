package config

// Ganeti's defaults for the per-node SSH keys.
const (
	DefaultSSHKeyType = "rsa"
	DefaultSSHKeyBits = 2048
)

// SSHSetupManaged is modify_ssh_setup: whether Corral manages the nodes'
// SSH keys and authorized_keys (true unless switched off).
func (c *Cluster) SSHSetupManaged() bool { return c.ModifySSHSetup == nil || *c.ModifySSHSetup }

// SSHKeySpec is ssh_key_type and ssh_key_bits with their defaults filled
// in (ecdsa keys default to 256 bits, ed25519 keys have 256).
func (c *Cluster) SSHKeySpec() (string, int) {
	t, b := c.SSHKeyType, c.SSHKeyBits
	if t == "" {
		t = DefaultSSHKeyType
	}
	if b == 0 {
		b = DefaultSSHKeyBits
		if t != "rsa" {
			b = 256
		}
	}
	return t, b
}
