package cmdlib

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/opcodes"
)

// stateGiven reports whether an op carries an hv_state or disk_state to
// apply: as in Ganeti, an empty dict changes nothing.
func stateGiven(op *opcodes.Op, name string) bool {
	v := op.Params[name]
	if m, ok := v.(map[string]any); ok {
		return len(m) > 0
	}
	return v != nil
}

// mergeStaticState applies an op's hv_state and disk_state to a node's or
// the cluster's declared states, validated as Ganeti's
// MergeAndVerifyHvState and MergeAndVerifyDiskState.
func mergeStaticState(op *opcodes.Op, hv *config.HVState, disk *config.DiskState) error {
	if stateGiven(op, "hv_state") {
		st, err := config.MergeHVState(*hv, op.Params["hv_state"])
		if err != nil {
			return err
		}
		*hv = st
	}
	if stateGiven(op, "disk_state") {
		st, err := config.MergeDiskState(*disk, op.Params["disk_state"])
		if err != nil {
			return err
		}
		*disk = st
	}
	return nil
}

// mergeClusterState applies an op's hv_state and disk_state to the
// cluster's, which Ganeti stores filled with its defaults.
func mergeClusterState(op *opcodes.Op, c *config.Cluster) error {
	hv, disk := c.HVStateStatic, c.DiskStateStatic
	if err := mergeStaticState(op, &hv, &disk); err != nil {
		return err
	}
	c.HVStateStatic, c.DiskStateStatic = config.FillHVState(hv), config.FillDiskState(disk)
	return nil
}
