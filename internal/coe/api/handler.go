package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/corral/corral/internal/apifront"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/metrics"
)

// maxBodyBytes bounds a request body: the largest is a CSR or a template.
const maxBodyBytes = 1 << 20

// Realm is the HTTP Basic realm.
const Realm = "Container Infra API"

const requestIDHeader = "X-Openstack-Request-Id"

// Authenticator proves who a request comes from.
type Authenticator interface {
	// Authenticate returns the caller r's credentials prove; false when
	// r carries none or they do not match.
	Authenticate(r *http.Request) (Caller, bool)
	// Challenge is the WWW-Authenticate value of a 401 ("" for none).
	Challenge() string
}

// NoAuth is OpenStack's noauth strategy: every request comes from As.
type NoAuth struct{ As Caller }

// Authenticate implements Authenticator.
func (n NoAuth) Authenticate(*http.Request) (Caller, bool) { return n.As, true }

// Challenge implements Authenticator.
func (NoAuth) Challenge() string { return "" }

// Config configures a Handler.
type Config struct {
	Backend    Backend
	Auth       Authenticator // required
	MaxClients int           // requests served at once; 0: unlimited
	Log        *slog.Logger
}

// Handler serves the Container Infra API v1.
type Handler struct {
	be      Backend
	auth    Authenticator
	limit   *apifront.Limiter
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *apifront.RequestMetrics
}

// NewHandler builds a Handler.
func NewHandler(cfg Config) *Handler {
	h := &Handler{be: cfg.Backend, auth: cfg.Auth, log: cfg.Log}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.limit = apifront.NewLimiter(cfg.MaxClients)
	h.metrics = apifront.NewRequestMetrics("coe", "Container Infra API")
	h.mux = http.NewServeMux()
	h.routes()
	return h
}

// Metrics is the API's own metrics registry.
func (h *Handler) Metrics() *metrics.Registry { return h.metrics.Registry }

// call is what a route's function gets besides the request: the version
// served, the service root for links and the caller.
type call struct {
	v    Version
	base string
	who  Caller
}

type callKey struct{}

// route adds a route; public routes (discovery) need no credentials.
func (h *Handler) route(pattern string, public bool, fn func(http.ResponseWriter, *http.Request, *call) error) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(callKey{}).(*call)
		if !public {
			who, ok := h.authenticated(w, r)
			if !ok {
				return
			}
			c.who = who
		}
		if err := fn(w, r, c); err != nil {
			h.writeError(w, r, err)
		}
	})
}

func (h *Handler) routes() {
	h.route("GET /{$}", true, h.serveRoot)
	h.route("GET /v1", true, h.serveV1)
	h.route("GET /v1/clustertemplates", false, h.listTemplates)
	h.route("GET /v1/clustertemplates/detail", false, h.listTemplates)
	h.route("POST /v1/clustertemplates", false, h.createTemplate)
	h.route("GET /v1/clustertemplates/{ident}", false, h.showTemplate)
	h.route("PATCH /v1/clustertemplates/{ident}", false, h.patchTemplate)
	h.route("DELETE /v1/clustertemplates/{ident}", false, h.deleteTemplate)
	h.route("GET /v1/clusters", false, h.listClusters)
	h.route("GET /v1/clusters/detail", false, h.listClustersDetail)
	h.route("POST /v1/clusters", false, h.createCluster)
	h.route("GET /v1/clusters/{ident}", false, h.showCluster)
	h.route("PATCH /v1/clusters/{ident}", false, h.patchCluster)
	h.route("DELETE /v1/clusters/{ident}", false, h.deleteCluster)
	h.route("POST /v1/clusters/{ident}/actions/resize", false, h.resizeCluster)
	h.route("POST /v1/clusters/{ident}/actions/upgrade", false, h.upgradeCluster)
	h.route("GET /v1/clusters/{ident}/nodegroups", false, h.listNodeGroups)
	h.route("GET /v1/clusters/{ident}/nodegroups/detail", false, h.listNodeGroupsDetail)
	h.route("POST /v1/clusters/{ident}/nodegroups", false, h.createNodeGroup)
	h.route("GET /v1/clusters/{ident}/nodegroups/{ng}", false, h.showNodeGroup)
	h.route("PATCH /v1/clusters/{ident}/nodegroups/{ng}", false, h.patchNodeGroup)
	h.route("DELETE /v1/clusters/{ident}/nodegroups/{ng}", false, h.deleteNodeGroup)
	h.route("GET /v1/certificates/{cluster}", false, h.showCA)
	h.route("POST /v1/certificates", false, h.signCSR)
	h.route("PATCH /v1/certificates/{cluster}", false, h.rotateCA)
	h.route("GET /v1/federations", false, h.listFederations)
	h.route("GET /v1/federations/detail", false, h.listFederationsDetail)
	h.route("POST /v1/federations", false, h.createFederation)
	h.route("GET /v1/federations/{ident}", false, h.showFederation)
	h.route("PATCH /v1/federations/{ident}", false, h.patchFederation)
	h.route("DELETE /v1/federations/{ident}", false, h.deleteFederation)
	h.route("GET /v1/quotas", false, h.listQuotas)
	h.route("POST /v1/quotas", false, h.createQuota)
	h.route("GET /v1/quotas/{project}/{resource}", false, h.showQuota)
	h.route("PATCH /v1/quotas/{project}/{resource}", false, h.updateQuota)
	h.route("DELETE /v1/quotas/{project}/{resource}", false, h.deleteQuota)
	h.route("GET /v1/stats", false, h.stats)
	h.route("GET /v1/mservices", false, h.listServices)
	h.route("/", true, func(http.ResponseWriter, *http.Request, *call) error {
		return errorf(http.StatusNotFound, "The resource could not be found.")
	})
}

