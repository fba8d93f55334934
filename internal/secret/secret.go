// Package secret holds the Secret type: a string that prints redacted through
// fmt, log/slog and encoding/json, so keys, passwords and tokens cannot reach
// logs, job results or error messages by accident. Reveal is the one explicit
// way to read the value.
package secret

import "log/slog"

// Secret is sensitive text.
type Secret string

const redacted = "<redacted>"

// Reveal returns the value. Call it only where the value is used.
func (s Secret) Reveal() string { return string(s) }

// Empty reports whether no value is set.
func (s Secret) Empty() bool { return s == "" }

func (s Secret) String() string               { return redacted }
func (s Secret) GoString() string             { return redacted }
func (s Secret) LogValue() slog.Value         { return slog.StringValue(redacted) }
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
