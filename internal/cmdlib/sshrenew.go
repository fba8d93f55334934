package cmdlib

import (
	"context"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/sshkeys"
)

// sshRenewPlan renews every node's SSH key pair (renew-crypto
// --new-ssh-keys) or moves a cluster whose nodes share one pair to per-node
// pairs (upgrade-ssh). The order keeps the master's access to every node
// at each moment: the new keys are trusted everywhere next to the old ones
// before any node switches to its new pair, and the old ones go last.
type sshRenewPlan struct {
	Type    string `json:"type"`
	Bits    int    `json:"bits"`
	Upgrade bool   `json:"upgrade,omitempty"`
	// Shared is the key all nodes shared (upgrade): retired at the end.
	Shared string `json:"shared,omitempty"`
	// New are the staged public keys by node uuid.
	New map[string][]string `json:"new,omitempty"`
}

func planSSHRenew(p *Processor, op *opcodes.Op) (*sshRenewPlan, error) {
	c := p.Cfg.Cluster()
	if !c.SSHSetupManaged() {
		return nil, ecode.Errorf(ecode.State, "The cluster does not manage SSH keys (modify_ssh_setup is off)")
	}
	typ, bits := c.SSHKeySpec()
	if t := op.Str("ssh_key_type"); t != "" {
		typ, bits = t, 0
	}
	if v, ok := op.Params["ssh_key_bits"].(float64); ok {
		bits = int(v)
	}
	bits, err := sshkeys.CheckType(typ, bits)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "%v", err)
	}
	return &sshRenewPlan{Type: typ, Bits: bits, Upgrade: op.Bool("upgrade_ssh")}, nil
}

func (pl *sshRenewPlan) steps() []Step {
	return []Step{
		{"ssh-stage", pl.stage},
		{"ssh-trust-new", func(ctx context.Context, s *StepCtx) error {
			return sshSync(ctx, s, sshSyncOpts{Extra: pl.New})
		}},
		{"ssh-switch", pl.commit},
		{"ssh-settings", pl.settings},
		{"ssh-retire-old", func(ctx context.Context, s *StepCtx) error {
			o := sshSyncOpts{}
			if pl.Shared != "" {
				o.Drop = []string{pl.Shared}
			}
			return sshSync(ctx, s, o)
		}},
	}
}

// stage makes a new pair beside the current one on every online node.
func (pl *sshRenewPlan) stage(ctx context.Context, s *StepCtx) error {
	c := s.Cfg().Cluster()
	if pl.Upgrade {
		master, ok := s.Cfg().Node(c.MasterNode)
		if !ok {
			return ecode.Errorf(ecode.State, "The master node is not in the configuration")
		}
		typ, bits := c.SSHKeySpec()
		var r nodeapi.SSHKeyReply
		if err := s.RPC(ctx, master, nodeapi.SSHKeyEnsure, nodeapi.SSHKeyArgs{Type: typ, Bits: bits}, &r); err != nil {
			return ecode.Errorf(ecode.Environ, "Reading the master's SSH key: %v", err)
		}
		if !r.Managed {
			return ecode.Errorf(ecode.Environ, "The master's node daemon keeps no SSH directory")
		}
		pl.Shared = r.PublicKey
		k, _ := sshkeys.ParsePublic(r.PublicKey)
		if k != nil {
			s.Logf(ctx, "The shared key %s is retired once every node has its own", k.Fingerprint())
		}
	}
	pl.New = map[string][]string{}
	for _, n := range sshNodesSorted(s.p) {
		if n.Offline {
			s.Logf(ctx, "Node %s is offline: its SSH key is not renewed", n.Name)
			continue
		}
		var r nodeapi.SSHKeyReply
		if err := s.RPC(ctx, n, nodeapi.SSHKeyEnsure, nodeapi.SSHKeyArgs{Type: pl.Type, Bits: pl.Bits, Stage: true}, &r); err != nil {
			if n.UUID == c.MasterNode {
				return ecode.Errorf(ecode.Environ, "Making a new SSH key on the master %s: %v", n.Name, err)
			}
			s.Logf(ctx, "Warning: node %s made no new SSH key: %v", n.Name, err)
			continue
		}
		if !r.Managed {
			continue
		}
		if _, err := sshkeys.ParsePublic(r.PublicKey); err != nil {
			return ecode.Errorf(ecode.Environ, "Node %s answered a bad SSH public key: %v", n.Name, err)
		}
		pl.New[n.UUID] = []string{r.PublicKey}
	}
	s.Logf(ctx, "Made new %s SSH keys on %d node(s)", pl.Type, len(pl.New))
	return nil
}

// commit switches each node to its new pair; both are trusted by now.
func (pl *sshRenewPlan) commit(ctx context.Context, s *StepCtx) error {
	for _, n := range sshNodesSorted(s.p) {
		if len(pl.New[n.UUID]) == 0 {
			continue
		}
		var r nodeapi.SSHKeyReply
		if err := s.RPC(ctx, n, nodeapi.SSHKeyCommit, nodeapi.SSHKeyArgs{Type: pl.Type, Bits: pl.Bits}, &r); err != nil {
			return ecode.Errorf(ecode.Environ, "Switching node %s to its new SSH key: %v", n.Name, err)
		}
		if !sshkeys.SameKey(r.PublicKey, pl.New[n.UUID][0]) {
			return ecode.Errorf(ecode.Environ, "Node %s holds another SSH key than the one it made", n.Name)
		}
	}
	return nil
}

// settings records a changed key type or size, so later nodes get it too.
func (pl *sshRenewPlan) settings(ctx context.Context, s *StepCtx) error {
	c := s.Cfg().Cluster()
	if typ, bits := c.SSHKeySpec(); typ == pl.Type && bits == pl.Bits {
		return nil
	}
	upd := c.Clone()
	upd.SSHKeyType, upd.SSHKeyBits = pl.Type, pl.Bits
	s.Tx().PutCluster(upd)
	s.Logf(ctx, "New nodes get %s keys of %d bits from now on", pl.Type, pl.Bits)
	return nil
}
