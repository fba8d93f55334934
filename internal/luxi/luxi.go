// Package luxi speaks Ganeti's LUXI protocol: JSON messages terminated by
// ETX (0x03) over a unix stream socket. The CLI and corral-rapi use it to talk
// to corrald. The package has both ends: a Server that hands each decoded
// call to a Handler, and a Client with typed helpers for the methods Ganeti's
// tools use, so Ganeti-era scripts and Corral's own tools interoperate.
package luxi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/corral/corral/internal/ecode"
)

// ProtocolVersion is what Corral's client puts in a request's "version" key.
// Ganeti numbers it like its configuration version, 1000000*major +
// 10000*minor (3010000 is Ganeti 3.1). The server side ignores the key, as
// Ganeti's own servers do: Ganeti 2.x and 3.x clients send their own number
// (3000000 from 3.0) or none, and a reply with a version their client does
// not expect is refused by it, so replies carry none.
const ProtocolVersion = 3010000

// Wire keys, spelled exactly as Ganeti does. They are matched case-sensitively
// (encoding/json's struct decoding would not be).
const (
	keyMethod  = "method"
	keyArgs    = "args"
	keyVersion = "version"
	keySuccess = "success"
	keyResult  = "result"
)

// ErrVersion marks a reply carrying a version other than the one the
// request was sent with.
var ErrVersion = errors.New("luxi: protocol version mismatch")

// DecodeRequest parses one request message. It checks everything the server
// relies on: a JSON object with a non-empty string "method" and an "args"
// list. A "version" key, whatever it holds, is ignored, as Ganeti's servers
// ignore it. The arguments stay undecoded so each method can decode its own.
func DecodeRequest(msg []byte) (method string, args []json.RawMessage, err error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(msg, &obj); err != nil {
		return "", nil, fmt.Errorf("request is not a JSON object: %w", err)
	}
	if obj == nil {
		return "", nil, errors.New("request is not a JSON object")
	}
	rawMethod, ok := obj[keyMethod]
	if !ok {
		return "", nil, errors.New("request has no method")
	}
	if err := json.Unmarshal(rawMethod, &method); err != nil || !isJSONString(rawMethod) {
		return "", nil, errors.New("request method is not a string")
	}
	if method == "" {
		return "", nil, errors.New("request method is empty")
	}
	rawArgs, ok := obj[keyArgs]
	if !ok {
		return "", nil, fmt.Errorf("request for %q has no args", method)
	}
	if !isJSONArray(rawArgs) {
		return "", nil, fmt.Errorf("request args for %q are not a list", method)
	}
	if err := json.Unmarshal(rawArgs, &args); err != nil {
		return "", nil, fmt.Errorf("request args for %q: %w", method, err)
	}
	if args == nil {
		args = []json.RawMessage{}
	}
	return method, args, nil
}

// encodeRequest builds a request message.
func encodeRequest(method string, args []any) ([]byte, error) {
	if args == nil {
		args = []any{}
	}
	return json.Marshal(struct {
		Method  string `json:"method"`
		Args    []any  `json:"args"`
		Version int    `json:"version"`
	}{method, args, ProtocolVersion})
}

// response is the wire form of a reply: no "version" key, as from Ganeti's
// servers.
type response struct {
	Success bool            `json:"success"`
	Result  json.RawMessage `json:"result"`
}

// encodeSuccess builds a success reply; it fails only when result cannot be
// marshalled.
func encodeSuccess(result any) ([]byte, error) {
	raw, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("encoding result: %w", err)
	}
	return json.Marshal(response{Success: true, Result: raw})
}

// encodeFailure builds a failure reply carrying err as Ganeti's encoded
// exception. Classified errors keep their kind and class; anything else
// becomes a GenericError with the error text.
func encodeFailure(err error) []byte {
	var enc []any
	if e, ok := ecode.As(err); ok {
		enc = e.Encode()
	} else {
		enc = []any{string(ecode.GenericError), []any{err.Error()}}
	}
	raw, merr := json.Marshal(enc)
	if merr != nil {
		// Only strings are inside; this cannot fail, but never send nothing.
		raw = []byte(`["GenericError",["unencodable error"]]`)
	}
	out, _ := json.Marshal(response{Success: false, Result: raw})
	return out
}

// decodeResponse parses a reply. A failure reply becomes an *ecode.Error; a
// success reply yields the raw result. A reply without a version (Ganeti's
// servers and corrald send none) is fine; one with a version other than the
// one this client sends is refused, as Ganeti's client refuses it.
func decodeResponse(msg []byte) (json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(msg, &obj); err != nil || obj == nil {
		return nil, ecode.New(ecode.LuxiError, ecode.Fault, "luxi: reply is not a JSON object")
	}
	if rawVersion, ok := obj[keyVersion]; ok && !isJSONNull(rawVersion) {
		var v int64
		if err := json.Unmarshal(rawVersion, &v); err != nil {
			return nil, ecode.New(ecode.LuxiError, ecode.Fault, "luxi: reply version is not an integer")
		}
		if v != ProtocolVersion {
			return nil, &ecode.Error{Kind: ecode.LuxiError, Class: ecode.Environ,
				Msg: fmt.Sprintf("LUXI version mismatch: server speaks %d, this client %d", v, ProtocolVersion),
				Err: ErrVersion}
		}
	}
	var success bool
	rawSuccess, ok := obj[keySuccess]
	if !ok || json.Unmarshal(rawSuccess, &success) != nil {
		return nil, ecode.New(ecode.LuxiError, ecode.Fault, "luxi: reply has no boolean success field")
	}
	result, ok := obj[keyResult]
	if !ok {
		return nil, ecode.New(ecode.LuxiError, ecode.Fault, "luxi: reply has no result field")
	}
	if success {
		return result, nil
	}
	var enc any
	if err := json.Unmarshal(result, &enc); err != nil {
		return nil, ecode.New(ecode.LuxiError, ecode.Fault, "luxi: failure reply carries undecodable result")
	}
	return nil, ecode.Decode(enc)
}

func firstByte(raw json.RawMessage) byte {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func isJSONString(raw json.RawMessage) bool { return firstByte(raw) == '"' }
func isJSONArray(raw json.RawMessage) bool  { return firstByte(raw) == '[' }
func isJSONNull(raw json.RawMessage) bool   { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// DecodeArgs decodes a request's positional arguments into dsts, one each,
// for Handler implementations. The count must match exactly; errors are
// LuxiError/wrong_input naming the method and argument position.
func DecodeArgs(method string, args []json.RawMessage, dsts ...any) error {
	if len(args) != len(dsts) {
		return ecode.New(ecode.LuxiError, ecode.Inval,
			fmt.Sprintf("%s takes %d arguments, got %d", method, len(dsts), len(args)))
	}
	for i, a := range args {
		if err := json.Unmarshal(a, dsts[i]); err != nil {
			return &ecode.Error{Kind: ecode.LuxiError, Class: ecode.Inval,
				Msg: fmt.Sprintf("%s: argument %d: %v", method, i+1, err), Err: err}
		}
	}
	return nil
}
