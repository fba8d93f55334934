package iallocator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/corral/corral/internal/ecode"
)

// Answer is an allocator's reply to a Document, checked against the
// request's mode.
type Answer struct {
	Success bool
	Info    string
	// Nodes is the result of allocate and relocate: node names.
	Nodes []string
	// Multi is the result of multi-allocate.
	Multi *MultiResult
	// Evac is the result of node-evacuate and change-group.
	Evac *EvacResult
}

// MultiResult is a multi-allocate result: the instances placed with their
// nodes, and the names of those that could not be.
type MultiResult struct {
	Allocated []Placement
	Failed    []string
}

// Placement is one instance and its nodes.
type Placement struct {
	Name  string
	Nodes []string
}

// EvacResult is a node-evacuate or change-group result.
type EvacResult struct {
	Moved  []Moved
	Failed []Failed
	// Jobs are the jobs to submit, each a list of opcodes (JSON objects
	// with their OP_ID), in order.
	Jobs [][]json.RawMessage
}

// Moved is an instance the allocator found new nodes for.
type Moved struct {
	Name  string
	Group string
	Nodes []string
}

// Failed is an instance the allocator could not move, with its reason.
type Failed struct {
	Name   string
	Reason string
}

// ParseAnswer reads an allocator's output for doc. An answer that is not
// the JSON object of the protocol, or whose result does not have the
// mode's shape, is an OpExecError; a well-formed "success": false answer
// is returned as it is.
func ParseAnswer(doc *Document, out []byte) (*Answer, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, ecode.ExecErrorf("Can't parse iallocator results: %w", err)
	}
	if _, ok := raw["result"]; !ok && raw["nodes"] != nil {
		raw["result"] = raw["nodes"] // the protocol's old name
	}
	for _, k := range []string{"success", "info", "result"} {
		if _, ok := raw[k]; !ok {
			return nil, ecode.ExecErrorf("Can't parse iallocator results: missing key '%s'", k)
		}
	}
	a := &Answer{}
	if err := json.Unmarshal(raw["success"], &a.Success); err != nil {
		return nil, ecode.ExecErrorf("Can't parse iallocator results: success: %w", err)
	}
	if err := json.Unmarshal(raw["info"], &a.Info); err != nil {
		return nil, ecode.ExecErrorf("Can't parse iallocator results: info: %w", err)
	}
	if !a.Success {
		return a, nil
	}
	if err := a.parseResult(doc, raw["result"]); err != nil {
		return nil, ecode.ExecErrorf("iallocator returned invalid result for %s: %w", describe(doc.Request), err)
	}
	return a, nil
}

func (a *Answer) parseResult(doc *Document, res json.RawMessage) error {
	switch r := doc.Request.(type) {
	case *Allocate:
		if err := strictUnmarshal(res, &a.Nodes); err != nil {
			return err
		}
		if len(a.Nodes) != r.RequiredNodes() {
			return fmt.Errorf("%d nodes returned, %d required", len(a.Nodes), r.RequiredNodes())
		}
		return knownNodes(doc.Cluster, a.Nodes)
	case *Relocate:
		if err := strictUnmarshal(res, &a.Nodes); err != nil {
			return err
		}
		return checkRelocateGroups(doc.Cluster, r, a.Nodes)
	case *MultiAllocate:
		return a.parseMulti(doc.Cluster, res)
	case *NodeEvacuate, *ChangeGroup:
		return a.parseEvac(res)
	}
	return fmt.Errorf("unknown request mode %s", doc.Request.Mode())
}

