package nodeapi

// Node RPCs for per-node SSH keys. The private key is made on the node and
// never leaves it; the master learns public keys only and sends whole
// files for the node to write atomically.
const (
	// SSHKeyEnsure returns the node's public key of the given type,
	// making the pair first when there is none (or, with Stage, always
	// making a new pair beside the current one, for a renewal).
	SSHKeyEnsure = "ssh_key_ensure"
	// SSHKeyCommit moves a staged pair into place.
	SSHKeyCommit = "ssh_key_commit"
	// SSHFilesRead returns the node's public-key file and the cluster
	// keys of its authorized_keys.
	SSHFilesRead = "ssh_files_read"
	// SSHFilesWrite replaces the public-key file and the cluster keys of
	// authorized_keys.
	SSHFilesWrite = "ssh_files_write"
)

// SSHKeyArgs names the key pair.
type SSHKeyArgs struct {
	Type  string `json:"type"`
	Bits  int    `json:"bits"`
	Stage bool   `json:"stage,omitempty"`
}

// SSHKeyReply is a node's public key. Managed is false when the node
// daemon keeps no SSH directory (corral-node --ssh-dir ""): the master then
// leaves the node's SSH setup alone.
type SSHKeyReply struct {
	Managed   bool   `json:"managed"`
	PublicKey string `json:"public_key,omitempty"`
	Created   bool   `json:"created,omitempty"`
}

// SSHFilesReply is what a node holds.
type SSHFilesReply struct {
	Managed bool `json:"managed"`
	// PubKeys is the public-key file ("" when the node has none).
	PubKeys string `json:"pub_keys"`
	// Authorized are the cluster's lines of authorized_keys.
	Authorized []string `json:"authorized"`
}

// SSHFilesWriteArgs replaces a node's files. A nil field leaves its file
// alone.
type SSHFilesWriteArgs struct {
	// PubKeys is the whole public-key file; "" removes it (the node is no
	// potential master candidate).
	PubKeys *string `json:"pub_keys,omitempty"`
	// Authorized are the cluster's keys for authorized_keys; each must be
	// in the public-key file when the node has one. Empty removes the
	// cluster's block.
	Authorized *[]string `json:"authorized,omitempty"`
	// Drop are keys to remove from authorized_keys wherever they are (a
	// shared cluster key being retired).
	Drop []string `json:"drop,omitempty"`
}
