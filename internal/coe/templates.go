package coe

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// applyTemplateFields sets the template's fields from the API's names;
// null unsets an optional one. Unknown names are refused.
func applyTemplateFields(t *config.COETemplate, fields map[string]any, allowName bool) error {
	raw, err := json.Marshal(t)
	if err != nil {
		return ecode.ExecErrorf("encoding template: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return ecode.ExecErrorf("decoding template: %w", err)
	}
	for k, v := range fields {
		if !slices.Contains(opcodes.COETemplateFields, k) && !(allowName && k == "name") {
			return ecode.Errorf(ecode.Inval, "Invalid input for field/attribute %s.", k)
		}
		if v == nil {
			delete(m, k)
			continue
		}
		if tags, ok := v.(string); k == "tags" && ok {
			// Magnum's tags are one comma-separated string.
			v = splitTags(tags)
		}
		m[k] = v
	}
	raw, _ = json.Marshal(m)
	var out config.COETemplate
	if err := json.Unmarshal(raw, &out); err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid input for the template's fields: %v", err)
	}
	tags := out.Tags
	out.Meta = t.Meta
	if _, ok := fields["tags"]; ok {
		out.Tags = tags // tags live in Meta, which the rest keeps
	}
	if n, ok := fields["name"].(string); ok && allowName {
		out.Name = n
	}
	*t = out
	return nil
}

// splitTags turns Magnum's "a,b" into the template's list.
func splitTags(s string) []any {
	out := []any{}
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// templateInUse refuses to change or remove a template a cluster uses.
func (d *Deps) templateInUse(t *config.COETemplate) error {
	for _, c := range d.Cfg.COEClusters() {
		if c.Template == t.UUID {
			return ecode.Errorf(ecode.Inval, "ClusterTemplate %s is referenced by one or multiple clusters.", t.UUID)
		}
	}
	return nil
}

type templateCreateUnit struct {
	d        *Deps
	Template *config.COETemplate `json:"template"`
}

func (u *templateCreateUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks("template-name:" + op.Str("name"))
}

func (u *templateCreateUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	t := &config.COETemplate{ProjectID: op.Str("project_id"), UserID: op.Str("user_id"), COE: "kubernetes", ServerType: "vm"}
	t.Name = op.Str("name")
	if id, ok := op.Params["uuid"].(string); ok {
		if _, err := uuid.Parse(id); err != nil {
			return ecode.Errorf(ecode.Inval, "Expected a UUID but received %s.", id)
		}
		if _, dup := u.d.Cfg.COETemplate(id); dup {
			return ecode.Errorf(ecode.Exists, "A ClusterTemplate with UUID %s already exists.", id)
		}
		t.UUID = id
	} else {
		t.UUID = config.NewUUID()
	}
	if err := applyTemplateFields(t, op.Dict("fields"), false); err != nil {
		return err
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if err := u.d.Cfg.CheckCOENameFree("template", t.Name, ""); err != nil {
		return err
	}
	if err := u.d.chooseDriver(t); err != nil {
		return err
	}
	u.Template = t
	return nil
}

func (u *templateCreateUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "add the template", Run: func(ctx context.Context, s *engine.StepCtx) error {
		s.Tx().PutCOETemplate(u.Template.Clone())
		return nil
	}}}
}

func (u *templateCreateUnit) Result() any { return u.Template.UUID }

type templateModifyUnit struct {
	d        *Deps
	Template *config.COETemplate `json:"template"`
}

func (u *templateModifyUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.templateLock(op.Str("cluster_template")))
}

// chooseDriver records the driver of a template's (server_type, os, coe).
// Its os is cluster_distro, or else the image: Magnum reads the image's
// os_distro property, and Corral, with no image service, takes the image
// name for the os (e.g. "kwok").
func (d *Deps) chooseDriver(t *config.COETemplate) error {
	os := t.ClusterDistro
	if os == "" {
		os = t.ImageID
	}
	drv, err := d.Drivers.Choose(t.ServerType, os, t.COE)
	if err != nil {
		return err
	}
	t.Driver = drv.Type()
	return nil
}

func (d *Deps) templateLock(ident string) string {
	if t, ok := d.Cfg.COETemplate(ident); ok {
		return "template:" + t.UUID
	}
	return "template:" + ident
}

// templateFieldsInUse are the fields a template a cluster uses may still
// change (Magnum's list).
var templateFieldsInUse = []string{"name", "public", "hidden", "tags"}

func (u *templateModifyUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	t, err := u.d.Cfg.MustCOETemplate(op.Str("cluster_template"))
	if err != nil {
		return err
	}
	if err := checkProject(op, t.ProjectID, "ClusterTemplate", op.Str("cluster_template")); err != nil {
		return err
	}
	changes := op.Dict("changes")
	for k := range changes {
		if !slices.Contains(templateFieldsInUse, k) {
			if err := u.d.templateInUse(t); err != nil {
				return err
			}
			break
		}
	}
	if err := applyTemplateFields(t, changes, true); err != nil {
		return err
	}
	if err := u.d.Cfg.CheckCOENameFree("template", t.Name, t.UUID); err != nil {
		return err
	}
	if err := u.d.chooseDriver(t); err != nil {
		return err
	}
	u.Template = t
	return nil
}

func (u *templateModifyUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "change the template", Run: func(ctx context.Context, s *engine.StepCtx) error {
		s.Tx().PutCOETemplate(u.Template.Clone())
		return nil
	}}}
}

func (u *templateModifyUnit) Result() any { return u.Template.UUID }

type templateRemoveUnit struct {
	d    *Deps
	UUID string `json:"uuid"`
}

func (u *templateRemoveUnit) Locks(op *opcodes.Op) []locking.Request {
	return coeLocks(u.d.templateLock(op.Str("cluster_template")))
}

func (u *templateRemoveUnit) Prereq(ctx context.Context, op *opcodes.Op) error {
	t, err := u.d.Cfg.MustCOETemplate(op.Str("cluster_template"))
	if err != nil {
		return err
	}
	if err := checkProject(op, t.ProjectID, "ClusterTemplate", op.Str("cluster_template")); err != nil {
		return err
	}
	if err := u.d.templateInUse(t); err != nil {
		return err
	}
	u.UUID = t.UUID
	return nil
}

func (u *templateRemoveUnit) Steps() []engine.Step {
	return []engine.Step{{Name: "remove the template", Run: func(ctx context.Context, s *engine.StepCtx) error {
		if t, ok := u.d.Cfg.COETemplate(u.UUID); ok {
			s.Tx().DeleteCOETemplate(t)
		}
		return nil
	}}}
}

func (u *templateRemoveUnit) Result() any { return nil }
