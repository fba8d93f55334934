package api

import (
	"context"
	"slices"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// The fake backend's federations: created, changed and removed at once,
// with corrald's rules on the host and the members (same project,
// members complete).

func (b *fakeBackend) federation(who Caller, ident string) (*config.COEFederation, error) {
	return resolve(b.feds, ident, "federations", func(f *config.COEFederation) string { return f.Name },
		func(f *config.COEFederation) bool { return Owns(who, f.ProjectID) }, ErrFederationNotFound)
}

// fedMembers resolves members to uuids of complete clusters of project.
func (b *fakeBackend) fedMembers(project string, members []string) ([]string, error) {
	owner := Caller{Project: project}
	var out []string
	for _, m := range members {
		c, err := b.cluster(owner, m)
		if err != nil {
			return nil, err
		}
		if c.Status != "CREATE_COMPLETE" && c.Status != "UPDATE_COMPLETE" {
			return nil, ecode.Errorf(ecode.State, "Cluster %s is in %s.", c.UUID, c.Status)
		}
		out = append(out, c.UUID)
	}
	return out, nil
}

func (b *fakeBackend) ListFederations(ctx context.Context, who Caller) ([]*config.COEFederation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*config.COEFederation
	for _, f := range b.feds {
		if Owns(who, f.ProjectID) {
			out = append(out, f.Clone())
		}
	}
	return out, nil
}

func (b *fakeBackend) GetFederation(ctx context.Context, who Caller, ident string) (*config.COEFederation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.federation(who, ident)
	if err != nil {
		return nil, err
	}
	return f.Clone(), nil
}

func (b *fakeBackend) CreateFederation(ctx context.Context, who Caller, fc FederationCreate) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("federation-create", fc.Name, fc.Host, fc.Members, fc.Properties)
	host, err := b.cluster(Caller{Project: who.Project}, fc.Host)
	if err != nil {
		return err
	}
	members, err := b.fedMembers(who.Project, fc.Members)
	if err != nil {
		return err
	}
	f := &config.COEFederation{ProjectID: who.Project, HostCluster: host.UUID, Members: members,
		Properties: fc.Properties, Status: "CREATE_COMPLETE", StatusReason: "CREATE completed successfully"}
	f.UUID, f.Name = fc.UUID, fc.Name
	f.CTime = b.tick()
	f.MTime = f.CTime
	b.feds = append(b.feds, f)
	return nil
}

func (b *fakeBackend) UpdateFederation(ctx context.Context, who Caller, ident string, changes map[string]any) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.federation(who, ident)
	if err != nil {
		return "", err
	}
	b.record("federation-update", f.UUID, changes)
	if v, ok := changes["member_ids"]; ok {
		members, err := b.fedMembers(f.ProjectID, v.([]string))
		if err != nil {
			return "", err
		}
		f.Members = members
	}
	if v, ok := changes["properties"]; ok {
		f.Properties = v.(map[string]string)
	}
	f.Status, f.MTime = "UPDATE_COMPLETE", b.tick()
	return f.UUID, nil
}

func (b *fakeBackend) DeleteFederation(ctx context.Context, who Caller, ident string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, err := b.federation(who, ident)
	if err != nil {
		return err
	}
	b.record("federation-delete", f.UUID)
	b.feds = slices.DeleteFunc(b.feds, func(x *config.COEFederation) bool { return x == f })
	return nil
}
