// Package move moves instances between two clusters through their RAPI
// servers only, the way Ganeti's move-instance tool does (spec ganeti.md
// 4.7): the source cluster exports over the network straight into an
// instance the destination cluster creates in remote-import mode, both sides
// proving with the shared cluster domain secret that the other is genuine.
// This package is the third party of that exchange: it never sees the
// instance's data, only carries handshakes, certificates and listener
// addresses from one cluster to the other.
package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/rapiclient"
)

// Doer sends one RAPI request; *rapiclient.Client is one.
type Doer interface {
	Do(ctx context.Context, method, path string, query url.Values, body, out any) error
}

// Side names a cluster's role in a move.
type Side string

// The two sides of a move.
const (
	Source      Side = "source"
	Destination Side = "destination"
)

// Cluster is one side's RAPI server.
type Cluster struct {
	// Name is how messages call the cluster (its URL).
	Name string
	// User is the RAPI user the client logs in as, for messages.
	User   string
	Client Doer
}

// SideError is a failure on one side, saying which and why.
type SideError struct {
	Side Side
	Err  error
}

func (e *SideError) Error() string { return fmt.Sprintf("%s cluster: %s", e.Side, e.Err) }
func (e *SideError) Unwrap() error { return e.Err }

// sideErr turns a request's failure into a SideError whose message says
// what went wrong in the operator's terms: refused credentials, missing
// write access, an unreachable server.
func (c *Cluster) sideErr(side Side, err error) error {
	if err == nil {
		return nil
	}
	var se *SideError
	if errors.As(err, &se) {
		return err
	}
	var te *rapiclient.TransportError
	if errors.As(err, &te) {
		return &SideError{Side: side, Err: fmt.Errorf("cannot reach the RAPI server at %s: %w", te.URL, te.Err)}
	}
	if e, ok := ecode.As(err); ok && e.Kind == ecode.PermissionDenied {
		who := fmt.Sprintf("user %q", c.User)
		if c.User == "" {
			who = "anonymous requests (give a user name)"
		}
		// rapiclient words a 401 as refused credentials, a 403 as a
		// missing write option.
		if strings.Contains(e.Msg, "refused the credentials") {
			return &SideError{Side: side, Err: &ecode.Error{Kind: e.Kind, Class: e.Class,
				Msg: fmt.Sprintf("authentication failed for %s at %s", who, c.Name), Err: err}}
		}
		return &SideError{Side: side, Err: &ecode.Error{Kind: e.Kind, Class: e.Class,
			Msg: fmt.Sprintf("%s may not change anything at %s (the RAPI user needs the write option)", who, c.Name), Err: err}}
	}
	return &SideError{Side: side, Err: err}
}

// instancePath is the path of an instance resource, with sub appended.
func instancePath(name, sub string) string {
	p := "/2/instances/" + url.PathEscape(name)
	if sub != "" {
		p += "/" + sub
	}
	return p
}

// version checks that the server speaks RAPI version 2.
func (c *Cluster) version(ctx context.Context) error {
	var v json.RawMessage
	if err := c.Client.Do(ctx, http.MethodGet, "/version", nil, nil, &v); err != nil {
		return err
	}
	if n, err := strconv.Atoi(strings.Trim(string(v), `" `)); err != nil || n != 2 {
		return ecode.Errorf(ecode.Environ, "%s answers RAPI version %s, want 2", c.Name, v)
	}
	return nil
}

// submit sends a job-submitting request and returns the job id, which a
// server may send as a number or (Ganeti 2.6 and older) a string.
func (c *Cluster) submit(ctx context.Context, method, path string, query url.Values, body any) (int64, error) {
	var raw json.RawMessage
	if err := c.Client.Do(ctx, method, path, query, body, &raw); err != nil {
		return 0, err
	}
	return parseJobID(raw)
}

func parseJobID(raw json.RawMessage) (int64, error) {
	s := strings.Trim(strings.TrimSpace(string(raw)), `"`)
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 0 {
		return 0, ecode.New(ecode.GenericError, ecode.Fault, fmt.Sprintf("the server answered %.40q instead of a job id", string(raw)))
	}
	return id, nil
}
