package coe

import (
	"context"
	"slices"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// Federations are Magnum's record of clusters grouped under a host
// cluster, with properties (the dns-zone). Corral keeps the record and
// its rules (the host exists, every member is a cluster of the
// federation's project that is complete, no member twice); it runs no
// federation control plane in the host cluster, as Magnum's conductor
// runs none either. Each change is a job of two steps: the federation's
// <Action>_IN_PROGRESS, then the clusters checked again and
// <Action>_COMPLETE, or <Action>_FAILED with the reason.

// FederationDNSZone is the one property a federation must have.
const FederationDNSZone = "dns-zone"

// joinable are the statuses a cluster joins a federation in.
var joinable = []string{"CREATE_COMPLETE", "UPDATE_COMPLETE"}

// federationLock names a federation's lock (its uuid when known).
func (d *Deps) federationLock(ident string) string {
	if f, ok := d.Cfg.COEFederation(ident); ok {
		return "federation:" + f.UUID
	}
	return "federation:" + ident
}

// federationCluster finds a cluster a federation of project names: a
// cluster of another project (or of none) is not found; a federation of
// no project (made at the command line) may name any.
func (d *Deps) federationCluster(project, ident string) (*config.COECluster, error) {
	c, err := d.Cfg.MustCOECluster(ident)
	if err != nil {
		return nil, err
	}
	if project != "" && c.ProjectID != project {
		return nil, ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", ident)
	}
	return c, nil
}

// checkFederationClusters resolves the host and the members of a
// federation of project to uuids; a member not in had (the members
// before) must be complete. A member named twice is refused.
func (d *Deps) checkFederationClusters(f *config.COEFederation, members, had []string) error {
	host, err := d.federationCluster(f.ProjectID, f.HostCluster)
	if err != nil {
		return err
	}
	f.HostCluster = host.UUID
	out := make([]string, 0, len(members))
	for _, m := range members {
		c, err := d.federationCluster(f.ProjectID, m)
		if err != nil {
			return err
		}
		if slices.Contains(out, c.UUID) {
			return ecode.Errorf(ecode.Exists, "A cluster with UUID %s is already a member of the federation %s.", c.UUID, f.Name)
		}
		if !slices.Contains(had, c.UUID) && !slices.Contains(joinable, c.Status) {
			return ecode.Errorf(ecode.State, "Cluster %s is in %s: only a cluster in CREATE_COMPLETE or UPDATE_COMPLETE joins a federation.", c.UUID, c.Status)
		}
		out = append(out, c.UUID)
	}
	f.Members = out
	return nil
}

// leaveFederations drops a removed cluster from every federation's
// members, in the removal's transaction. A federation it hosts keeps
// naming it: Magnum has no rule for that, and its delete is the owner's.
func (d *Deps) leaveFederations(tx *confdb.Tx, cluster string) {
	for _, f := range d.Cfg.COEFederations() {
		if i := slices.Index(f.Members, cluster); i >= 0 {
			f.Members = slices.Delete(f.Members, i, i+1)
			tx.PutCOEFederation(f)
		}
	}
}

// checkFederationProperties requires the dns-zone, as Magnum's API does.
func checkFederationProperties(p map[string]string) error {
	if p == nil {
		return ecode.Errorf(ecode.Inval, "Please specify a `properties` dict for the federation.")
	}
	if p[FederationDNSZone] == "" {
		return ecode.Errorf(ecode.Inval, "No DNS zone specified. Please specify a `dns-zone`.")
	}
	return nil
}

// stringDict reads an opcode's dict of strings.
func stringDict(v any, what string) (map[string]string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "Invalid input for field/attribute %s: a dict of strings is expected.", what)
	}
	out := make(map[string]string, len(m))
	for k, e := range m {
		s, ok := e.(string)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "Invalid input for field/attribute %s: the value of %s is not a string.", what, k)
		}
		out[k] = s
	}
	return out, nil
}

// federationSteps are a federation job's steps: record the action in
// progress (with the new fields), then check again that the clusters are
// still there and the project's (Prereq checked the joining ones were
// complete; one resized since stays) and record it complete.
func (d *Deps) federationSteps(f **config.COEFederation, action string) []engine.Step {
	return []engine.Step{
		{Name: "record " + action + "_IN_PROGRESS", Run: func(ctx context.Context, s *engine.StepCtx) error {
			n := (*f).Clone()
			if cur, ok := d.Cfg.COEFederation(n.UUID); ok {
				n.Meta = cur.Meta
			}
			n.Status, n.StatusReason = action+"_IN_PROGRESS", ""
			s.Tx().PutCOEFederation(n)
			return nil
		}},
		{Name: "check the clusters and record " + action + "_COMPLETE", Run: func(ctx context.Context, s *engine.StepCtx) error {
			cur, ok := d.Cfg.COEFederation((*f).UUID)
			if !ok {
				return ecode.ExecErrorf("federation %s was removed during the job", (*f).UUID)
			}
			if err := d.checkFederationClusters(cur, cur.Members, cur.Members); err != nil {
				return err
			}
			cur.Status, cur.StatusReason = action+"_COMPLETE", action+" completed successfully"
			s.Tx().PutCOEFederation(cur)
			return nil
		}},
	}
}

// failFederation records <action>_FAILED with the reason.
func (d *Deps) failFederation(s *engine.StepCtx, id, action string, failed error) {
	f, ok := d.Cfg.COEFederation(id)
	if !ok {
		return
	}
	f.Status, f.StatusReason = action+"_FAILED", reason(failed)
	s.Tx().PutCOEFederation(f)
}

