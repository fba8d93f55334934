package agentapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client is the conductor's side of the agent API for one boot of one
// machine. Each Client owns its own HTTP transport: a pooled connection
// from a previous boot survives a hard power-off (no FIN) and the new
// agent answers it with a reset, so connections are never shared across
// boots. Make a new Client for every boot (every new callback URL or
// token) and Close it when the boot is over.
type Client struct {
	base        *url.URL
	token       string
	hc          *http.Client
	tr          *http.Transport
	timeout     time.Duration
	waitTimeout time.Duration
}

// ClientOptions tune a Client; the zero value is usable.
type ClientOptions struct {
	// Timeout bounds one request without wait=true (default 30 s).
	Timeout time.Duration
	// WaitTimeout bounds a request with wait=true, which lasts as long as
	// the command (default 10 min).
	WaitTimeout time.Duration
	// TLS is used when the callback URL is https (agent_verify_ca).
	TLS *tls.Config
	// DialContext opens the client's connections (default: a dialer of
	// the host's network): corral-node passes one that dials inside the
	// namespace of its provisioning networks, where the agents are.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// maxReplyBytes bounds what the client reads from an agent's reply.
const maxReplyBytes = 4 << 20

// NewClient returns a client for the agent at callbackURL (as the agent
// heartbeats it) using the boot's agent token.
func NewClient(callbackURL, token string, o ClientOptions) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(callbackURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("agent callback URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("agent callback URL %q: want http(s)://host:port", callbackURL)
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = 10 * time.Minute
	}
	dial := o.DialContext
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}).DialContext
	}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dial,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     30 * time.Second,
		TLSClientConfig:     o.TLS,
	}
	return &Client{base: u, token: token, tr: tr, hc: &http.Client{Transport: tr},
		timeout: o.Timeout, waitTimeout: o.WaitTimeout}, nil
}

// Close drops the client's pooled connections.
func (c *Client) Close() { c.tr.CloseIdleConnections() }

// RunCommand posts a command. With wait the agent replies when the command
// has finished; without, asynchronous commands reply RUNNING at once and
// are followed with Command. params is marshalled as the command's params.
func (c *Client) RunCommand(ctx context.Context, name string, params any, wait bool) (*CommandResult, error) {
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("agent command %s: params: %w", name, err)
	}
	if params == nil {
		raw = []byte("{}")
	}
	body, err := json.Marshal(CommandRequest{Name: name, Params: raw})
	if err != nil {
		return nil, fmt.Errorf("agent command %s: %w", name, err)
	}
	q := url.Values{"wait": {fmt.Sprint(wait)}}
	timeout := c.timeout
	if wait {
		timeout = c.waitTimeout
	}
	var res CommandResult
	if err := c.do(ctx, timeout, http.MethodPost, "/v1/commands/", q, body, &res); err != nil {
		return nil, fmt.Errorf("agent command %s: %w", name, err)
	}
	return &res, nil
}

// Commands lists the commands the agent has run this boot, oldest first.
func (c *Client) Commands(ctx context.Context) ([]CommandResult, error) {
	var l CommandList
	if err := c.do(ctx, c.timeout, http.MethodGet, "/v1/commands/", url.Values{}, nil, &l); err != nil {
		return nil, fmt.Errorf("agent command list: %w", err)
	}
	return l.Commands, nil
}

// Command returns one command's current status.
func (c *Client) Command(ctx context.Context, id string) (*CommandResult, error) {
	var res CommandResult
	if err := c.do(ctx, c.timeout, http.MethodGet, "/v1/commands/"+url.PathEscape(id), url.Values{}, nil, &res); err != nil {
		return nil, fmt.Errorf("agent command %s: %w", id, err)
	}
	return &res, nil
}

// AgentError is an agent's refusal (HTTP status 400 and above).
type AgentError struct {
	Status  int
	Message string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("agent replied %d: %s", e.Status, e.Message)
}

// do runs one request. Errors name the method and path but never the
// query, which carries the token.
func (c *Client) do(ctx context.Context, timeout time.Duration, method, path string, q url.Values, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	if c.token != "" {
		q.Set("agent_token", c.token)
	}
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, errors.New("cannot build request"))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s%s: %w", method, c.base.Host, path, stripURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return fmt.Errorf("%s %s%s: reading reply: %w", method, c.base.Host, path, stripURL(err))
	}
	if resp.StatusCode >= 400 {
		return &AgentError{Status: resp.StatusCode, Message: errorMessage(data)}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s%s: reply is not the agent's JSON: %w", method, c.base.Host, path, err)
	}
	return nil
}

// stripURL removes the url.Error wrapper, whose text holds the full URL
// with the token, keeping the cause.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// errorMessage extracts the message of an agent's error body, bounded.
func errorMessage(data []byte) string {
	var e ErrorReply
	if json.Unmarshal(data, &e) == nil {
		switch {
		case e.Message != "":
			return e.Message
		case e.FaultString != "":
			return e.FaultString
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
