// Package jsonpatch applies JSON patches (RFC 6902) to documents as
// encoding/json decodes them: the PATCH bodies of the OpenStack-style APIs.
package jsonpatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Op is one operation of a JSON patch (RFC 6902).
type Op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"`
}

// Decode parses a PATCH body: a JSON list of operations, each with a
// known op and a path, a value where the op needs one and a from where it
// needs one.
func Decode(body []byte) ([]Op, error) {
	var raw []map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("the patch must be a JSON list of operations: %w", err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("the patch has no operations")
	}
	ops := make([]Op, len(raw))
	for i, r := range raw {
		op := &ops[i]
		for k, v := range r {
			var err error
			switch k {
			case "op":
				err = json.Unmarshal(v, &op.Op)
			case "path":
				err = json.Unmarshal(v, &op.Path)
			case "from":
				err = json.Unmarshal(v, &op.From)
			case "value":
				op.Value = v
			default:
				return nil, fmt.Errorf("patch operation %d: unknown member %q", i, k)
			}
			if err != nil {
				return nil, fmt.Errorf("patch operation %d: %s must be a string", i, k)
			}
		}
		if _, ok := r["path"]; !ok {
			return nil, fmt.Errorf("patch operation %d has no path", i)
		}
		if !strings.HasPrefix(op.Path, "/") {
			return nil, fmt.Errorf("patch operation %d: path %q must start with /", i, op.Path)
		}
		switch op.Op {
		case "add", "replace", "test":
			if _, ok := r["value"]; !ok {
				return nil, fmt.Errorf("patch operation %d (%s) has no value", i, op.Op)
			}
		case "remove":
		case "move", "copy":
			if _, ok := r["from"]; !ok {
				return nil, fmt.Errorf("patch operation %d (%s) has no from", i, op.Op)
			}
		default:
			return nil, fmt.Errorf("patch operation %d: unknown op %q", i, op.Op)
		}
	}
	return ops, nil
}

// Field is the top-level member a patch operation's path names
// ("/driver_info/ipmi_address" → "driver_info").
func Field(path string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return unescapePointer(first)
}

// Apply applies ops in order to doc, a tree of JSON values as
// encoding/json decodes them, changing it in place, and returns the
// result. It stops at the first operation that cannot be applied, naming
// it; doc is then partly changed, so callers patch a copy.
func Apply(doc any, ops []Op) (any, error) {
	for i, op := range ops {
		var err error
		doc, err = applyOp(doc, op)
		if err != nil {
			return nil, fmt.Errorf("couldn't apply patch operation %d (%s %s): %w", i, op.Op, op.Path, err)
		}
	}
	return doc, nil
}

func applyOp(doc any, op Op) (any, error) {
	tokens, err := splitPointer(op.Path)
	if err != nil {
		return nil, err
	}
	var value any
	if op.Value != nil {
		if err := decodeValue(op.Value, &value); err != nil {
			return nil, fmt.Errorf("bad value: %w", err)
		}
	}
	switch op.Op {
	case "add":
		return modify(doc, tokens, func(c any, k string) (any, error) { return addAt(c, k, value) })
	case "remove":
		return modify(doc, tokens, removeAt)
	case "replace":
		return modify(doc, tokens, func(c any, k string) (any, error) {
			if _, err := getAt(c, k); err != nil {
				return nil, err
			}
			return setAt(c, k, value)
		})
	case "test":
		got, err := get(doc, tokens)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(got, value) {
			return nil, fmt.Errorf("test failed: the value differs")
		}
		return doc, nil
	case "move", "copy":
		from, err := splitPointer(op.From)
		if err != nil {
			return nil, err
		}
		v, err := get(doc, from)
		if err != nil {
			return nil, err
		}
		if op.Op == "move" {
			if op.Path == op.From {
				return doc, nil
			}
			if strings.HasPrefix(op.Path, op.From+"/") {
				return nil, fmt.Errorf("cannot move a value into itself")
			}
			if doc, err = modify(doc, from, removeAt); err != nil {
				return nil, err
			}
		} else {
			v = Clone(v)
		}
		return modify(doc, tokens, func(c any, k string) (any, error) { return addAt(c, k, v) })
	}
	return nil, fmt.Errorf("unknown op %q", op.Op)
}

