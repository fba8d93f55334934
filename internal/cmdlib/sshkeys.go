package cmdlib

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/sshkeys"
)

// Per-node SSH keys, as in Ganeti's node-security design: every node has
// its own pair, made on the node; the public-key file of potential master
// candidates lives on the master and on each of them; every node's
// authorized_keys trusts only the keys of the master and the master
// candidates, taken from that file. The master keeps the files in line
// with the configuration after each change of node roles, as whole files
// (sshSync), so a repeated or resumed step converges on the same state.

// sshPotential reports whether n is a potential master candidate: any node
// when RAPI may change master capability (anyone with RAPI access could
// make it one), else only master capable nodes.
func sshPotential(c *config.Cluster, n *config.Node) bool {
	return c.MasterCapabilityRAPIModifiable || n.MasterCapable || n.UUID == c.MasterNode
}

// sshTrusted reports whether n's keys go into authorized_keys.
func sshTrusted(c *config.Cluster, n *config.Node) bool {
	return n.UUID == c.MasterNode || (n.MasterCandidate && !n.Offline)
}

// sshSyncOpts adjust one sync. Failing to reach the master fails a sync;
// other nodes that fail only get a warning (Ganeti's best effort), since
// the configuration change the sync follows has committed already.
type sshSyncOpts struct {
	// Extra are keys listed and trusted besides the nodes' current ones
	// (new keys during a renewal), by node uuid.
	Extra map[string][]string
	// Drop are keys removed from authorized_keys even outside the
	// cluster's block (a shared key being retired).
	Drop []string
}

// sshSyncStep is the step that brings the SSH files in line with the
// configuration once the op's configuration change committed.
func sshSyncStep() Step {
	return Step{"ssh-keys", func(ctx context.Context, s *StepCtx) error {
		return sshSync(ctx, s, sshSyncOpts{})
	}}
}

// sshNewNodeStep has a node being added make its key pair before it enters
// the configuration: a node that cannot is refused, not half added.
func sshNewNodeStep(n *config.Node) Step {
	return Step{"ssh-node-key", func(ctx context.Context, s *StepCtx) error {
		c := s.Cfg().Cluster()
		if !c.SSHSetupManaged() {
			return nil
		}
		typ, bits := c.SSHKeySpec()
		var r nodeapi.SSHKeyReply
		if err := s.RPC(ctx, n, nodeapi.SSHKeyEnsure, nodeapi.SSHKeyArgs{Type: typ, Bits: bits}, &r); err != nil {
			return ecode.Errorf(ecode.Environ, "Node %s could not make its SSH key: %v", n.Name, err)
		}
		if r.Managed && r.Created {
			if k, err := sshkeys.ParsePublic(r.PublicKey); err == nil {
				s.Logf(ctx, "Node %s made its SSH key (%s)", n.Name, k.Fingerprint())
			}
		}
		return nil
	}}
}

// sshChangesRoles reports whether a node flag change moves keys between
// the files (drained and vm_capable do not).
func sshChangesRoles(p *Processor, op *opcodes.Op) bool {
	if !p.Cfg.Cluster().SSHSetupManaged() {
		return false
	}
	for _, f := range []string{"master_candidate", "offline", "master_capable"} {
		if op.Params[f] != nil {
			return true
		}
	}
	return false
}

func sshNodesSorted(p *Processor) []*config.Node {
	nodes := p.Cfg.Nodes()
	slices.SortFunc(nodes, func(a, b *config.Node) int { return cmp.Compare(a.Name, b.Name) })
	return nodes
}

