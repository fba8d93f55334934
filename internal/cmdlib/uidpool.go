package cmdlib

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/uidpool"
)

// opUIDPool reads a uid-pool parameter: Ganeti's list of [low, high] pairs,
// or (for convenience) the text form "1000-1009, 2000". ok is false when the
// parameter is absent.
func opUIDPool(op *opcodes.Op, name string) (p uidpool.Pool, ok bool, err error) {
	v := op.Params[name]
	if v == nil {
		return nil, false, nil
	}
	if s, isText := v.(string); isText {
		p, err = uidpool.Parse(s)
	} else {
		p, err = uidpool.FromPairs(v)
	}
	if err != nil {
		return nil, false, ecode.Errorf(ecode.Inval, "%s: %v", name, err)
	}
	return p, true, nil
}

// setUIDPool applies OP_CLUSTER_SET_PARAMS's uid_pool (replace), add_uids and
// remove_uids, in that order, as Ganeti does.
func setUIDPool(op *opcodes.Op, c *config.Cluster, changed *bool) error {
	cur := uidpool.FromArrays(c.UIDPool)
	if p, ok, err := opUIDPool(op, "uid_pool"); err != nil {
		return err
	} else if ok {
		cur, *changed = p, true
	}
	if p, ok, err := opUIDPool(op, "add_uids"); err != nil {
		return err
	} else if ok {
		if cur, err = uidpool.Add(cur, p); err != nil {
			return err
		}
		*changed = true
	}
	if p, ok, err := opUIDPool(op, "remove_uids"); err != nil {
		return err
	} else if ok {
		if cur, err = uidpool.Remove(cur, p); err != nil {
			return err
		}
		*changed = true
	}
	c.UIDPool = cur.Arrays()
	return nil
}
