package query

import (
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

// InstanceRow is an instance with what its fields need.
type InstanceRow struct {
	Inst    *config.Instance
	Cluster *config.Cluster
	PNode   *config.Node
	// PGroup is the primary node's group (nil when unknown).
	PGroup *config.NodeGroup
	// Live data; LiveState is RSNormal when the node answered.
	Live      *nodeapi.RunningInstance
	LiveState int
	// RescueState is where the instance's rescue stands (rescuing,
	// rescue, unrescuing); "" when it is not in rescue.
	RescueState string
	// NetworkNames are the networks' names by uuid, for the NIC network
	// fields.
	NetworkNames map[string]string
}

func (r *InstanceRow) live() (any, int) { return nil, r.LiveState }

// Status is Ganeti's combined instance status.
func (r *InstanceRow) Status() (any, int) {
	switch {
	case r.PNode == nil:
		return "ERROR_nodedown", RSNormal
	case r.PNode.Offline:
		return "ERROR_nodeoffline", RSNormal
	case r.LiveState != RSNormal:
		return "ERROR_nodedown", RSNormal
	}
	up := r.Inst.AdminState == config.AdminUp
	switch {
	case r.Live != nil && up:
		return "running", RSNormal
	case r.Live != nil:
		return "ERROR_up", RSNormal
	case up:
		return "ERROR_down", RSNormal
	case r.Inst.AdminState == config.AdminOffline:
		return "ADMIN_offline", RSNormal
	}
	return "ADMIN_down", RSNormal
}

func ok(v any) (any, int) { return v, RSNormal }

func strs[T any](l []T, f func(T) string) []string {
	out := make([]string, 0, len(l))
	for _, e := range l {
		out = append(out, f(e))
	}
	return out
}

func tags(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}

func emptyIfNil(p config.Params) config.Params {
	if p == nil {
		return config.Params{}
	}
	return p
}

func osBase(os string) string {
	for i := 0; i < len(os); i++ {
		if os[i] == '+' {
			return os[:i]
		}
	}
	return os
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