// sshSync computes the public-key file and the trusted keys from the
// configuration and writes them to every online node, the master first.
func sshSync(ctx context.Context, s *StepCtx, o sshSyncOpts) error {
	c := s.Cfg().Cluster()
	if !c.SSHSetupManaged() {
		s.Logf(ctx, "modify_ssh_setup is off: SSH keys and authorized_keys left alone")
		return nil
	}
	master, ok := s.Cfg().Node(c.MasterNode)
	if !ok {
		return ecode.Errorf(ecode.State, "The master node is not in the configuration")
	}
	var prev nodeapi.SSHFilesReply
	if err := s.RPC(ctx, master, nodeapi.SSHFilesRead, struct{}{}, &prev); err != nil {
		return ecode.Errorf(ecode.Environ, "Reading the SSH public-key file on the master %s: %v", master.Name, err)
	}
	if !prev.Managed {
		s.Logf(ctx, "The master's node daemon keeps no SSH directory: SSH keys left alone")
		return nil
	}
	prevKeys, err := sshkeys.ParsePubKeys(prev.PubKeys)
	if err != nil {
		s.Logf(ctx, "Warning: the master's SSH public-key file is damaged (%v); it is rebuilt", err)
		prevKeys = sshkeys.PubKeys{}
	}
	typ, bits := c.SSHKeySpec()
	nodes := sshNodesSorted(s.p)
	current := map[string][]string{}
	managed := map[string]bool{}
	problem := func(n *config.Node, format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if n.UUID == c.MasterNode {
			return ecode.Errorf(ecode.Environ, "%s", msg)
		}
		s.Logf(ctx, "Warning: %s", msg)
		return nil
	}
	for _, n := range nodes {
		if n.Offline {
			// An offline node cannot be asked; its last known keys stay.
			current[n.UUID] = prevKeys[n.UUID]
			continue
		}
		var r nodeapi.SSHKeyReply
		if err := s.RPC(ctx, n, nodeapi.SSHKeyEnsure, nodeapi.SSHKeyArgs{Type: typ, Bits: bits}, &r); err != nil {
			if err := problem(n, "Cannot get the SSH key of node %s: %v", n.Name, err); err != nil {
				return err
			}
			current[n.UUID] = prevKeys[n.UUID]
			continue
		}
		if !r.Managed {
			s.Logf(ctx, "Node %s keeps no SSH directory; its SSH setup is left alone", n.Name)
			continue
		}
		k, err := sshkeys.ParsePublic(r.PublicKey)
		if err != nil {
			if err := problem(n, "Node %s answered a bad SSH public key: %v", n.Name, err); err != nil {
				return err
			}
			continue
		}
		if r.Created {
			s.Logf(ctx, "Made the SSH key of node %s (%s)", n.Name, k.Fingerprint())
		}
		managed[n.UUID] = true
		current[n.UUID] = []string{r.PublicKey}
	}
	pub := sshkeys.PubKeys{}
	var trusted []string
	for _, n := range nodes {
		keys := slices.Clone(current[n.UUID])
		for _, k := range o.Extra[n.UUID] {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 || !sshPotential(c, n) {
			continue
		}
		pub[n.UUID] = keys
		if sshTrusted(c, n) {
			trusted = append(trusted, keys...)
		}
	}
	content := pub.String()
	none := ""
	// The master first: it holds the file the others are checked against.
	order := slices.Clone(nodes)
	slices.SortStableFunc(order, func(a, b *config.Node) int {
		return cmp.Compare(boolRank(a.UUID != c.MasterNode), boolRank(b.UUID != c.MasterNode))
	})
	for _, n := range order {
		if n.Offline || !managed[n.UUID] {
			continue
		}
		args := nodeapi.SSHFilesWriteArgs{PubKeys: &none, Authorized: &trusted, Drop: o.Drop}
		if sshPotential(c, n) {
			args.PubKeys = &content
		}
		if err := s.RPC(ctx, n, nodeapi.SSHFilesWrite, args, nil); err != nil {
			if err := problem(n, "Cannot update the SSH files of node %s: %v", n.Name, err); err != nil {
				return err
			}
		}
	}
	s.Logf(ctx, "SSH: %d potential master candidate key(s) listed, %d trusted on every node", len(pub), len(trusted))
	return nil
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sshLeaveStep clears the cluster's keys from a node that leaves the
// cluster, best effort: a dead node must still be removable.
func sshLeaveStep(uuid string) Step {
	return Step{"ssh-leave", func(ctx context.Context, s *StepCtx) error {
		c := s.Cfg().Cluster()
		n, ok := s.Cfg().Node(uuid)
		if !ok || n.Offline || !c.SSHSetupManaged() {
			return nil
		}
		none, empty := "", []string{}
		if err := s.RPC(ctx, n, nodeapi.SSHFilesWrite, nodeapi.SSHFilesWriteArgs{PubKeys: &none, Authorized: &empty}, nil); err != nil {
			s.Logf(ctx, "Warning: could not remove the cluster's SSH keys from node %s: %v", n.Name, err)
		}
		return nil
	}}
}

// setSSHParams applies OP_CLUSTER_SET_PARAMS's SSH parameters to c. It
// reports whether the SSH files must follow (a switch changed).
func setSSHParams(op *opcodes.Op, c *config.Cluster, changed *bool) (bool, error) {
	resync := false
	if t := op.Str("ssh_key_type"); t != "" || op.Params["ssh_key_bits"] != nil {
		typ, bits := c.SSHKeyType, c.SSHKeyBits
		if t != "" {
			typ, bits = t, 0
		}
		if v, ok := op.Params["ssh_key_bits"].(float64); ok {
			bits = int(v)
		}
		check := typ
		if check == "" {
			check = config.DefaultSSHKeyType
		}
		if _, err := sshkeys.CheckType(check, bits); err != nil {
			return false, ecode.Errorf(ecode.Inval, "%v", err)
		}
		c.SSHKeyType, c.SSHKeyBits, *changed = typ, bits, true
	}
	for _, f := range []string{"modify_ssh_setup", "master_capability_rapi_modifiable"} {
		v := op.Params[f]
		if v == nil {
			continue
		}
		b, ok := v.(bool)
		if !ok {
			return false, ecode.Errorf(ecode.Inval, "Parameter %s must be a boolean", f)
		}
		if f == "modify_ssh_setup" {
			resync = resync || (b && !c.SSHSetupManaged())
			c.ModifySSHSetup = &b
		} else {
			resync = resync || b != c.MasterCapabilityRAPIModifiable
			c.MasterCapabilityRAPIModifiable = b
		}
		*changed = true
	}
	return resync, nil
}

// sshSteps follow a change of the SSH switches: potential candidates
// change with master_capability_rapi_modifiable, and a cluster that manages
// SSH again brings the files up to date.
func (lu *clusterSetParamsLU) sshSteps() []Step {
	if !lu.SSHSync {
		return nil
	}
	return []Step{sshSyncStep()}
}

// sshSteps follow a node flag change that moves the node's key in or out
// of the files: promotion, demotion, offlining (and back), master
// capability.
func (lu *nodeSetParamsLU) sshSteps() []Step {
	for _, c := range lu.Changes {
		switch c[0] {
		case "master_candidate", "offline", "master_capable":
			return []Step{sshSyncStep()}
		}
	}
	return nil
}