// ServeHTTP implements http.Handler: limits, the path's normal form,
// version negotiation and headers, then the route.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w, done := h.metrics.Instrument(w, r, h.routeLabel)
	defer done()
	w.Header().Set(requestIDHeader, "req-"+config.NewUUID())
	release, ok := h.limit.Acquire()
	if !ok {
		h.writeError(w, r, errorf(http.StatusServiceUnavailable, "Too many concurrent requests, please retry."))
		return
	}
	defer release()
	c := &call{base: apifront.ServiceRoot(r), v: MinVersion}
	if p := normalPath(r.URL.Path); p != r.URL.Path {
		r = r.Clone(r.Context())
		r.URL.Path, r.URL.RawPath = p, ""
	}
	if p := r.URL.Path; p == "/v1" || strings.HasPrefix(p, "/v1/") {
		hd := w.Header()
		hd.Set(minVersionHeader, headerValue(MinVersion))
		hd.Set(maxVersionHeader, headerValue(MaxVersion))
		hd.Set("Vary", versionHeader)
		v, outOfRange, err := negotiate(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		hd.Set(versionHeader, headerValue(v))
		if outOfRange {
			h.writeError(w, r, notAcceptable(
				"Version %s was requested but the minor version is not supported by this service. The supported version range is: [%s, %s].",
				v, headerValue(MinVersion), headerValue(MaxVersion)))
			return
		}
		c.v = v
	}
	h.mux.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
}

// normalPath drops a trailing slash (the client lists node groups at
// .../nodegroups/) and routes a path without the version prefix to v1, as
// Magnum routes any first segment other than a version (a client whose
// endpoint lacks /v1 asks for /clusters).
func normalPath(p string) string {
	if len(p) > 1 {
		p = "/" + strings.Trim(p, "/")
	}
	if p == "/" || p == "/v1" || strings.HasPrefix(p, "/v1/") {
		return p
	}
	return "/v1" + p
}

// routeLabel is the route's pattern, for metrics.
func (h *Handler) routeLabel(r *http.Request) string { return apifront.RouteLabel(h.mux, r) }

// authenticated checks the request's credentials, answering 401 itself
// when they are missing or wrong.
func (h *Handler) authenticated(w http.ResponseWriter, r *http.Request) (Caller, bool) {
	if who, ok := h.auth.Authenticate(r); ok {
		return who, true
	}
	writeUnauthorized(w, h.auth.Challenge(), apifront.UnauthorizedMessage(r))
	return Caller{}, false
}

func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request, c *call) error {
	writeJSON(w, http.StatusOK, map[string]any{
		"name":        "OpenStack Magnum API",
		"description": "Magnum is an OpenStack project which aims to provide container cluster management.",
		"versions": []any{map[string]any{
			"id":          "v1",
			"links":       []map[string]string{{"href": c.base + "/v1/", "rel": "self"}},
			"status":      "CURRENT",
			"max_version": MaxVersion.String(),
			"min_version": MinVersion.String(),
		}},
	})
	return nil
}

func (h *Handler) serveV1(w http.ResponseWriter, r *http.Request, c *call) error {
	res := func(name string) []map[string]string { return apifront.ResourceLinks(c.base, name) }
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "v1",
		"links": []map[string]string{
			{"href": c.base + "/v1/", "rel": "self"},
			{"href": "http://docs.openstack.org/developer/magnum/dev/api-spec-v1.html", "rel": "describedby", "type": "text/html"},
		},
		"media_types":      []map[string]string{{"base": "application/json", "type": "application/vnd.openstack.magnum.v1+json"}},
		"clustertemplates": res("clustertemplates"),
		"clusters":         res("clusters"),
		"certificates":     res("certificates"),
		"mservices":        res("mservices"),
		"quotas":           res("quotas"),
		"stats":            res("stats"),
		"federations":      res("federations"),
	})
	return nil
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code, data = http.StatusInternalServerError, []byte(`{"errors": [{"request_id": "", "code": "server", "status": 500, "title": "reply encoding failed", "detail": "reply encoding failed", "links": []}]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

// noContent answers 204.
func noContent(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }
