package rapiclient

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// errorBody is a RAPI error answer. Ganeti sends code, message and explain;
// class is read when a server adds it, since a status alone cannot tell
// every class apart (409 stands for exists, not unique and wrong state).
type errorBody struct {
	Code    any    `json:"code"`
	Message any    `json:"message"`
	Explain any    `json:"explain"`
	Class   string `json:"class"`
}

// knownClasses are the classes a body's class member may name.
var knownClasses = map[ecode.Class]bool{
	ecode.Resolver: true, ecode.NoRes: true, ecode.TempNoRes: true, ecode.Inval: true, ecode.State: true,
	ecode.NoEnt: true, ecode.Exists: true, ecode.NotUnique: true, ecode.Fault: true, ecode.Environ: true,
}

// DecodeError turns an error answer (status and body) into a classified
// error, so the command line's exit status follows the class as it does over
// LUXI. The class comes from the status (the inverse of ecode.HTTPStatus,
// 409 read as a wrong state), or from a class member when the body has
// one; the message is the body's, HTML-unescaped (Ganeti escapes it), or
// the status text when the body has none.
func DecodeError(status int, body []byte) *ecode.Error {
	e := &ecode.Error{Kind: ecode.OpPrereqError, Class: statusClass(status)}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		e.Kind = ecode.PermissionDenied
	case http.StatusServiceUnavailable:
		e.Kind = ecode.GenericError
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		e.Kind = ecode.LuxiError
	default:
		if status >= 500 {
			e.Kind = ecode.GenericError
		}
	}
	var b errorBody
	if json.Unmarshal(body, &b) == nil {
		if s, ok := b.Message.(string); ok {
			e.Msg = html.UnescapeString(s)
		}
		if c := ecode.Class(b.Class); knownClasses[c] {
			e.Class = c
		}
	} else if s := strings.TrimSpace(string(body)); s != "" && len(s) <= 512 && !strings.ContainsAny(s, "\x00") {
		// A proxy in front may answer in plain text.
		e.Msg = s
	}
	if e.Msg == "" {
		e.Msg = http.StatusText(status)
		if e.Msg == "" {
			e.Msg = fmt.Sprintf("HTTP status %d", status)
		}
	}
	return e
}

func statusClass(status int) ecode.Class {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return ecode.Inval
	case http.StatusNotFound:
		return ecode.NoEnt
	case http.StatusConflict:
		return ecode.State
	case http.StatusServiceUnavailable:
		return ecode.TempNoRes
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotImplemented,
		http.StatusBadGateway, http.StatusGatewayTimeout:
		// Not the request's fault: this access path or the server side
		// cannot serve it.
		return ecode.Environ
	}
	return ecode.Fault
}
