package opcodes

import (
	"bytes"
	"encoding/json"
)

// Sensitivity says who may see a parameter's value once it is in a job.
type Sensitivity int

const (
	// Public values are shown to every reader of the job.
	Public Sensitivity = iota
	// Private values (Ganeti's osparams_private) are kept in the
	// configuration; job queries show them only to callers with write
	// rights.
	Private
	// Secret values (Ganeti's osparams_secret) are needed only while the op
	// runs: queries never show them, and the job record loses them in the
	// write that records the op's end.
	Secret
)

// Redacted stands for a hidden value, as Ganeti serialises private ones.
const Redacted = "<redacted>"

var redactedJSON = json.RawMessage(`"` + Redacted + `"`)

// Redact returns raw, an opcode as submitted, with the value of every
// parameter whose sensitivity is at least from replaced by Redacted: each
// value of a dict (the names stay, so a reader sees which were given), the
// whole value otherwise. It returns raw itself when nothing is hidden, when
// raw is not a JSON object, or when its OP_ID is unknown.
func (t *Table) Redact(raw json.RawMessage, from Sensitivity) json.RawMessage {
	if from <= Public || !t.mayHold(raw, from) {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	var id string
	if json.Unmarshal(m["OP_ID"], &id) != nil {
		return raw
	}
	d, ok := t.defs[id]
	if !ok {
		return raw
	}
	changed := false
	for i := range d.Params {
		p := &d.Params[i]
		v, ok := m[p.Name]
		if !ok || string(bytes.TrimSpace(v)) == "null" {
			continue
		}
		if p.Ops {
			if r := t.redactOpList(v, from); !bytes.Equal(r, v) {
				m[p.Name], changed = r, true
			}
			continue
		}
		if p.Sensitive < from {
			continue
		}
		if r := redactValue(v); !bytes.Equal(r, v) {
			m[p.Name], changed = r, true
		}
	}
	if !changed {
		return raw
	}
	out, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return out
}

// mayHold is a quick test on the raw text: can raw name a parameter of at
// least sensitivity from? Most opcodes have none, and are not parsed. A
// \u escape could spell a name in another way, so raw with one is parsed.
func (t *Table) mayHold(raw json.RawMessage, from Sensitivity) bool {
	if bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	for _, name := range t.sensitive[from] {
		if bytes.Contains(raw, []byte(`"`+name+`"`)) {
			return true
		}
	}
	return false
}

// redactOpList redacts each opcode of a list of opcodes; a value that is
// not a list is hidden whole.
func (t *Table) redactOpList(v json.RawMessage, from Sensitivity) json.RawMessage {
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return redactedJSON
	}
	changed := false
	for i, it := range items {
		if !t.knownOp(it) {
			// Not an opcode Redact can read: hidden whole if it may
			// name a sensitive parameter.
			if t.mayHold(it, from) {
				items[i], changed = redactedJSON, true
			}
			continue
		}
		if r := t.Redact(it, from); !bytes.Equal(r, it) {
			items[i], changed = r, true
		}
	}
	if !changed {
		return v
	}
	out, err := json.Marshal(items)
	if err != nil {
		return redactedJSON
	}
	return out
}

// knownOp reports whether raw is a JSON object whose OP_ID is in t.
func (t *Table) knownOp(raw json.RawMessage) bool {
	var o struct {
		ID string `json:"OP_ID"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return false
	}
	_, ok := t.defs[o.ID]
	return ok
}

// redactValue hides every value of a dict, or the whole value.
func redactValue(v json.RawMessage) json.RawMessage {
	var dict map[string]json.RawMessage
	if json.Unmarshal(v, &dict) != nil || dict == nil {
		return redactedJSON
	}
	for k := range dict {
		dict[k] = redactedJSON
	}
	out, err := json.Marshal(dict)
	if err != nil {
		return redactedJSON
	}
	return out
}

// RedactJobRows applies RedactOps to the "ops" field of job query rows (in
// the order of fields), in place.
func (t *Table) RedactJobRows(fields []string, rows [][]any, from Sensitivity) {
	for fi, f := range fields {
		if f != "ops" {
			continue
		}
		for _, r := range rows {
			if r != nil && fi < len(r) {
				r[fi] = t.RedactOps(r[fi], from)
			}
		}
	}
}

// RedactOps applies Redact to each op of a job's "ops" field as a query
// answers it: a list whose items are raw opcodes or decoded JSON objects.
// It returns a new list of raw opcodes. What it cannot read is replaced by
// Redacted whole: an answer must never show what it was meant to hide.
func (t *Table) RedactOps(ops any, from Sensitivity) any {
	list, ok := ops.([]any)
	if !ok {
		var raws []json.RawMessage
		b, err := json.Marshal(ops)
		if err != nil || json.Unmarshal(b, &raws) != nil {
			return Redacted
		}
		list = make([]any, len(raws))
		for i := range raws {
			list[i] = raws[i]
		}
	}
	out := make([]any, len(list))
	for i, o := range list {
		raw, isRaw := o.(json.RawMessage)
		if !isRaw {
			b, err := json.Marshal(o)
			if err != nil {
				out[i] = Redacted
				continue
			}
			raw = b
		}
		out[i] = t.Redact(raw, from)
	}
	return out
}
