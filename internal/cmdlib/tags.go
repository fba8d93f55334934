package cmdlib

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
)

// tagUnits are the units of the tag opcodes.
func (p *Processor) tagUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_TAGS_GET", func() LU { return &tagsLU{mode: tagGet} }),
		p.unit("OP_TAGS_SET", func() LU { return &tagsLU{mode: tagSet} }),
		p.unit("OP_TAGS_DEL", func() LU { return &tagsLU{mode: tagDel} }),
		p.unit("OP_TAGS_SEARCH", func() LU { return &tagsSearchLU{} }),
	}
}

type tagMode int

const (
	tagGet tagMode = iota
	tagSet
	tagDel
)

// tagsLU reads or changes the tags of one object. Writers hold the object's
// lock exclusively (the BGL shared), so the tags they checked in Prereq are
// still the tags the step changes; cluster tags live in the cluster object,
// which Corral guards with the BGL, so writing them takes it exclusively.
type tagsLU struct {
	Kind string   `json:"kind"`
	UUID string   `json:"uuid"` // the object; empty for the cluster
	Name string   `json:"name"`
	Tags []string `json:"tags"` // the object's tags after the change (or as read)

	mode   tagMode
	locked string // the lock name taken for the object, checked in Prereq
}

func (lu *tagsLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	mode := locking.Exclusive
	if lu.mode == tagGet {
		if !op.Bool("use_locking") {
			return nil
		}
		mode = locking.Shared
	}
	name := op.Str("name")
	if name == "" && op.Str("kind") != opcodes.TagCluster {
		// Refused by Prereq.
		return []locking.Request{bgl(locking.Shared)}
	}
	switch op.Str("kind") {
	case opcodes.TagCluster:
		return []locking.Request{bgl(mode)}
	case opcodes.TagInstance:
		lu.locked = lockName(p, name)
		return []locking.Request{bgl(locking.Shared), instLock(mode, lu.locked)}
	case opcodes.TagNode:
		if n, ok := p.Cfg.Node(name); ok {
			lu.locked = n.UUID
			return []locking.Request{bgl(locking.Shared), nodeLock(mode, n.UUID)}
		}
	case opcodes.TagNodeGroup:
		if g, ok := p.Cfg.Group(name); ok {
			lu.locked = g.UUID
			return []locking.Request{bgl(locking.Shared), {Level: locking.LevelNodeGroup, Names: []string{g.UUID}, Mode: mode}}
		}
	case opcodes.TagNetwork:
		if n, ok := p.Cfg.Network(name); ok {
			lu.locked = n.UUID
			return []locking.Request{bgl(locking.Shared), netLock(mode, n.UUID)}
		}
	}
	// Unknown objects are reported by Prereq.
	return []locking.Request{bgl(locking.Shared)}
}

func (lu *tagsLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	lu.Kind = op.Str("kind")
	if err := opcodes.ValidateTagKind(lu.Kind); err != nil {
		return err
	}
	cur, err := lu.load(p, op.Str("name"))
	if err != nil {
		return err
	}
	if lu.mode == tagGet {
		lu.Tags = sortedTags(cur)
		return nil
	}
	req := op.Strings("tags")
	for _, t := range req {
		if err := opcodes.ValidateTag(t); err != nil {
			return err
		}
	}
	if lu.mode == tagSet {
		lu.Tags = sortedTags(append(slices.Clone(cur), req...))
		if len(lu.Tags) > opcodes.MaxTagsPerObject {
			return ecode.Errorf(ecode.Inval, "Too many tags: %s would have %d, at most %d are allowed", lu.describe(), len(lu.Tags), opcodes.MaxTagsPerObject)
		}
		return nil
	}
	var missing []string
	for _, t := range sortedTags(req) {
		if !slices.Contains(cur, t) {
			missing = append(missing, "'"+t+"'")
		}
	}
	if len(missing) > 0 {
		return ecode.Errorf(ecode.NoEnt, "Tag(s) %s not found", strings.Join(missing, ", "))
	}
	lu.Tags = slices.DeleteFunc(sortedTags(cur), func(t string) bool { return slices.Contains(req, t) })
	return nil
}

