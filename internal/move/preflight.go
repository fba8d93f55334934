package move

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/rapiclient"
)

// Check is one line of a preflight checklist.
type Check struct {
	What string
	// State is ok, FAILED or skipped (when a check it needs failed).
	State  string
	Detail string
}

// Check states.
const (
	CheckOK      = "ok"
	CheckFailed  = "FAILED"
	CheckSkipped = "skipped"
)

// Checklist is a preflight's result.
type Checklist []Check

// Failed says whether any check failed (or could not run).
func (cl Checklist) Failed() bool {
	for _, c := range cl {
		if c.State != CheckOK {
			return true
		}
	}
	return false
}

// Write prints the checklist, one check per line.
func (cl Checklist) Write(w io.Writer) error {
	for _, c := range cl {
		line := fmt.Sprintf("%-8s %s", c.State, c.What)
		if c.Detail != "" {
			line += ": " + c.Detail
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}

// checker accumulates a checklist.
type checker struct{ list Checklist }

// run records check what: skipped unless every need passed, else ok or
// FAILED by what f returns.
func (k *checker) run(what string, needs []bool, f func() (string, error)) bool {
	for _, ok := range needs {
		if !ok {
			k.list = append(k.list, Check{What: what, State: CheckSkipped, Detail: "an earlier check failed"})
			return false
		}
	}
	detail, err := f()
	if err != nil {
		k.list = append(k.list, Check{What: what, State: CheckFailed, Detail: err.Error()})
		return false
	}
	k.list = append(k.list, Check{What: what, State: CheckOK, Detail: detail})
	return true
}

// Preflight checks, without moving any data or changing anything, that the
// requests could move: both clusters answer RAPI version 2, the credentials
// are accepted with write access, each instance exists, the source prepares
// the export in dry-run mode (it signs a handshake but makes no transfer
// certificate), and the destination accepts the remote-import creation in
// dry-run mode, which proves the clusters share the domain secret, the name
// is free and the destination has the room, hypervisor and disk template.
func (m *Mover) Preflight(ctx context.Context, reqs []Request) Checklist {
	k := &checker{}
	src, dst := m.Src, m.Dest
	srcUp := k.run(fmt.Sprintf("source cluster %s answers (RAPI version 2)", src.Name), nil, func() (string, error) {
		return "", src.sideErr(Source, src.version(ctx))
	})
	dstUp := k.run(fmt.Sprintf("destination cluster %s answers (RAPI version 2)", dst.Name), nil, func() (string, error) {
		return "", dst.sideErr(Destination, dst.version(ctx))
	})
	srcW := k.run("source credentials allow changes", []bool{srcUp}, func() (string, error) {
		return writeAccess(ctx, src, Source)
	})
	dstW := k.run("destination credentials allow changes", []bool{dstUp}, func() (string, error) {
		return writeAccess(ctx, dst, Destination)
	})
	for _, req := range reqs {
		m.preflightOne(ctx, k, req, srcUp && srcW, dstUp && dstW)
	}
	return k.list
}

// writeAccess sends a write request that changes nothing (an empty cluster
// tag set in dry-run mode): any answer but 401/403 shows the user may write.
func writeAccess(ctx context.Context, c *Cluster, side Side) (string, error) {
	err := c.Client.Do(ctx, http.MethodPut, "/2/tags", url.Values{"dry-run": {"1"}}, nil, nil)
	var te *rapiclient.TransportError
	if e, ok := ecode.As(err); (ok && e.Kind == ecode.PermissionDenied) || errors.As(err, &te) || ctx.Err() != nil {
		return "", c.sideErr(side, err)
	}
	who := "anonymous"
	if c.User != "" {
		who = fmt.Sprintf("user %q", c.User)
	}
	return who + " has write access", nil
}

func (m *Mover) preflightOne(ctx context.Context, k *checker, req Request, srcOK, dstOK bool) {
	src, dst, name := m.Src, m.Dest, req.Instance
	f := func(side Side, c *Cluster) *follower {
		return &follower{c: c, side: side, grace: m.grace}
	}
	var d *Details
	found := k.run(fmt.Sprintf("instance %s exists on the source", name), []bool{srcOK}, func() (string, error) {
		var inst struct {
			Tags []string `json:"tags"`
		}
		if err := src.Client.Do(ctx, http.MethodGet, instancePath(name, ""), nil, nil, &inst); err != nil {
			if ecode.ClassOf(err) == ecode.NoEnt {
				return "", &SideError{Side: Source, Err: ecode.Errorf(ecode.NoEnt, "instance %s not found on %s", name, src.Name)}
			}
			return "", src.sideErr(Source, err)
		}
		id, err := src.submit(ctx, http.MethodGet, instancePath(name, "info"), url.Values{"static": {"1"}}, nil)
		if err != nil {
			return "", src.sideErr(Source, err)
		}
		raw, err := f(Source, src).follow(ctx, id)
		if err != nil {
			return "", src.sideErr(Source, err)
		}
		if d, err = ParseDetails(raw); err != nil {
			return "", src.sideErr(Source, err)
		}
		d.Tags = inst.Tags
		return fmt.Sprintf("disk template %s, %d disk(s), %d NIC(s), state %s", d.DiskTemplate, len(d.Disks), len(d.NICs), d.ConfigState), nil
	})
	var exp *ExportInfo
	prepared := k.run(fmt.Sprintf("source prepares the export of %s", name), []bool{found}, func() (string, error) {
		id, err := src.submit(ctx, http.MethodPut, instancePath(name, "prepare-export"), url.Values{"mode": {"remote"}, "dry-run": {"1"}}, nil)
		if err != nil {
			return "", src.sideErr(Source, err)
		}
		raw, err := f(Source, src).follow(ctx, id)
		if err != nil {
			return "", src.sideErr(Source, err)
		}
		if exp, err = parseExportInfo(raw, true); err != nil {
			return "", src.sideErr(Source, err)
		}
		return "handshake signed (dry run: no transfer certificate made)", nil
	})
	k.run(fmt.Sprintf("destination accepts %s as %s (dry run)", name, req.destName()), []bool{prepared, dstOK}, func() (string, error) {
		body, err := CreateBody(d, exp, req.Overrides, false)
		if err != nil {
			return "", err
		}
		id, err := dst.submit(ctx, http.MethodPost, "/2/instances", url.Values{"dry-run": {"1"}}, body)
		if err != nil {
			return "", dst.sideErr(Destination, explainRefusal(err))
		}
		raw, err := f(Destination, dst).follow(ctx, id)
		if err != nil {
			return "", dst.sideErr(Destination, explainRefusal(err))
		}
		detail := "domain secret shared, name free, room found"
		if s := strings.TrimSpace(string(raw)); s != "" && s != "null" {
			detail += ", nodes " + s
		}
		return detail, nil
	})
}

// explainRefusal adds what an operator can do about the refusals a move
// preflight exists to catch.
func explainRefusal(err error) error {
	e, ok := ecode.As(err)
	if !ok {
		return err
	}
	msg := strings.ToLower(e.Msg)
	hint := ""
	switch {
	case strings.Contains(msg, "domain secret"):
		hint = "the clusters must share the cluster domain secret (corral cluster pair, or renew-crypto --cluster-domain-secret)"
	case strings.Contains(msg, "certificate"):
		hint = "the source's transfer certificate was refused (clock skew or another domain secret?)"
	}
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w; %s", err, hint)
}
