// Package rpc is the master→node transport: HTTPS with mutual TLS, one POST
// per call to /rpc/v1/<method> with a JSON body, and the node join protocol.
//
// Every call carries the master's epoch, so a node refuses a deposed master
// (fencing), and calls that change something carry an operation id, so a
// node answers a retried operation from its record instead of doing it
// twice. Errors cross the wire in Ganeti's [kind, [message, class]] form and
// come back as *ecode.Error with their class intact.
package rpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/corral/corral/internal/ecode"
)

// Wire constants shared by client and server.
const (
	HeaderEpoch = "X-Corral-Epoch"
	// HeaderEpochGrant carries the pki.EpochGrant for the epoch in
	// HeaderEpoch; a node raises its epoch only with a valid one.
	HeaderEpochGrant = "X-Corral-Epoch-Grant"
	HeaderOp         = "X-Corral-Op"
	HeaderReplayed   = "X-Corral-Replayed" // "1" when the answer came from an operation record

	PathPrefix     = "/rpc/v1/"
	JoinPath       = "/join/v1"
	StreamProtocol = "corral-stream"

	// MaxBodyBytes bounds request and response bodies; disk data travels
	// over streams, not call bodies.
	MaxBodyBytes = 64 << 20

	maxOpIDLen = 512
)

// ErrUnreachable is wrapped by every error that means the call did not get a
// complete answer from the node: connection refused, TLS failure, timeout,
// connection lost mid-reply. The operation may or may not have run; retry
// it with the same operation id.
var ErrUnreachable = errors.New("node unreachable")

// envelope is the body of every RPC answer.
type envelope struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// wireError encodes err as [kind, [message, class]]. Unlike
// ecode.(*Error).Encode it always sends the class, whatever the kind, so
// that a RemoteError of class wrong_state stays wrong_state on the master.
func wireError(err error) []any {
	e := ecode.Wrap(err)
	kind, class := e.Kind, e.Class
	if kind == "" {
		kind = ecode.GenericError
	}
	if class == "" {
		class = ecode.Fault
	}
	return []any{string(kind), []any{e.Msg, string(class)}}
}

// errorStatus is the HTTP status of a failed call, never 200 (the client
// reads 200 as success).
func errorStatus(err error) int {
	if s := ecode.HTTPStatus(err); s != http.StatusOK {
		return s
	}
	return http.StatusInternalServerError
}

func encodeSuccess(result any) ([]byte, error) {
	r, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return json.Marshal(envelope{OK: true, Result: r})
}

func encodeFailure(err error) []byte {
	e, _ := json.Marshal(wireError(err))
	b, _ := json.Marshal(envelope{OK: false, Error: e})
	return b
}

// decodeResponse turns an answer into reply or an error. An answer that is
// not a Corral envelope is a protocol error (class internal_error).
func decodeResponse(status int, body []byte, reply any) error {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return protocolError("HTTP %d with a body that is not an RPC answer", status)
	}
	if !env.OK {
		if len(env.Error) == 0 {
			return protocolError("HTTP %d failure without an error", status)
		}
		var v any
		if err := json.Unmarshal(env.Error, &v); err != nil {
			return protocolError("HTTP %d with an undecodable error", status)
		}
		return ecode.Decode(v)
	}
	if status != http.StatusOK {
		return protocolError("HTTP %d with a success body", status)
	}
	if reply == nil || len(env.Result) == 0 {
		return nil
	}
	if err := json.Unmarshal(env.Result, reply); err != nil {
		return &ecode.Error{Kind: ecode.RemoteError, Class: ecode.Fault, Msg: "cannot decode rpc reply: " + err.Error(), Err: err}
	}
	return nil
}

func protocolError(format string, args ...any) error {
	return &ecode.Error{Kind: ecode.RemoteError, Class: ecode.Fault, Msg: "rpc protocol error: " + fmt.Sprintf(format, args...)}
}

// parseEpoch reads the epoch header: a non-negative decimal integer.
func parseEpoch(s string) (int64, error) {
	if s == "" {
		return 0, ecode.Errorf(ecode.Inval, "missing %s header", HeaderEpoch)
	}
	bad := ecode.Errorf(ecode.Inval, "bad %s header %q", HeaderEpoch, truncate(s, 32))
	// Digits only: ParseInt alone would take "+5" and "-0".
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, bad
	}
	return n, nil
}

// validMethod keeps method names to a safe alphabet, so they can be put in a
// URL path and in logs as they are.
func validMethod(m string) bool {
	if m == "" || len(m) > 64 {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validOpID accepts printable ASCII without spaces, as a header value must be.
func validOpID(op string) bool {
	if len(op) > maxOpIDLen {
		return false
	}
	for i := 0; i < len(op); i++ {
		if op[i] <= ' ' || op[i] > '~' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
