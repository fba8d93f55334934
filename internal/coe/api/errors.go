package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/ecode"
)

// The errors Magnum's clients see, with Magnum's texts: a backend returns
// these so the client prints what it would print against Magnum.

// ErrTemplateNotFound is the 404 of an unknown template.
func ErrTemplateNotFound(ident string) error {
	return ecode.Errorf(ecode.NoEnt, "ClusterTemplate %s could not be found.", ident)
}

// ErrClusterNotFound is the 404 of an unknown cluster.
func ErrClusterNotFound(ident string) error {
	return ecode.Errorf(ecode.NoEnt, "Cluster %s could not be found.", ident)
}

// ErrNodeGroupNotFound is the 404 of an unknown node group.
func ErrNodeGroupNotFound(ident string) error {
	return ecode.Errorf(ecode.NoEnt, "Nodegroup %s could not be found.", ident)
}

// ErrFederationNotFound is the 404 of an unknown federation.
func ErrFederationNotFound(ident string) error {
	return ecode.Errorf(ecode.NoEnt, "Federation %s could not be found.", ident)
}

// ErrMemberExists is the 409 of a cluster joining a federation twice.
func ErrMemberExists(cluster, federation string) error {
	return ecode.Errorf(ecode.Exists, "A cluster with UUID %s is already a member of the federation %s.", cluster, federation)
}

// ErrQuotaNotFound is the 404 of deleting or updating a quota never set.
func ErrQuotaNotFound(project, resource string) error {
	return ecode.Errorf(ecode.NoEnt, "Quota could not be found: project %s, resource %s.", project, resource)
}

// ErrAmbiguousName is the 409 of a name several objects of a kind
// ("clusters", "cluster templates", "nodegroups") share.
func ErrAmbiguousName(kind, name string) error {
	return ecode.Errorf(ecode.NotUnique, "Multiple %s exist with same name %s. Please use the uuid instead.", kind, name)
}

// ErrTemplateInUse is the 400 of deleting a template a cluster uses.
func ErrTemplateInUse(ident string) error {
	return ecode.Errorf(ecode.Inval, "ClusterTemplate %s is referenced by one or multiple clusters.", ident)
}

// ErrQuotaExceeded is the 403 of a create past a project's hard limit.
func ErrQuotaExceeded(limit int) error {
	return ecode.New(ecode.PermissionDenied, ecode.NoRes, fmt.Sprintf(
		"Resource limit exceeded: You have reached the maximum clusters per project, %d. You may delete a cluster to make room for a new one.", limit))
}

// ErrForbidden is the 403 of an action the caller's role does not allow.
func ErrForbidden(action string) error {
	return ecode.New(ecode.PermissionDenied, ecode.Inval, fmt.Sprintf("Policy doesn't allow %s to be performed.", action))
}

// quotaPrefix starts every quota refusal, whatever layer made it.
const quotaPrefix = "Resource limit exceeded"

// apiError is an error the HTTP layer itself answers with.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

func errorf(code int, format string, args ...any) error {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return errorf(http.StatusBadRequest, format, args...)
}

func notAcceptable(format string, args ...any) error {
	return errorf(http.StatusNotAcceptable, format, args...)
}

// statusOf picks the HTTP status and the client's text for err: the API's
// own errors carry their status, backend errors get theirs from the ecode
// class (ecode.HTTPStatus), a quota refusal is a 403 whatever its class.
// Anything unclassified is a 500 whose cause goes to the log only.
func (h *Handler) statusOf(err error) (int, string) {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.code, ae.msg
	}
	if e, ok := ecode.As(err); ok {
		if strings.HasPrefix(e.Msg, quotaPrefix) {
			return http.StatusForbidden, e.Msg
		}
		return ecode.HTTPStatus(e), e.Msg
	}
	var down *apifront.BackendDownError
	if errors.As(err, &down) {
		h.log.Warn("container infra api: corrald unreachable", "err", err)
		return http.StatusServiceUnavailable, "The master daemon is unreachable; retry later."
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return http.StatusGatewayTimeout, "Timed out waiting for the master daemon."
	}
	h.log.Error("container infra api: request failed", "err", err)
	return http.StatusInternalServerError, "The request could not be completed because of an internal error."
}

// errorBody is Magnum's error document: {"errors": [one of these]}.
type errorBody struct {
	RequestID string `json:"request_id"`
	Code      string `json:"code"` // client or server
	Status    int    `json:"status"`
	Title     string `json:"title"`
	Detail    string `json:"detail"`
	Links     []any  `json:"links"`
	// A version refusal also carries the range, as Magnum's.
	MaxVersion string `json:"max_version,omitempty"`
	MinVersion string `json:"min_version,omitempty"`
}

// writeError answers err in Magnum's format.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := h.statusOf(err)
	b := errorBody{RequestID: w.Header().Get(requestIDHeader), Code: "server", Status: code, Title: msg, Detail: msg, Links: []any{}}
	if code >= 400 && code < 500 {
		b.Code = "client"
	}
	if code == http.StatusNotAcceptable {
		b.MaxVersion, b.MinVersion = MaxVersion.String(), MinVersion.String()
	}
	writeJSON(w, code, map[string]any{"errors": []errorBody{b}})
}

// writeUnauthorized answers a request without valid credentials as
// OpenStack's http_basic middleware does: its own {"error": {...}} body
// (which the client also reads) and a Basic challenge.
func writeUnauthorized(w http.ResponseWriter, challenge, msg string) {
	if challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
		"title": "Unauthorized", "message": msg, "code": http.StatusUnauthorized}})
}
