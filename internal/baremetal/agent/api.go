package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/baremetal/agentapi"
)

// statusVersion is the first Bare Metal API version whose heartbeat takes
// agent_status; lookupVersion the first with lookup.
const (
	statusVersion = "1.72"
	lookupVersion = "1.22"
)

// apiClient is the agent's client of the Bare Metal API.
type apiClient struct {
	base    string
	hc      *http.Client
	version string // the API version sent, negotiated once
}

// tlsConfig accepts a server whose chain verifies against the system's
// roots or contains the pinned certificate (its SHA-256 over DER): a leaf
// equal to the pin is accepted as is, a CA equal to it must sign the leaf.
func tlsConfig(pin []byte) *tls.Config {
	if len(pin) == 0 {
		return &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection below
		VerifyConnection: func(cs tls.ConnectionState) error {
			certs := cs.PeerCertificates
			if len(certs) == 0 {
				return errors.New("the server sent no certificate")
			}
			for i, c := range certs {
				sum := sha256.Sum256(c.Raw)
				if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
					continue
				}
				if i == 0 {
					return nil
				}
				roots, inter := x509.NewCertPool(), x509.NewCertPool()
				roots.AddCert(c)
				for _, ic := range certs[1:i] {
					inter.AddCert(ic)
				}
				_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: cs.ServerName})
				return err
			}
			inter := x509.NewCertPool()
			for _, ic := range certs[1:] {
				inter.AddCert(ic)
			}
			if _, err := certs[0].Verify(x509.VerifyOptions{Intermediates: inter, DNSName: cs.ServerName}); err != nil {
				return fmt.Errorf("the server's certificate is neither pinned nor trusted: %w", err)
			}
			return nil
		},
	}
}

// newHTTPClient returns a client with bounded timeouts for the API or the
// image server.
func newHTTPClient(pin []byte, timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}).DialContext,
		TLSClientConfig:       tlsConfig(pin),
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       60 * time.Second,
	}}
}

// negotiate reads the API's newest version from its root document and
// picks the version the agent sends: the newest it knows that the API has.
func (a *apiClient) negotiate(ctx context.Context) {
	a.version = lookupVersion
	var root struct {
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	if err := a.call(ctx, http.MethodGet, "/", nil, &root); err != nil {
		return
	}
	if v := root.DefaultVersion.Version; versionAtLeast(v, statusVersion) {
		a.version = statusVersion
	} else if versionAtLeast(v, lookupVersion) {
		a.version = v
	}
}

// versionAtLeast compares "1.x" versions.
func versionAtLeast(v, min string) bool {
	minor := func(s string) int {
		_, m, ok := strings.Cut(s, ".")
		if !ok {
			return -1
		}
		n, err := strconv.Atoi(m)
		if err != nil {
			return -1
		}
		return n
	}
	return strings.HasPrefix(v, "1.") && minor(v) >= minor(min)
}

// lookup asks the API which machine has these MAC addresses.
func (a *apiClient) lookup(ctx context.Context, macs []string) (*agentapi.LookupReply, error) {
	var r agentapi.LookupReply
	q := url.Values{"addresses": {strings.Join(macs, ",")}}
	if err := a.call(ctx, http.MethodGet, "/v1/lookup?"+q.Encode(), nil, &r); err != nil {
		return nil, fmt.Errorf("lookup: %w", err)
	}
	if r.Node.UUID == "" {
		return nil, errors.New("lookup: the reply names no machine")
	}
	if r.Config.AgentTokenRequired && r.Config.AgentToken == "" {
		return nil, errors.New("lookup: the API requires an agent token but sent none")
	}
	return &r, nil
}

// heartbeat tells the API the agent is alive and where to call it.
func (a *apiClient) heartbeat(ctx context.Context, uuid string, hb agentapi.Heartbeat) error {
	if a.version != statusVersion {
		hb.AgentStatus = ""
	}
	body, err := json.Marshal(hb)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	if err := a.call(ctx, http.MethodPost, "/v1/heartbeat/"+url.PathEscape(uuid), body, nil); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// httpStatusError is a reply of the API with an error status.
type httpStatusError struct {
	Status int
	Body   string
}

func (e *httpStatusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

func (a *apiClient) call(ctx context.Context, method, path string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if a.version != "" {
		req.Header.Set("X-OpenStack-Ironic-API-Version", a.version)
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the reply: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return &httpStatusError{Status: resp.StatusCode, Body: msg}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the reply is not JSON: %w", method, path, err)
	}
	return nil
}
