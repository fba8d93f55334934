// Package rapi serves Ganeti's Remote API v2 over HTTP on top of corrald's
// LUXI interface, so existing Ganeti tooling can drive a Corral cluster.
package rapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
)

// MaxBodyBytes is the largest request body accepted (Ganeti's limit).
const MaxBodyBytes = 10 << 20

// Config configures a Handler.
type Config struct {
	Backend Backend
	Users   *Users // nil: no users (only anonymous GETs succeed)
	// Auth replaces Users with another authentication provider; the
	// identity's roles are then the access options.
	Auth        apifront.Authenticator
	RequireAuth bool // every request needs valid credentials
	MaxClients  int  // concurrent requests served; 0: unlimited
	Log         *slog.Logger
	// Now is the clock used for reason-trail timestamps; nil: time.Now.
	Now func() time.Time
}

// Handler is the RAPI v2 http.Handler.
type Handler struct {
	be          Backend
	auth        apifront.Authenticator
	users       *apifront.UsersFileAuth // nil when Config.Auth is set
	requireAuth bool
	limit       *apifront.Limiter
	log         *slog.Logger
	now         func() time.Time
	routes      []route
	ops         *opcodes.Table
	metrics     *apifront.RequestMetrics
}

// NewHandler builds a Handler.
func NewHandler(cfg Config) *Handler {
	h := &Handler{be: cfg.Backend, requireAuth: cfg.RequireAuth, log: cfg.Log, now: cfg.Now}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.limit = apifront.NewLimiter(cfg.MaxClients)
	h.auth = cfg.Auth
	if h.auth == nil {
		h.users = apifront.NewUsersFileAuth(Realm, cfg.Users)
		h.auth = h.users
	}
	h.routes = h.buildRoutes()
	h.ops = opcodes.Default()
	h.metrics = apifront.NewRequestMetrics("rapi", "RAPI")
	return h
}

// SetUsers replaces the users (a reload); requests in flight keep the old
// set. It does nothing when the handler has another provider (Config.Auth).
func (h *Handler) SetUsers(u *Users) {
	if h.users != nil {
		h.users.Set(u)
	}
}

// request is what a resource function sees.
type request struct {
	r      *http.Request
	params []string // the path's variable segments, in order
	query  map[string][]string
	body   any // decoded JSON body; nil when empty
	hasBdy bool
	res    string // the resource class name used in the reason trail
	// canWrite: the caller authenticated as a user with the write option.
	// Only such callers see private opcode parameters in jobs.
	canWrite bool
}

type handlerFunc func(ctx context.Context, rq *request) (any, error)

type method struct {
	access []string
	fn     handlerFunc
}

type route struct {
	segs    []string // literal segments; "{name}" and "{id}" are variables
	res     string
	methods map[string]method
}

// httpError is an error answered with a given status and message.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errf(code int, format string, args ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, args...)}
}

// notFound is Ganeti's bare 404, whose message is the reason phrase.
var errNotFound = &httpError{code: http.StatusNotFound}

// explain holds Python's long descriptions, which Ganeti puts in "explain"
// and its client prints.
var explain = map[int]string{
	400: "Bad request syntax or unsupported method",
	401: "No permission -- see authorization schemes",
	403: "Request forbidden -- authorization will not help",
	404: "Nothing matches the given URI",
	405: "Specified method is invalid for this resource",
	413: "Entity is too large",
	415: "Entity body in unsupported format",
	500: "Server got itself in trouble",
	501: "Server does not support this operation",
	502: "Invalid responses from another server/proxy",
	503: "The server cannot process the request due to a high load",
	504: "The gateway server did not receive a timely response",
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, done := h.instrument(w, r)
	defer done()
	release, ok := h.limit.Acquire()
	if !ok {
		h.writeError(w, errf(http.StatusServiceUnavailable, "Too many concurrent requests"))
		return
	}
	defer release()
	if r.URL.EscapedPath() == MetricsPath {
		h.serveMetrics(w, r)
		return
	}
	if r.URL.EscapedPath() == PairPath {
		h.servePair(w, r)
		return
	}
	res, err := h.serve(w, r)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) (any, error) {
	switch r.Method {
	case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete:
	default:
		return nil, errf(http.StatusNotImplemented, "Unsupported method (%s)", r.Method)
	}
	path := r.URL.EscapedPath()
	rt, params := h.match(path)
	if rt == nil {
		return nil, errNotFound
	}
	m, ok := rt.methods[r.Method]
	if !ok {
		return nil, errf(http.StatusNotImplemented, "Method %s is unsupported for path %s", r.Method, path)
	}
	user, err := h.authorize(w, r, m.access)
	if err != nil {
		return nil, err
	}
	rq := &request{r: r, params: params, query: parseQuery(r.URL.RawQuery), res: rt.res,
		canWrite: user != nil && user.Allowed(accessWrite)}
	if err := readBody(w, r, rq); err != nil {
		return nil, err
	}
	return m.fn(r.Context(), rq)
}

