package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/corral/corral/internal/jsonpatch"
)

// fieldKind is the JSON type a request field takes.
type fieldKind int

const (
	kindString fieldKind = iota
	kindInt
	kindBool
	kindLabels     // object of strings
	kindStringList // list of strings
)

// readBody reads the request body up to maxBodyBytes: 413 beyond it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "Request is too large: the limit is %d bytes.", maxBodyBytes)
	}
	if err != nil {
		return nil, badRequest("Reading the request body failed.")
	}
	return data, nil
}

// decodeFields parses a JSON object body whose members are all in kinds,
// checking each member's type; null members are left out (Magnum treats
// them as unset). Unknown members are refused as wsme does (400).
func decodeFields(body []byte, kinds map[string]fieldKind) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("The request body is empty; a JSON object is expected.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, badRequest("The request body must be a JSON object.")
	}
	if dec.More() {
		return nil, badRequest("The request body has data after its JSON object.")
	}
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		kind, ok := kinds[k]
		if !ok {
			return nil, badRequest("Unknown attribute for argument body: %s", k)
		}
		if obj[k] == nil {
			continue
		}
		v, err := checkKind(k, obj[k], kind)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

// checkKind checks v (as a json.Decoder with UseNumber, or a plain one,
// decodes it) against kind and returns it in the form the opcodes take:
// integers as int, labels as map[string]string.
func checkKind(name string, v any, kind fieldKind) (any, error) {
	bad := func() error {
		return badRequest("Invalid input for field/attribute %s. Value: %s. Wrong type.", name, shortJSON(v))
	}
	switch kind {
	case kindString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case kindBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case kindInt:
		switch n := v.(type) {
		case json.Number:
			i, err := n.Int64()
			if err == nil && i >= -1<<31 && i < 1<<31 {
				return int(i), nil
			}
		case float64:
			if n == float64(int32(n)) {
				return int(n), nil
			}
		case int:
			return n, nil
		}
	case kindLabels:
		if m, ok := v.(map[string]string); ok {
			return m, nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, bad()
		}
		out := make(map[string]string, len(m))
		for k, lv := range m {
			s, ok := lv.(string)
			if !ok {
				return nil, bad()
			}
			out[k] = s
		}
		return out, nil
	case kindStringList:
		if l, ok := v.([]string); ok {
			return l, nil
		}
		l, ok := v.([]any)
		if !ok {
			return nil, bad()
		}
		out := make([]string, 0, len(l))
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, bad()
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, bad()
}

// shortJSON shows a value in an error, cut short.
func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// patchChanges applies a JSON-patch body to doc (an object's view) and
// returns the top-level fields it changed with their new values (nil:
// removed), each checked against allowed; a path outside allowed is a 400
// as Magnum's, naming it.
func patchChanges(body []byte, doc map[string]any, allowed map[string]fieldKind) (map[string]any, error) {
	ops, err := jsonpatch.Decode(body)
	if err != nil {
		return nil, badRequest("Invalid JSON patch: %s", err.Error())
	}
	doc = jsonpatch.Clone(doc).(map[string]any) // plain JSON values only
	for _, op := range ops {
		for _, p := range []string{op.Path, op.From} {
			if p == "" {
				continue
			}
			if _, ok := allowed[jsonpatch.Field(p)]; !ok {
				return nil, badRequest("Cannot update attribute %s: it is not allowed to change.", jsonpatch.Field(p))
			}
		}
		if op.Op == "replace" || op.Op == "remove" {
			// Magnum adds a missing attribute on replace; an unset
			// field of the view is there as null.
			if _, ok := doc[jsonpatch.Field(op.Path)]; !ok {
				doc[jsonpatch.Field(op.Path)] = nil
			}
		}
	}
	before := jsonpatch.Clone(doc).(map[string]any)
	out, err := jsonpatch.Apply(doc, ops)
	if err != nil {
		return nil, badRequest("%s", err.Error())
	}
	after, ok := out.(map[string]any)
	if !ok {
		return nil, badRequest("The patch must leave an object.")
	}
	changes := map[string]any{}
	for k := range allowed {
		nv, had := after[k]
		if reflect.DeepEqual(before[k], nv) && had {
			continue
		}
		if !had || nv == nil {
			if before[k] != nil {
				changes[k] = nil
			}
			continue
		}
		v, err := checkKind(k, nv, allowed[k])
		if err != nil {
			return nil, err
		}
		changes[k] = v
	}
	if len(changes) == 0 {
		return nil, badRequest("The patch changes nothing.")
	}
	return changes, nil
}

// trueish reads a query flag as Magnum does ("True", "true", "1").
func trueish(s string) bool {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on":
		return true
	}
	return false
}
