package baremetalapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
)

// readBody reads the request body up to limit bytes: 413 beyond it.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, errorf(http.StatusRequestEntityTooLarge, "Request is too large: the limit is %d bytes.", limit)
	}
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "Reading the request body failed.")
	}
	return data, nil
}

// decodeObject parses a JSON object body into its members, refusing
// members outside allowed as Ironic's schemas do (400). An empty body is
// an empty object when emptyOK.
func decodeObject(body []byte, allowed []string, emptyOK bool) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		if emptyOK {
			return map[string]json.RawMessage{}, nil
		}
		return nil, errorf(http.StatusBadRequest, "The request body is empty; a JSON object is expected.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, errorf(http.StatusBadRequest, "The request body must be a JSON object.")
	}
	if dec.More() {
		return nil, errorf(http.StatusBadRequest, "The request body has data after its JSON object.")
	}
	var extra []string
	for k := range obj {
		if !slices.Contains(allowed, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return nil, errorf(http.StatusBadRequest, "Additional properties are not allowed ('%s' %s unexpected)",
			strings.Join(extra, "', '"), map[bool]string{true: "was", false: "were"}[len(extra) == 1])
	}
	return obj, nil
}

// member decodes obj[name] into dst when present; a type mismatch is a 400
// naming the member. It reports whether the member was there (null
// counts as there).
func member(obj map[string]json.RawMessage, name string, dst any) (bool, error) {
	raw, ok := obj[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return true, errorf(http.StatusBadRequest, "Invalid value for %s: %s", name, typeProblem(err))
	}
	return true, nil
}

// typeProblem names what was wrong with a value without repeating it (it
// may be a password).
func typeProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "a JSON " + te.Value + " is not a " + goTypeName(te.Type.String())
	}
	return "malformed value"
}

func goTypeName(t string) string {
	switch {
	case t == "string", t == "*string":
		return "string"
	case t == "bool", t == "*bool":
		return "boolean"
	case strings.HasPrefix(t, "map["):
		return "JSON object"
	case strings.HasPrefix(t, "[]"):
		return "list"
	case strings.Contains(t, "int"), strings.Contains(t, "float"):
		return "number"
	}
	return "value of the expected type"
}