func (h *Handler) match(path string) (*route, []string) {
	segs := strings.Split(path, "/")
	for i := range h.routes {
		rt := &h.routes[i]
		if len(rt.segs) != len(segs) {
			continue
		}
		var params []string
		ok := true
		for j, s := range rt.segs {
			switch s {
			case "{name}":
				ok = validName(segs[j])
				params = append(params, segs[j])
			case "{id}":
				ok = validDigits(segs[j])
				params = append(params, segs[j])
			default:
				ok = s == segs[j]
			}
			if !ok {
				break
			}
		}
		if ok {
			return rt, params
		}
	}
	return nil, nil
}

// validName is Ganeti's [\w\._-]+ on the raw (undecoded) segment.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

func validDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// authorize applies Ganeti's decision: credentials are checked when
// required or when sent anyway; a valid user needs an option in access.
// It returns the authenticated user, nil for an anonymous read.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, access []string) (*apifront.Identity, error) {
	hdr := r.Header.Get("Authorization")
	if !h.requireAuth && len(access) == 0 && hdr == "" {
		return nil, nil
	}
	user, ok := h.auth.Authenticate(r)
	if !ok {
		h.challenge(w)
		return nil, &httpError{code: http.StatusUnauthorized}
	}
	if !user.Allowed(access) {
		return nil, &httpError{code: http.StatusForbidden}
	}
	return user, nil
}

// challenge asks for credentials on a 401, as the provider says.
func (h *Handler) challenge(w http.ResponseWriter) {
	if c := h.auth.Challenge(); c != "" {
		w.Header().Set("WWW-Authenticate", c)
	}
}

// parseQuery follows Python's parse_qs: repeated keys kept, empty values
// dropped.
func parseQuery(raw string) map[string][]string {
	out := map[string][]string{}
	for _, part := range strings.FieldsFunc(raw, func(c rune) bool { return c == '&' || c == ';' }) {
		k, v, _ := strings.Cut(part, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || v == "" {
			continue
		}
		out[k] = append(out[k], v)
	}
	return out
}

func readBody(w http.ResponseWriter, r *http.Request, rq *request) error {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errf(http.StatusRequestEntityTooLarge, "Request body too large (limit %d bytes)", MaxBodyBytes)
		}
		return errf(http.StatusBadRequest, "Reading request body: %v", err)
	}
	if len(data) == 0 {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
		mt, _, _ := mime.ParseMediaType(ct)
		return errf(http.StatusUnsupportedMediaType, "Unsupported Content-Type %q, expected application/json", mt)
	}
	body, err := DecodeBody(data)
	if err != nil {
		return err
	}
	rq.body, rq.hasBdy = body, true
	return nil
}

// DecodeBody parses a request body in RAPI's relaxed JSON (any top-level
// value). Numbers stay float64, as LUXI's encoding/json would give them.
func DecodeBody(data []byte) (any, error) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, errf(http.StatusBadRequest, "Unable to parse JSON data")
	}
	return v, nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Ganeti's messages are HTML-escaped once already, as Python's
	// html.escape does; JSON must not escape them again.
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(map[string]any{"code": code, "message": "encoding response: " + err.Error(), "explain": explain[code]})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// pyEscape is Python's html.escape, which Ganeti applies to messages.
var pyEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;")

// writeError sends the {"code","message","explain"} body. The status comes
// from the error's class (ecode.HTTPStatus), never from its text.
func (h *Handler) writeError(w http.ResponseWriter, err error) {
	code, msg := h.status(err)
	if msg == "" {
		msg = http.StatusText(code)
	}
	writeJSON(w, code, map[string]any{"code": code, "message": pyEscape.Replace(msg), "explain": explain[code]})
}

func (h *Handler) status(err error) (int, string) {
	var he *httpError
	var down *backendDownError
	switch {
	case errors.As(err, &he):
		return he.code, he.msg
	case errors.As(err, &down):
		h.log.Warn("rapi: corrald unreachable", "err", err)
		return http.StatusBadGateway, "Can't connect to the master daemon: " + err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "Timeout while talking to the master daemon"
	}
	if e, ok := ecode.As(err); ok {
		return ecode.HTTPStatus(e), e.Msg
	}
	h.log.Error("rapi: request failed", "err", err)
	return http.StatusInternalServerError, err.Error()
}
