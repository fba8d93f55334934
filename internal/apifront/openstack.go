package apifront

import (
	"net/http"
	"strings"
)

// What the OpenStack-style APIs on the front (Bare Metal, Container Infra)
// share beyond listeners and authentication: links to the service root,
// route labels for metrics and the 401 wording.

// ServiceRoot is the URL of the service root the client used, for links.
func ServiceRoot(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// ResourceLinks are a v1 discovery document's self and bookmark links to
// the collection name.
func ResourceLinks(base, name string) []map[string]string {
	return []map[string]string{
		{"href": base + "/v1/" + name + "/", "rel": "self"},
		{"href": base + "/" + name + "/", "rel": "bookmark"},
	}
}

// RouteLabel is the pattern of the mux's route for r (never the path,
// whose names would make a metric series each), "unmatched" for none.
func RouteLabel(mux *http.ServeMux, r *http.Request) string {
	_, pattern := mux.Handler(r)
	if pattern == "" || pattern == "/" {
		return "unmatched"
	}
	if _, p, ok := strings.Cut(pattern, " "); ok {
		return p
	}
	return pattern
}

// UnauthorizedMessage is the 401 text OpenStack services give: no
// credentials, or wrong ones.
func UnauthorizedMessage(r *http.Request) string {
	if r.Header.Get("Authorization") == "" {
		return "Authorization required"
	}
	return "Incorrect username or password"
}
