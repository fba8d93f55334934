// Package kube is the little of the Kubernetes API Corral needs to run
// COE clusters: readiness, nodes (list, create kwok nodes, delete, label,
// cordon) and pods per node. It speaks JSON over HTTPS with net/http and a
// client certificate, without client-go, which the main module does not
// carry.
package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Bounds on what the client reads.
const (
	maxErrorBody = 64 << 10
	maxListBody  = 256 << 20
	pageSize     = 500
	// DefaultTimeout bounds one request when the caller's context has
	// no deadline.
	DefaultTimeout = 30 * time.Second
)

// Client talks to one cluster's API server.
type Client struct {
	server string
	hc     *http.Client
}

// New makes a client for the API server at server (https://host:port)
// that trusts caPEM and authenticates with the client certificate.
func New(server string, caPEM, certPEM []byte, keyPEM secret.Secret) (*Client, error) {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, ecode.Errorf(ecode.Inval, "kube: server %q is not an https URL", server)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, ecode.Errorf(ecode.Inval, "kube: no CA certificate in the trust PEM")
	}
	pair, err := tls.X509KeyPair(certPEM, []byte(keyPEM.Reveal()))
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "kube: client certificate: %w", err)
	}
	tr := &http.Transport{
		TLSClientConfig: &tls.Config{
			RootCAs:      pool,
			Certificates: []tls.Certificate{pair},
			MinVersion:   tls.VersionTLS12,
		},
		ForceAttemptHTTP2:   true,
		TLSHandshakeTimeout: 10 * time.Second,
		IdleConnTimeout:     90 * time.Second,
	}
	return &Client{server: strings.TrimRight(server, "/"), hc: &http.Client{Transport: tr}}, nil
}

// Close drops the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// APIError is an error status from the API server.
type APIError struct {
	Code    int
	Reason  string // the Status object's reason, e.g. NotFound, AlreadyExists
	Message string
}

func (e *APIError) Error() string {
	if m := e.Message; m != "" {
		if len(m) > 300 {
			m = m[:300] + "..."
		}
		return fmt.Sprintf("%d %s: %s", e.Code, e.Reason, m)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Reason)
}

// class maps an API status to Corral's error classes.
func (e *APIError) class() ecode.Class {
	switch {
	case e.Code == http.StatusNotFound:
		return ecode.NoEnt
	case e.Code == http.StatusConflict && e.Reason == "AlreadyExists":
		return ecode.Exists
	case e.Code == http.StatusConflict:
		return ecode.State
	case e.Code == http.StatusBadRequest || e.Code == http.StatusUnprocessableEntity:
		return ecode.Inval
	case e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden:
		return ecode.Environ
	case e.Code == http.StatusTooManyRequests || e.Code == http.StatusServiceUnavailable:
		return ecode.TempNoRes
	}
	return ecode.Fault
}

// do sends a request with an optional JSON body and decodes a JSON answer
// into out (when not nil). Error statuses become *ecode.Error wrapping an
// *APIError.
func (c *Client) do(ctx context.Context, method, path string, contentType string, body any, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("kube: encode %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("kube: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return apiError(method, path, resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxListBody)).Decode(out); err != nil {
		return fmt.Errorf("kube: decode the answer to %s %s: %w", method, path, err)
	}
	return nil
}

func apiError(method, path string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &APIError{Code: resp.StatusCode, Reason: http.StatusText(resp.StatusCode)}
	var st struct {
		Kind    string `json:"kind"`
		Reason  string `json:"reason"`
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
		if st.Reason != "" {
			e.Reason = st.Reason
		}
		e.Message = st.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return &ecode.Error{Kind: ecode.OpExecError, Class: e.class(), Msg: fmt.Sprintf("kube: %s %s: %v", method, path, e), Err: e}
}

// Readyz asks the API server whether it is ready; the error lists the
// checks that failed.
func (c *Client) Readyz(ctx context.Context) error {
	err := c.do(ctx, http.MethodGet, "/readyz", "", nil, nil)
	var ae *APIError
	if errors.As(err, &ae) && ae.Code == http.StatusInternalServerError {
		// The body lists every check, [-] for those that failed.
		var failed []string
		for _, l := range strings.Split(ae.Message, "\n") {
			if strings.HasPrefix(l, "[-]") {
				failed = append(failed, strings.TrimPrefix(l, "[-]"))
			}
		}
		if len(failed) > 0 {
			return ecode.Errorf(ecode.TempNoRes, "kube: API server not ready: %s", strings.Join(failed, "; "))
		}
	}
	return err
}
