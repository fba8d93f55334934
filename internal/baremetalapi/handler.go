package baremetalapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/cryptpw"
	"github.com/corral/corral/internal/metrics"
)

// Body limits: every request body but a provision request is small; a
// provision request may carry a config drive of up to maxConfigDrive bytes
// decoded, base64 in JSON.
const (
	maxBodyBytes          = 1 << 20
	maxConfigDrive        = 64 << 20
	maxProvisionBodyBytes = maxConfigDrive/3*4 + maxBodyBytes
)

// Realm is the HTTP Basic realm, Ironic's.
const Realm = "Baremetal API"

// Config configures a Handler.
type Config struct {
	Backend Backend
	// Auth proves who a request comes from; nil serves everyone (noauth).
	Auth apifront.Authenticator
	// RescueHash is the crypt algorithm the rescue password is hashed
	// with (Ironic's rescue_password_hash_algorithm); "": sha256.
	RescueHash cryptpw.Algorithm
	MaxClients int // requests served at once; 0: unlimited
	Log        *slog.Logger
}

// Handler serves the Bare Metal API v1.
type Handler struct {
	be         Backend
	auth       apifront.Authenticator
	rescueHash cryptpw.Algorithm
	limit      *apifront.Limiter
	log        *slog.Logger
	mux        *http.ServeMux
	metrics    *apifront.RequestMetrics
}

// NewHandler builds a Handler.
func NewHandler(cfg Config) *Handler {
	h := &Handler{be: cfg.Backend, auth: cfg.Auth, rescueHash: cfg.RescueHash, log: cfg.Log}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.rescueHash == "" {
		h.rescueHash = cryptpw.Default
	}
	h.limit = apifront.NewLimiter(cfg.MaxClients)
	h.metrics = apifront.NewRequestMetrics("baremetal", "Bare Metal API")
	h.mux = http.NewServeMux()
	h.routes()
	return h
}

// Metrics is the API's own metrics registry.
func (h *Handler) Metrics() *metrics.Registry { return h.metrics.Registry }

// call is what a route's function gets besides the request: the version
// served and the service root for links.
type call struct {
	v    Version
	base string
}

type callKey struct{}

// route adds a route; public routes need no credentials (discovery and
// the agents' endpoints, whose token the backend checks).
func (h *Handler) route(pattern string, public bool, fn func(http.ResponseWriter, *http.Request, *call) error) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(callKey{}).(*call)
		if !public && !h.authenticated(w, r) {
			return
		}
		if err := fn(w, r, c); err != nil {
			h.writeError(w, err)
		}
	})
}

func (h *Handler) routes() {
	h.route("GET /{$}", true, h.serveRoot)
	h.route("GET /v1", true, h.serveV1)
	h.route("GET /v1/nodes", false, h.listNodes)
	h.route("POST /v1/nodes", false, h.createNode)
	h.route("GET /v1/nodes/detail", false, h.listNodesDetail)
	h.route("GET /v1/nodes/{ident}", false, h.showNode)
	h.route("PATCH /v1/nodes/{ident}", false, h.patchNode)
	h.route("DELETE /v1/nodes/{ident}", false, h.deleteNode)
	h.route("GET /v1/nodes/{ident}/states", false, h.showStates)
	h.route("PUT /v1/nodes/{ident}/states/provision", false, h.setProvision)
	h.route("PUT /v1/nodes/{ident}/states/power", false, h.setPower)
	h.route("PUT /v1/nodes/{ident}/maintenance", false, h.setMaintenance)
	h.route("DELETE /v1/nodes/{ident}/maintenance", false, h.unsetMaintenance)
	h.route("GET /v1/nodes/{ident}/validate", false, h.validateNode)
	h.route("GET /v1/nodes/{ident}/ports", false, h.listNodePorts)
	h.route("GET /v1/nodes/{ident}/ports/detail", false, h.listNodePorts)
	h.route("GET /v1/ports", false, h.listPorts)
	h.route("POST /v1/ports", false, h.createPort)
	h.route("GET /v1/ports/detail", false, h.listPorts)
	h.route("GET /v1/ports/{uuid}", false, h.showPort)
	h.route("PATCH /v1/ports/{uuid}", false, h.patchPort)
	h.route("DELETE /v1/ports/{uuid}", false, h.deletePort)
	h.route("GET /v1/drivers", false, h.listDrivers)
	h.route("GET /v1/drivers/{name}", false, h.showDriver)
	h.route("GET /v1/drivers/{name}/properties", false, h.driverProperties)
	h.route("GET /v1/chassis", false, h.listChassis)
	h.route("GET /v1/lookup", true, h.agentLookup)
	h.route("POST /v1/heartbeat/{ident}", true, h.agentHeartbeat)
	h.route("/", true, func(http.ResponseWriter, *http.Request, *call) error {
		return errorf(http.StatusNotFound, "The resource could not be found.")
	})
}

