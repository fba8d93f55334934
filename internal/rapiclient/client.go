// Package rapiclient talks to a Corral (or Ganeti) RAPI v2 server over
// HTTPS and translates LUXI calls into RAPI requests, so the command line
// can manage a cluster from another machine through the same *luxi.Client
// it uses on the master (see Client.Call and luxi.NewCallClient).
package rapiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Defaults of Config's timeouts.
const (
	DefaultRequestTimeout = 2 * time.Minute
	DefaultDialTimeout    = 15 * time.Second
)

// maxResponseBytes bounds an answer; bulk lists of large clusters are big,
// so this matches the LUXI client's reply limit.
const maxResponseBytes = 256 << 20

// Config says how to reach a RAPI server.
type Config struct {
	// URL is the server's base, https://host:port (a path prefix is kept).
	URL string
	// User and Password are sent with Basic authentication; an empty User
	// sends none (anonymous reads only).
	User     string
	Password secret.Secret
	// CAPEM holds the certificates the server's chain must lead to; only
	// these are trusted, never the system's roots.
	CAPEM []byte
	// RequestTimeout bounds one request, waits for job changes included
	// (the server answers those within seconds); 0 means the default.
	RequestTimeout time.Duration
	// DialTimeout bounds connecting and the TLS handshake; 0 means the
	// default.
	DialTimeout time.Duration
}

// Client is a RAPI v2 client. It is safe for concurrent use and keeps its
// connections alive between requests.
type Client struct {
	base    *url.URL
	user    string
	pw      secret.Secret
	hc      *http.Client
	tr      *http.Transport
	timeout time.Duration
}

// New checks cfg and builds a Client; it does not connect.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "invalid RAPI URL %q: %v", cfg.URL, err)
	}
	if u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, ecode.Errorf(ecode.Inval, "invalid RAPI URL %q: want https://host:port", cfg.URL)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	pool := x509.NewCertPool()
	if len(cfg.CAPEM) == 0 || !pool.AppendCertsFromPEM(cfg.CAPEM) {
		return nil, ecode.Errorf(ecode.Inval, "no CA certificate to verify the RAPI server with")
	}
	c := &Client{base: u, user: cfg.User, pw: cfg.Password, timeout: cfg.RequestTimeout}
	if c.timeout <= 0 {
		c.timeout = DefaultRequestTimeout
	}
	dialTimeout := cfg.DialTimeout
	if dialTimeout <= 0 {
		dialTimeout = DefaultDialTimeout
	}
	c.tr = &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     serverTLS(pool, cfg.CAPEM),
		TLSHandshakeTimeout: dialTimeout,
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	c.hc = &http.Client{
		Transport: c.tr,
		// A redirect would carry the credentials elsewhere or drop them;
		// RAPI never redirects, so one is an error answer like any other.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// URL returns the server's base URL, for messages.
func (c *Client) URL() string { return c.base.String() }

// Close drops the idle connections.
func (c *Client) Close() error {
	c.tr.CloseIdleConnections()
	return nil
}

// TransportError is a failure to talk to the server at all (connection,
// TLS, timeout), as opposed to an error answer.
type TransportError struct {
	URL string
	Err error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("cannot reach the RAPI server at %s: %v", e.URL, e.Err)
}
func (e *TransportError) Unwrap() error { return e.Err }

// Do sends one request: body (if not nil) as JSON, query as the query
// string, and decodes a 200 answer into out (if not nil). An error answer
// comes back as an *ecode.Error (see DecodeError); a failure to reach the
// server as a *TransportError, or ctx's error when it ended first.
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	raw, err := c.do(ctx, method, path, query, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("decoding the answer to %s %s: %v", method, path, err))
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, query url.Values, body any) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// path comes escaped already (names go through url.PathEscape).
	target := c.base.String() + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("rapiclient: encoding the body of %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmt.Errorf("rapiclient: %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "corral-rapiclient")
	if c.user != "" {
		req.SetBasicAuth(c.user, c.pw.Reveal())
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportErr(ctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return nil, c.transportErr(ctx, err)
	}
	if len(data) > maxResponseBytes {
		return nil, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("the answer to %s %s exceeds %d bytes", method, path, maxResponseBytes))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, c.answerErr(resp.StatusCode, data, method, path)
	}
	return data, nil
}

func (c *Client) transportErr(ctx context.Context, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // the URL comes with TransportError
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return fmt.Errorf("rapiclient: %s: %w", c.base, ctx.Err())
	}
	return &TransportError{URL: c.base.String(), Err: err}
}

// answerErr decodes an error answer, making the statuses whose body says
// little (authentication, bare 404) speak of what was asked.
func (c *Client) answerErr(status int, data []byte, method, path string) error {
	e := DecodeError(status, data)
	switch status {
	case http.StatusUnauthorized:
		who := "anonymous requests are"
		if c.user != "" {
			who = fmt.Sprintf("user %q or its password is", c.user)
		}
		e.Msg = fmt.Sprintf("the RAPI server at %s refused the credentials: %s not accepted", c.base, who)
	case http.StatusForbidden:
		e.Msg = fmt.Sprintf("the RAPI server at %s does not allow user %q to %s %s (it needs the write option)", c.base, c.user, method, path)
	case http.StatusNotFound:
		if e.Msg == "" || e.Msg == http.StatusText(http.StatusNotFound) {
			e.Msg = fmt.Sprintf("not found: %s", path)
		}
	}
	return e
}

// serverTLS verifies the RAPI server against the CA file: a chain to one of
// its certificates that names the host, as usual, or, without the name, a
// server certificate that is itself one of the file's certificates. The
// second is how Ganeti's RAPI certificate is used: self-signed, given as
// its own CA file, and named ganeti.example.com whatever the host.
// Anything else is refused.
func serverTLS(pool *x509.CertPool, caPEM []byte) *tls.Config {
	pinned := pemCertificates(caPEM)
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the RAPI server presented no certificate")
			}
			leaf := cs.PeerCertificates[0]
			for _, p := range pinned {
				if bytes.Equal(p.Raw, leaf.Raw) {
					return nil
				}
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, DNSName: cs.ServerName})
			return err
		},
	}
}

// pemCertificates parses every certificate in a PEM text, skipping what
// does not parse.
func pemCertificates(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, c)
		}
	}
}