// load finds the object and returns its tags, checking it is the object
// whose lock was taken (a rename or re-creation in between would make the
// lock protect another one).
func (lu *tagsLU) load(p *Processor, name string) ([]string, error) {
	if lu.Kind != opcodes.TagCluster && name == "" {
		return nil, ecode.Errorf(ecode.Inval, "Tag kind %s needs an object name", lu.Kind)
	}
	var tags []string
	var lockedAs string
	switch lu.Kind {
	case opcodes.TagCluster:
		tags = p.Cfg.Cluster().Tags
	case opcodes.TagInstance:
		i, err := p.Cfg.MustInstance(name)
		if err != nil {
			return nil, err
		}
		lu.UUID, lu.Name, lockedAs, tags = i.UUID, i.Name, i.Name, i.Tags
	case opcodes.TagNode:
		n, err := p.Cfg.MustNode(name)
		if err != nil {
			return nil, err
		}
		lu.UUID, lu.Name, lockedAs, tags = n.UUID, n.Name, n.UUID, n.Tags
	case opcodes.TagNodeGroup:
		g, ok := p.Cfg.Group(name)
		if !ok {
			return nil, ecode.Errorf(ecode.NoEnt, "Node group '%s' not found", name)
		}
		lu.UUID, lu.Name, lockedAs, tags = g.UUID, g.Name, g.UUID, g.Tags
	case opcodes.TagNetwork:
		n, err := p.Cfg.MustNetwork(name)
		if err != nil {
			return nil, err
		}
		lu.UUID, lu.Name, lockedAs, tags = n.UUID, n.Name, n.UUID, n.Tags
	}
	if lu.locked != "" && lockedAs != lu.locked {
		return nil, ecode.Errorf(ecode.TempNoRes, "%s changed while this operation waited for its lock; retry", lu.describe())
	}
	return tags, nil
}

func (lu *tagsLU) describe() string {
	if lu.Kind == opcodes.TagCluster {
		return "the cluster"
	}
	return fmt.Sprintf("%s %s", lu.Kind, lu.Name)
}

func (lu *tagsLU) Steps() []Step {
	if lu.mode == tagGet {
		return nil
	}
	return []Step{{"update", func(ctx context.Context, s *StepCtx) error {
		// One commit writes the object with its new tags, its serial number
		// and mtime bumped by the Put.
		tags := slices.Clone(lu.Tags)
		switch lu.Kind {
		case opcodes.TagCluster:
			c := s.Cfg().Cluster()
			c.Tags = tags
			s.Tx().PutCluster(c)
		case opcodes.TagInstance:
			i, ok := s.Cfg().Instance(lu.UUID)
			if !ok {
				return ecode.Errorf(ecode.NoEnt, "Instance %s disappeared", lu.Name)
			}
			i.Tags = tags
			s.Tx().PutInstance(i)
		case opcodes.TagNode:
			n, ok := s.Cfg().Node(lu.UUID)
			if !ok {
				return ecode.Errorf(ecode.NoEnt, "Node %s disappeared", lu.Name)
			}
			n.Tags = tags
			s.Tx().PutNode(n)
		case opcodes.TagNodeGroup:
			g, ok := s.Cfg().Group(lu.UUID)
			if !ok {
				return ecode.Errorf(ecode.NoEnt, "Node group %s disappeared", lu.Name)
			}
			g.Tags = tags
			s.Tx().PutGroup(g)
		case opcodes.TagNetwork:
			n, ok := s.Cfg().Network(lu.UUID)
			if !ok {
				return ecode.Errorf(ecode.NoEnt, "Network %s disappeared", lu.Name)
			}
			n.Tags = tags
			s.Tx().PutNetwork(n)
		}
		return nil
	}}}
}

// Result is the tag list for OP_TAGS_GET and nothing (Ganeti's None) for
// the writers.
func (lu *tagsLU) Result() any {
	if lu.mode != tagGet {
		return nil
	}
	if lu.Tags == nil {
		return []string{}
	}
	return lu.Tags
}

// sortedTags returns the set of tags, sorted: Ganeti keeps tags as a set,
// and a stable order makes answers and the stored object reproducible.
func sortedTags(tags []string) []string {
	out := slices.Clone(tags)
	slices.Sort(out)
	return slices.Compact(out)
}

// tagsSearchLU finds tags matching a pattern across every object; it reads
// the configuration only, so it takes no lock (as in Ganeti).
type tagsSearchLU struct {
	Found [][2]string `json:"found"`
}

func (lu *tagsSearchLU) Locks(p *Processor, op *opcodes.Op) []locking.Request { return nil }

func (lu *tagsSearchLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	pattern := op.Str("pattern")
	re, err := regexp.Compile(pattern)
	if err != nil {
		return ecode.Errorf(ecode.Inval, "Invalid search pattern '%s': %v", pattern, err)
	}
	lu.Found = [][2]string{}
	add := func(path string, tags []string) {
		for _, t := range sortedTags(tags) {
			if re.MatchString(t) {
				lu.Found = append(lu.Found, [2]string{path, t})
			}
		}
	}
	// Ganeti's order: the cluster, instances, nodes, node groups, networks.
	add("/cluster", p.Cfg.Cluster().Tags)
	for _, i := range p.Cfg.Instances() {
		add("/instances/"+i.Name, i.Tags)
	}
	for _, n := range p.Cfg.Nodes() {
		add("/nodes/"+n.Name, n.Tags)
	}
	for _, g := range p.Cfg.Groups() {
		add("/nodegroup/"+g.Name, g.Tags)
	}
	for _, n := range p.Cfg.Networks() {
		add("/network/"+n.Name, n.Tags)
	}
	return nil
}

func (lu *tagsSearchLU) Steps() []Step { return nil }

func (lu *tagsSearchLU) Result() any { return lu.Found }