// ServeHTTP implements http.Handler: limits, version negotiation and
// headers, then the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, done := h.metrics.Instrument(w, r, h.routeLabel)
	defer done()
	release, ok := h.limit.Acquire()
	if !ok {
		h.writeError(w, errorf(http.StatusServiceUnavailable, "Too many concurrent requests, please retry."))
		return
	}
	defer release()
	c := &call{base: apifront.ServiceRoot(r), v: MinVersion}
	path := r.URL.Path
	if len(path) > 1 && strings.HasSuffix(path, "/") {
		// The client asks for filtered lists as /v1/ports/?node=x: a
		// trailing slash names the same resource.
		r = r.Clone(r.Context())
		path = "/" + strings.Trim(path, "/")
		r.URL.Path, r.URL.RawPath = path, ""
	}
	if path == "/v1" || strings.HasPrefix(path, "/v1/") {
		hd := w.Header()
		hd.Set(minVersionHeader, MinVersion.String())
		hd.Set(maxVersionHeader, MaxVersion.String())
		v, outOfRange, err := negotiate(r)
		if err != nil {
			h.writeError(w, notAcceptable("Invalid value for %s header", versionHeader))
			return
		}
		if outOfRange {
			writeNotAcceptableVersion(w, v.String())
			return
		}
		c.v = v
		hd.Set(versionHeader, v.String())
		hd.Set("Openstack-Request-Id", "req-"+config.NewUUID())
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
}

// routeLabel is the route's pattern, for metrics.
func (h *Handler) routeLabel(r *http.Request) string { return apifront.RouteLabel(h.mux, r) }

// authenticated checks the request's credentials, answering 401 itself
// when they are missing or wrong.
func (h *Handler) authenticated(w http.ResponseWriter, r *http.Request) bool {
	if h.auth == nil {
		return true
	}
	if _, ok := h.auth.Authenticate(r); ok {
		return true
	}
	writeUnauthorized(w, h.auth.Challenge(), apifront.UnauthorizedMessage(r))
	return false
}

func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request, c *call) error {
	v := versionDoc(c.base)
	writeJSON(w, http.StatusOK, map[string]any{
		"name":            "OpenStack Ironic API",
		"description":     "Ironic is an OpenStack project which enables the provision and management of baremetal machines.",
		"default_version": v,
		"versions":        []any{v},
	})
	return nil
}

func versionDoc(base string) map[string]any {
	return map[string]any{
		"id":          "v1",
		"links":       []map[string]string{{"href": base + "/v1/", "rel": "self"}},
		"status":      "CURRENT",
		"min_version": MinVersion.String(),
		"version":     MaxVersion.String(),
	}
}

func (h *Handler) serveV1(w http.ResponseWriter, r *http.Request, c *call) error {
	res := func(name string) []map[string]string { return apifront.ResourceLinks(c.base, name) }
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "v1",
		"links": []map[string]string{
			{"href": c.base + "/v1/", "rel": "self"},
			{"href": "https://docs.openstack.org//ironic/latest/contributor//webapi.html", "rel": "describedby", "type": "text/html"},
		},
		"media_types": []map[string]string{{"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"}},
		"chassis":     res("chassis"),
		"nodes":       res("nodes"),
		"ports":       res("ports"),
		"drivers":     res("drivers"),
		"version":     versionDoc(c.base),
	})
	return nil
}

func (h *Handler) listChassis(w http.ResponseWriter, r *http.Request, c *call) error {
	writeJSON(w, http.StatusOK, map[string]any{"chassis": []any{}})
	return nil
}