type federationCreateUnit struct {
	d          *Deps
	Federation *config.COEFederation `json:"federation"`
}

func (u *federationCreateUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks("federation-name:" + op.Str("name"))
}

func (u *federationCreateUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	f := &config.COEFederation{ProjectID: op.Str("project_id"), HostCluster: op.Str("hostcluster_id")}
	f.Name = op.Str("name")
	if id, ok := op.Params["uuid"].(string); ok {
		if _, err := uuid.Parse(id); err != nil {
			return ecode.Errorf(ecode.Inval, "Expected a UUID but received %s.", id)
		}
		if _, dup := u.d.Cfg.COEFederation(id); dup {
			return ecode.Errorf(ecode.Exists, "A federation with UUID %s already exists.", id)
		}
		f.UUID = id
	} else {
		f.UUID = config.NewUUID()
	}
	if err := u.d.Cfg.CheckCOENameFree("federation", f.Name, ""); err != nil {
		return err
	}
	props, err := stringDict(op.Params["properties"], "properties")
	if err != nil {
		return err
	}
	if err := checkFederationProperties(props); err != nil {
		return err
	}
	f.Properties = props
	if err := u.d.checkFederationClusters(f, op.Strings("member_ids"), nil); err != nil {
		return err
	}
	u.Federation = f
	return nil
}

func (u *federationCreateUnit) Steps() []engine.Step {
	return u.d.federationSteps(&u.Federation, "CREATE")
}

func (u *federationCreateUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.d.failFederation(s, u.Federation.UUID, "CREATE", failed)
}

func (u *federationCreateUnit) Result() any { return u.Federation.UUID }

type federationModifyUnit struct {
	d          *Deps
	Federation *config.COEFederation `json:"federation"`
}

func (u *federationModifyUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.federationLock(op.Str("federation")))
}

// ownFederation finds the federation op names, of the caller's project.
func (d *Deps) ownFederation(op *opcodes.Op) (*config.COEFederation, error) {
	f, err := d.Cfg.MustCOEFederation(op.Str("federation"))
	if err != nil {
		return nil, err
	}
	if err := checkProject(op, f.ProjectID, "Federation", op.Str("federation")); err != nil {
		return nil, err
	}
	if f.Status == "CREATE_IN_PROGRESS" || f.Status == "UPDATE_IN_PROGRESS" || f.Status == "DELETE_IN_PROGRESS" {
		return nil, ecode.Errorf(ecode.State, "Federation %s is in %s; retry once that is done.", f.UUID, f.Status)
	}
	return f, nil
}

func (u *federationModifyUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	f, err := u.d.ownFederation(op)
	if err != nil {
		return err
	}
	had := slices.Clone(f.Members)
	members := f.Members
	for k, v := range op.Dict("changes") {
		switch k {
		case "member_ids":
			members = nil
			if v != nil {
				l, ok := v.([]any)
				if !ok {
					return ecode.Errorf(ecode.Inval, "Invalid input for field/attribute member_ids: a list of cluster ids is expected.")
				}
				for _, e := range l {
					s, ok := e.(string)
					if !ok {
						return ecode.Errorf(ecode.Inval, "Invalid input for field/attribute member_ids: a list of cluster ids is expected.")
					}
					members = append(members, s)
				}
			}
		case "properties":
			var props map[string]string
			if v != nil {
				if props, err = stringDict(v, "properties"); err != nil {
					return err
				}
			}
			if err := checkFederationProperties(props); err != nil {
				return err
			}
			f.Properties = props
		default:
			return ecode.Errorf(ecode.Inval, "cannot change federation property(ies) %s.", k)
		}
	}
	if err := u.d.checkFederationClusters(f, members, had); err != nil {
		return err
	}
	u.Federation = f
	return nil
}

func (u *federationModifyUnit) Steps() []engine.Step {
	return u.d.federationSteps(&u.Federation, "UPDATE")
}

func (u *federationModifyUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.d.failFederation(s, u.Federation.UUID, "UPDATE", failed)
}

func (u *federationModifyUnit) Result() any { return u.Federation.UUID }

type federationRemoveUnit struct {
	d  *Deps
	ID string `json:"federation"`
}

func (u *federationRemoveUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.federationLock(op.Str("federation")))
}

func (u *federationRemoveUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	f, err := u.d.Cfg.MustCOEFederation(op.Str("federation"))
	if err != nil {
		return err
	}
	if err := checkProject(op, f.ProjectID, "Federation", op.Str("federation")); err != nil {
		return err
	}
	u.ID = f.UUID
	return nil
}

func (u *federationRemoveUnit) Steps() []engine.Step {
	return []engine.Step{
		{Name: "record DELETE_IN_PROGRESS", Run: func(ctx context.Context, s *engine.StepCtx) error {
			f, ok := u.d.Cfg.COEFederation(u.ID)
			if !ok {
				return nil
			}
			f.Status, f.StatusReason = "DELETE_IN_PROGRESS", ""
			s.Tx().PutCOEFederation(f)
			return nil
		}},
		{Name: "remove the federation", Run: func(ctx context.Context, s *engine.StepCtx) error {
			if f, ok := u.d.Cfg.COEFederation(u.ID); ok {
				s.Tx().DeleteCOEFederation(f)
			}
			return nil
		}},
	}
}

func (u *federationRemoveUnit) Revert(ctx context.Context, s *engine.StepCtx, failed error) {
	u.d.failFederation(s, u.ID, "DELETE", failed)
}

func (u *federationRemoveUnit) Result() any { return nil }