// decodeValue decodes a JSON value as the documents are decoded.
func decodeValue(raw []byte, v *any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	return dec.Decode(v)
}

// Clone copies a JSON document deeply (through its encoding).
func Clone(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

// splitPointer splits a JSON pointer (RFC 6901) into its unescaped tokens.
// The whole document ("") is not a target here.
func splitPointer(p string) ([]string, error) {
	if p == "" || p[0] != '/' {
		return nil, fmt.Errorf("path %q must start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if strings.Contains(strings.ReplaceAll(strings.ReplaceAll(t, "~0", ""), "~1", ""), "~") {
			return nil, fmt.Errorf("path %q has a bad escape", p)
		}
		parts[i] = unescapePointer(t)
	}
	return parts, nil
}

func unescapePointer(t string) string {
	return strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
}

// modify applies f to the container holding the last token and puts the
// changed containers back along the path (a slice may be reallocated).
func modify(node any, tokens []string, f func(container any, key string) (any, error)) (any, error) {
	if len(tokens) == 1 {
		return f(node, tokens[0])
	}
	child, err := getAt(node, tokens[0])
	if err != nil {
		return nil, err
	}
	child, err = modify(child, tokens[1:], f)
	if err != nil {
		return nil, err
	}
	return setAt(node, tokens[0], child)
}

func get(node any, tokens []string) (any, error) {
	for _, t := range tokens {
		var err error
		if node, err = getAt(node, t); err != nil {
			return nil, err
		}
	}
	return node, nil
}

func getAt(c any, k string) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		v, ok := c[k]
		if !ok {
			return nil, fmt.Errorf("member %q does not exist", k)
		}
		return v, nil
	case []any:
		i, err := arrayIndex(k, len(c)-1)
		if err != nil {
			return nil, err
		}
		return c[i], nil
	}
	return nil, fmt.Errorf("%q is inside a value that is neither an object nor a list", k)
}

// setAt replaces an existing member or list element.
func setAt(c any, k string, v any) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		c[k] = v
		return c, nil
	case []any:
		i, err := arrayIndex(k, len(c)-1)
		if err != nil {
			return nil, err
		}
		c[i] = v
		return c, nil
	}
	return nil, fmt.Errorf("%q is inside a value that is neither an object nor a list", k)
}

func addAt(c any, k string, v any) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		c[k] = v
		return c, nil
	case []any:
		i := len(c)
		if k != "-" {
			var err error
			if i, err = arrayIndex(k, len(c)); err != nil {
				return nil, err
			}
		}
		out := make([]any, 0, len(c)+1)
		out = append(append(append(out, c[:i]...), v), c[i:]...)
		return out, nil
	}
	return nil, fmt.Errorf("%q is inside a value that is neither an object nor a list", k)
}

func removeAt(c any, k string) (any, error) {
	switch c := c.(type) {
	case map[string]any:
		if _, ok := c[k]; !ok {
			return nil, fmt.Errorf("member %q does not exist", k)
		}
		delete(c, k)
		return c, nil
	case []any:
		i, err := arrayIndex(k, len(c)-1)
		if err != nil {
			return nil, err
		}
		return append(c[:i:i], c[i+1:]...), nil
	}
	return nil, fmt.Errorf("%q is inside a value that is neither an object nor a list", k)
}

// arrayIndex parses a list index token: decimal, no leading zero, at most
// max.
func arrayIndex(k string, max int) (int, error) {
	if k == "" || (len(k) > 1 && k[0] == '0') || strings.TrimLeft(k, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a list index", k)
	}
	i, err := strconv.Atoi(k)
	if err != nil || i > max {
		return 0, fmt.Errorf("list index %s is out of range", k)
	}
	return i, nil
}
