package baremetalapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/corral/corral/internal/ecode"
)

// The errors Ironic's clients see, with Ironic's texts: a backend returns
// these so the client prints what it would print against Ironic.

// ErrNodeNotFound is the 404 of an unknown machine.
func ErrNodeNotFound(ident string) error {
	return ecode.Errorf(ecode.NoEnt, "Node %s could not be found.", ident)
}

// ErrPortNotFound is the 404 of an unknown port.
func ErrPortNotFound(ident string) error {
	return ecode.Errorf(ecode.NoEnt, "Port %s could not be found.", ident)
}

// ErrNodeLocked is the 409 of an action on a machine another action holds.
func ErrNodeLocked(uuid, host string) error {
	return ecode.Errorf(ecode.State, "Node %s is locked by host %s, please retry after the current operation is completed.", uuid, host)
}

// ErrInvalidTransition is the 400 of a provision target the machine's
// state does not allow (or an unknown target).
func ErrInvalidTransition(target, uuid, state string) error {
	return ecode.Errorf(ecode.Inval, "The requested action %q can not be performed on node %q while it is in state %q.", target, uuid, state)
}

// ErrDeleteState is the 409 of deleting a machine in a state that forbids it.
func ErrDeleteState(uuid, state string) error {
	return ecode.Errorf(ecode.State, "Can not delete node %q while it is in provision state %q. Valid provision states to perform deletion are: \"('manageable', 'enroll', 'adopt failed', 'available')\", or set the node into maintenance mode", uuid, state)
}

// ErrAgentTokenRequired is the 400 of a heartbeat without a token.
func ErrAgentTokenRequired() error {
	return ecode.Errorf(ecode.Inval, "Agent token is required for heartbeat processing.")
}

// ErrAgentTokenInvalid is the 400 of a heartbeat with a wrong token.
func ErrAgentTokenInvalid() error {
	return ecode.Errorf(ecode.Inval, "Invalid or missing agent token received.")
}

// ErrLookupNotFound is the 404 of a lookup that finds no machine, or one
// whose state allows no lookup: the same text on purpose.
func ErrLookupNotFound() error {
	return ecode.Errorf(ecode.NoEnt, "Resource could not be found.")
}

// apiError is an error the HTTP layer itself answers with.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

// notAcceptable is a request for something newer than its version.
func notAcceptable(format string, args ...any) error {
	return errorf(http.StatusNotAcceptable, format, args...)
}

// statusOf picks the HTTP status and the client's text for err: the
// API's own errors carry their status, backend errors get theirs from the
// ecode class (ecode.HTTPStatus, the one mapping every Corral API uses).
// Anything unclassified is a 500 whose cause goes to the log, not to the
// client.
func (h *Handler) statusOf(err error) (int, string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code, ae.msg
	}
	if e, ok := ecode.As(err); ok {
		return ecode.HTTPStatus(e), e.Msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, "Timed out waiting for the master daemon."
	}
	h.log.Error("baremetal api: request failed", "err", err)
	return http.StatusInternalServerError, "The request could not be completed because of an internal error."
}

// writeError answers err in Ironic's format: {"error_message": "<JSON>"},
// the inner JSON holding faultcode (Client for 4xx, Server otherwise),
// faultstring and debuginfo.
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	code, msg := h.statusOf(err)
	fault := "Server"
	if code >= 400 && code < 500 {
		fault = "Client"
	}
	inner, _ := json.Marshal(struct {
		FaultCode   string  `json:"faultcode"`
		FaultString string  `json:"faultstring"`
		DebugInfo   *string `json:"debuginfo"`
	}{fault, msg, nil})
	writeJSON(w, code, map[string]string{"error_message": string(inner)})
}

// writeNotAcceptableVersion answers a version outside the range: its own
// inner shape (code, title, description), as Ironic's version check.
func writeNotAcceptableVersion(w http.ResponseWriter, asked string) {
	inner, _ := json.Marshal(struct {
		Code        int    `json:"code"`
		Title       string `json:"title"`
		Description string `json:"description"`
	}{http.StatusNotAcceptable, "Not Acceptable", fmt.Sprintf(
		"Version %s was requested but the minor version is not supported by this service. The supported version range is: [%s, %s].",
		asked, MinVersion, MaxVersion)})
	writeJSON(w, http.StatusNotAcceptable, map[string]string{"error_message": string(inner)})
}

// writeUnauthorized answers a request without valid credentials as
// OpenStack's http_basic middleware does: its own {"error": {...}} body
// and a Basic challenge.
func writeUnauthorized(w http.ResponseWriter, challenge, msg string) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{"message": msg, "code": http.StatusUnauthorized}})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code, data = http.StatusInternalServerError, []byte(`{"error_message": "{\"faultcode\": \"Server\", \"faultstring\": \"reply encoding failed\", \"debuginfo\": null}"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}
