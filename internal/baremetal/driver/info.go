package driver

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// driver_info values arrive from JSON (strings, float64 numbers, booleans)
// or from the command line as strings; these read them leniently, as the
// Bare Metal service does, and name the key when a value will not do.

func infoString(info map[string]any, key string, required bool) (string, error) {
	v, ok := info[key]
	if !ok || v == nil {
		if required {
			return "", ecode.Errorf(ecode.Inval, "driver_info is missing %s", key)
		}
		return "", nil
	}
	var s string
	switch x := v.(type) {
	case string:
		s = x
	case float64:
		if x != math.Trunc(x) {
			return "", ecode.Errorf(ecode.Inval, "driver_info %s must be a string", key)
		}
		s = strconv.FormatInt(int64(x), 10)
	case int:
		s = strconv.Itoa(x)
	default:
		return "", ecode.Errorf(ecode.Inval, "driver_info %s must be a string", key)
	}
	if required && s == "" {
		return "", ecode.Errorf(ecode.Inval, "driver_info %s is empty", key)
	}
	return s, nil
}

func infoInt(info map[string]any, key string, def, lo, hi int) (int, error) {
	v, ok := info[key]
	if !ok || v == nil || v == "" {
		return def, nil
	}
	var n int
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) {
			return 0, ecode.Errorf(ecode.Inval, "driver_info %s must be a whole number", key)
		}
		n = int(x)
	case int:
		n = x
	case string:
		i, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil {
			return 0, ecode.Errorf(ecode.Inval, "driver_info %s %q is not a number", key, x)
		}
		n = i
	default:
		return 0, ecode.Errorf(ecode.Inval, "driver_info %s must be a number", key)
	}
	if n < lo || n > hi {
		return 0, ecode.Errorf(ecode.Inval, "driver_info %s %d is not between %d and %d", key, n, lo, hi)
	}
	return n, nil
}

// verifyCA reads redfish_verify_ca: a boolean (or its spelling as a string)
// or the path of a CA bundle.
func verifyCA(info map[string]any, key string) (verify bool, caFile string, err error) {
	v, ok := info[key]
	if !ok || v == nil {
		return true, "", nil
	}
	switch x := v.(type) {
	case bool:
		return x, "", nil
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "true", "yes", "1", "on", "":
			return true, "", nil
		case "false", "no", "0", "off":
			return false, "", nil
		}
		if !strings.HasPrefix(x, "/") {
			return false, "", ecode.Errorf(ecode.Inval, "driver_info %s %q is neither a boolean nor an absolute path", key, x)
		}
		return true, x, nil
	}
	return false, "", ecode.Errorf(ecode.Inval, "driver_info %s must be a boolean or a path", key)
}

// redactor removes the secrets of a driver from text that came back from
// the BMC or a tool, so an echo of a password can never reach an error.
type redactor []string

func (r redactor) clean(s string) string {
	for _, secret := range r {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "******")
		}
	}
	return s
}

// errorf makes an OpExecError whose message has the secrets removed; the
// cause stays wrapped for errors.Is and errors.As.
func (r redactor) errorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &ecode.Error{Kind: ecode.OpExecError, Class: ecode.Fault, Msg: r.clean(err.Error()), Err: errors.Unwrap(err)}
}
