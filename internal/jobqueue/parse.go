package jobqueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Ganeti's priority range: lower runs first.
const (
	PrioHighest = -20
	PrioLowest  = 19
	PrioDefault = 0
)

// OpParams are the common parameters the queue reads from a submitted
// opcode. Everything else in the opcode belongs to the logical unit.
type OpParams struct {
	OpID     string
	Priority int
	// Depends holds the ids as submitted: negative ids are relative to the
	// job's position in its submission and are resolved by the queue.
	Depends []Dependency
	Comment string
	Reason  json.RawMessage // Ganeti's reason trail, kept opaque
}

// ParseOp reads the common parameters of one submitted opcode. The opcode
// must be a JSON object with a string OP_ID; priority must be an integer
// in Ganeti's range; depends a list of [job_id, [final statuses]].
func ParseOp(input json.RawMessage) (OpParams, error) {
	var p OpParams
	trimmed := bytes.TrimSpace(input)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return p, ecode.Errorf(ecode.Inval, "opcode must be a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return p, ecode.Errorf(ecode.Inval, "invalid opcode: %v", err)
	}
	rawID, ok := fields["OP_ID"]
	if !ok {
		return p, ecode.Errorf(ecode.Inval, "opcode has no OP_ID")
	}
	if err := json.Unmarshal(rawID, &p.OpID); err != nil || p.OpID == "" {
		return p, ecode.Errorf(ecode.Inval, "OP_ID must be a non-empty string")
	}
	if raw, ok := fields["priority"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &p.Priority); err != nil {
			return p, ecode.Errorf(ecode.Inval, "priority must be an integer, got %s", truncate(raw))
		}
		if p.Priority < PrioHighest || p.Priority > PrioLowest {
			return p, ecode.Errorf(ecode.Inval, "priority %d out of range [%d, %d]", p.Priority, PrioHighest, PrioLowest)
		}
	}
	if raw, ok := fields["depends"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &p.Depends); err != nil {
			return p, ecode.Errorf(ecode.Inval, "invalid depends: %v", err)
		}
		for _, d := range p.Depends {
			for _, s := range d.Statuses {
				if !s.Finalized() {
					return p, ecode.Errorf(ecode.Inval, "invalid depends: status %q is not one of canceled, success, error", s)
				}
			}
		}
	}
	if raw, ok := fields["comment"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &p.Comment); err != nil {
			return p, ecode.Errorf(ecode.Inval, "comment must be a string")
		}
	}
	if raw, ok := fields["reason"]; ok && !isNull(raw) {
		var trail []json.RawMessage
		if err := json.Unmarshal(raw, &trail); err != nil {
			return p, ecode.Errorf(ecode.Inval, "reason must be a list")
		}
		p.Reason = raw
	}
	return p, nil
}

// resolveDepends turns relative ids (negative: -1 is the previous job of
// the same submission) into absolute ones. ids holds the ids given to the
// jobs of the submission, pos the position of the job being resolved.
func resolveDepends(deps []Dependency, ids []int64, pos int) ([]Dependency, error) {
	if len(deps) == 0 {
		return nil, nil
	}
	out := make([]Dependency, len(deps))
	for i, d := range deps {
		if d.JobID < 0 {
			p := pos + int(d.JobID)
			if p < 0 || int64(p) != int64(pos)+d.JobID {
				return nil, ecode.Errorf(ecode.Inval, "Unable to resolve relative job ID %d", d.JobID)
			}
			d.JobID = ids[p]
		}
		out[i] = d
	}
	return out, nil
}

// defaultSummary is the OP_ID without its "OP_" prefix.
func defaultSummary(opID string, _ json.RawMessage) string {
	return strings.TrimPrefix(opID, "OP_")
}

func statusList(st []Status) string {
	s := make([]string, len(st))
	for i, v := range st {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// opIDOf extracts OP_ID from a stored input for display; stored inputs were
// validated at submission, so failure only means a damaged record.
func opIDOf(input json.RawMessage) string {
	var v struct {
		OpID string `json:"OP_ID"`
	}
	if err := json.Unmarshal(input, &v); err != nil {
		return ""
	}
	return v.OpID
}

func errorf(format string, args ...any) error { return fmt.Errorf("jobqueue: "+format, args...) }