func (a *Answer) parseMulti(c *Cluster, res json.RawMessage) error {
	var pair []json.RawMessage
	if err := strictUnmarshal(res, &pair); err != nil || len(pair) != 2 {
		return fmt.Errorf("multi-allocate result must be [allocated, failed]")
	}
	var allocated [][]json.RawMessage
	if err := strictUnmarshal(pair[0], &allocated); err != nil {
		return fmt.Errorf("allocated list: %w", err)
	}
	m := &MultiResult{}
	for _, e := range allocated {
		var p Placement
		if len(e) != 2 || strictUnmarshal(e[0], &p.Name) != nil || strictUnmarshal(e[1], &p.Nodes) != nil || p.Name == "" {
			return fmt.Errorf("allocated entries must be [name, [nodes]]")
		}
		if err := knownNodes(c, p.Nodes); err != nil {
			return err
		}
		m.Allocated = append(m.Allocated, p)
	}
	if err := strictUnmarshal(pair[1], &m.Failed); err != nil {
		return fmt.Errorf("failed list: %w", err)
	}
	a.Multi = m
	return nil
}

func (a *Answer) parseEvac(res json.RawMessage) error {
	var triple []json.RawMessage
	if err := strictUnmarshal(res, &triple); err != nil || len(triple) != 3 {
		return fmt.Errorf("evacuation result must be [moved, failed, jobs]")
	}
	e := &EvacResult{}
	var moved [][]json.RawMessage
	if err := strictUnmarshal(triple[0], &moved); err != nil {
		return fmt.Errorf("moved list: %w", err)
	}
	for _, m := range moved {
		var mv Moved
		if len(m) != 3 || strictUnmarshal(m[0], &mv.Name) != nil || strictUnmarshal(m[1], &mv.Group) != nil ||
			strictUnmarshal(m[2], &mv.Nodes) != nil || mv.Name == "" {
			return fmt.Errorf("moved entries must be [name, group, [nodes]]")
		}
		e.Moved = append(e.Moved, mv)
	}
	var failed [][]json.RawMessage
	if err := strictUnmarshal(triple[1], &failed); err != nil {
		return fmt.Errorf("failed list: %w", err)
	}
	for _, f := range failed {
		var fl Failed
		var reason *string
		if len(f) != 2 || strictUnmarshal(f[0], &fl.Name) != nil || strictUnmarshal(f[1], &reason) != nil || fl.Name == "" {
			return fmt.Errorf("failed entries must be [name, reason]")
		}
		if reason != nil {
			fl.Reason = *reason
		}
		e.Failed = append(e.Failed, fl)
	}
	if err := strictUnmarshal(triple[2], &e.Jobs); err != nil {
		return fmt.Errorf("jobs list: %w", err)
	}
	for i, job := range e.Jobs {
		for j, op := range job {
			var o struct {
				ID string `json:"OP_ID"`
			}
			if err := json.Unmarshal(op, &o); err != nil || o.ID == "" {
				return fmt.Errorf("job %d opcode %d is not an opcode object", i, j)
			}
		}
	}
	a.Evac = e
	return nil
}

// strictUnmarshal refuses null where a list or string is expected.
func strictUnmarshal(b json.RawMessage, v any) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return fmt.Errorf("null where a value was expected")
	}
	return json.Unmarshal(b, v)
}

func knownNodes(c *Cluster, names []string) error {
	for _, n := range names {
		if c.node(n) == nil {
			return fmt.Errorf("unknown node %q", n)
		}
	}
	return nil
}

// checkRelocateGroups holds a relocation to the groups of the nodes it
// moves from and the instance's primary, as Ganeti does.
func checkRelocateGroups(c *Cluster, r *Relocate, nodes []string) error {
	if err := knownNodes(c, nodes); err != nil {
		return err
	}
	groups := func(names []string) []string {
		seen := map[string]bool{}
		for _, n := range names {
			if nd := c.node(n); nd != nil {
				seen[c.groupName(nd.Group)] = true
			}
		}
		return sortedKeys(seen)
	}
	var primary []string
	if i := c.instance(r.Name); i != nil && len(i.Nodes) > 0 {
		primary = i.Nodes[:1]
	}
	want := groups(append(slices.Clone(r.RelocateFrom), primary...))
	for _, g := range groups(append(slices.Clone(nodes), primary...)) {
		if !slices.Contains(want, g) {
			return fmt.Errorf("groups of the nodes returned (%s) differ from the original groups (%v)", g, want)
		}
	}
	return nil
}
