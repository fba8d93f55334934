package k8sbm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// kubeNodeNameRE is what a machine's name must be to name its kube node
// (a DNS-1123 subdomain).
var kubeNodeNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// keyImageSource is the instance_info key the deploy writes the image of.
const keyImageSource = "image_source"

// claimAttempts is how often a claim is tried again when another writer
// changed a machine between the choice and the commit.
const claimAttempts = 5

// eligible says whether m may become a worker of a group asking for
// resourceClass ("" takes any): available, free (no instance, no action
// under way, not in maintenance), named as a kube node can be.
func eligible(m *config.Machine, resourceClass string) bool {
	return m.ProvisionState == string(states.Available) && m.InstanceUUID == "" && m.Reservation == "" &&
		!m.Maintenance && (resourceClass == "" || m.ResourceClass == resourceClass) &&
		len(m.Name) <= 253 && kubeNodeNameRE.MatchString(m.Name)
}

// chooseMachines picks n eligible machines, by name so that the choice
// is stable; too few is an ecode.NoRes error saying how many are needed
// and available.
func chooseMachines(ms []*config.Machine, resourceClass string, n int, group string) ([]*config.Machine, error) {
	var free []*config.Machine
	for _, m := range ms {
		if eligible(m, resourceClass) {
			free = append(free, m)
		}
	}
	if len(free) < n {
		class := "of any resource class"
		if resourceClass != "" {
			class = fmt.Sprintf("of resource class %q", resourceClass)
		}
		return nil, ecode.Errorf(ecode.NoRes, "node group %s needs %d more bare-metal machines %s in state available with no instance; %d are",
			group, n, class, len(free))
	}
	slices.SortFunc(free, func(a, b *config.Machine) int { return strings.Compare(a.Name, b.Name) })
	return free[:n], nil
}

// machinesOf are the machines claimed by a group (instance_uuid is the
// group's uuid), by name.
func machinesOf(ms []*config.Machine, groupUUID string) []*config.Machine {
	var out []*config.Machine
	for _, m := range ms {
		if groupUUID != "" && m.InstanceUUID == groupUUID {
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b *config.Machine) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// claimMachines claims n machines for the group in one transaction of
// its own: their instance_uuid becomes the group's uuid and their
// instance_info/image_source the image. The commit is conditional on the
// machines being as they were read, so two claims never take the same
// machine: the one that loses chooses again.
func claimMachines(ctx context.Context, db *confdb.DB, g *config.COENodeGroup, resourceClass, image string, n int) ([]*config.Machine, error) {
	if n <= 0 {
		return nil, nil
	}
	var err error
	for range claimAttempts {
		var picked []*config.Machine
		if picked, err = chooseMachines(db.Machines(), resourceClass, n, g.Name); err != nil {
			return nil, err
		}
		tx := db.Begin()
		for _, m := range picked {
			m.InstanceUUID = g.UUID
			if m.InstanceInfo == nil {
				m.InstanceInfo = map[string]any{}
			}
			m.InstanceInfo[keyImageSource] = image
			tx.PutMachine(m)
		}
		if err = db.Commit(ctx, tx); err == nil {
			return picked, nil
		}
		if !errors.Is(err, confdb.ErrConflict) {
			return nil, fmt.Errorf("claiming machines for node group %s: %w", g.Name, err)
		}
	}
	return nil, fmt.Errorf("claiming machines for node group %s: %w", g.Name, err)
}

// releaseMachine gives a machine back to the pool once it is available
// again: no instance_uuid, no image. A machine another group or nobody
// holds is left alone.
func releaseMachine(ctx context.Context, db *confdb.DB, uuid, groupUUID string) error {
	for range claimAttempts {
		m, ok := db.Machine(uuid)
		if !ok || m.InstanceUUID != groupUUID {
			return nil
		}
		m.InstanceUUID = ""
		delete(m.InstanceInfo, keyImageSource)
		tx := db.Begin()
		tx.PutMachine(m)
		err := db.Commit(ctx, tx)
		if err == nil {
			return nil
		}
		if !errors.Is(err, confdb.ErrConflict) {
			return fmt.Errorf("releasing machine %s: %w", m.Name, err)
		}
	}
	return ecode.Errorf(ecode.TempNoRes, "releasing machine %s: the machine kept changing", uuid)
}

// machineState sorts a machine's provision state for the waits.
type machineState int

const (
	statePending machineState = iota // an action is under way
	stateActive
	stateAvailable
	stateFailed
)

func stateOf(m *config.Machine) machineState {
	s := states.State(m.ProvisionState)
	switch {
	case m.Reservation != "":
		return statePending
	case s == states.Active:
		return stateActive
	case s == states.Available:
		return stateAvailable
	case states.Failure(s) || s == states.Error:
		return stateFailed
	}
	return statePending
}

// failure is why a machine failed, for a status reason.
func failure(m *config.Machine) string {
	if m.LastError != "" {
		return fmt.Sprintf("machine %s is %s: %s", m.Name, m.ProvisionState, m.LastError)
	}
	return fmt.Sprintf("machine %s is %s", m.Name, m.ProvisionState)
}
