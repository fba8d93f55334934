package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Defaults of Mover's settings.
const (
	// DefaultOpportunisticDelay is Ganeti's DEFAULT_OPPORTUNISTIC_RETRY_INTERVAL.
	DefaultOpportunisticDelay = 30 * time.Second
	// DefaultCancelGrace bounds how long a job asked to cancel (because
	// the other side failed) is still followed for its final message.
	DefaultCancelGrace = time.Minute
	// delayVariation spreads the retries of parallel moves apart.
	delayVariation = 0.15
)

// Mover moves instances from Src to Dest.
type Mover struct {
	Src, Dest *Cluster
	// Out receives the progress lines, each prefixed with the instance.
	Out io.Writer
	// Parallel is how many instances move at once (at least 1).
	Parallel int
	// OpportunisticTries is how many creation attempts use opportunistic
	// locking before a last, ordinary one.
	OpportunisticTries int
	// OpportunisticDelay is the pause between attempts, varied by ±15%.
	OpportunisticDelay time.Duration
	// CancelGrace: see DefaultCancelGrace; 0 means the default.
	CancelGrace time.Duration
	// Rand returns a number in [0, 1); nil means math/rand/v2.
	Rand func() float64
	// Sleep waits d or until ctx ends; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error

	outMu sync.Mutex
}

// Request is one instance to move and how.
type Request struct {
	Instance  string
	Overrides Overrides
}

// destName is the instance's name on the destination.
func (r Request) destName() string {
	if r.Overrides.DestName != "" {
		return r.Overrides.DestName
	}
	return r.Instance
}

// errAborted ends one side because the other failed.
var errAborted = errors.New("aborted because the other side failed")

// Error is a failed move: what went wrong on either side (nil when that
// side did not fail by itself).
type Error struct {
	Instance string
	Src      error
	Dest     error
}

func (e *Error) Error() string {
	var parts []string
	for _, p := range []struct {
		side Side
		err  error
	}{{Source, e.Src}, {Destination, e.Dest}} {
		var se *SideError
		switch {
		case p.err == nil:
			parts = append(parts, fmt.Sprintf("%s cluster: no error", p.side))
		case errors.As(p.err, &se):
			parts = append(parts, p.err.Error())
		default:
			parts = append(parts, fmt.Sprintf("%s cluster: %v", p.side, p.err))
		}
	}
	return fmt.Sprintf("moving %s failed: %s", e.Instance, strings.Join(parts, "; "))
}

// abortedError is a side's failure caused by the other side's: its job was
// canceled, or it stopped waiting.
type abortedError struct{ err error }

func (e *abortedError) Error() string {
	return "aborted because the other side failed: " + e.err.Error()
}
func (e *abortedError) Unwrap() error        { return e.err }
func (e *abortedError) Is(target error) bool { return target == errAborted }

// Unwrap gives both sides' errors, so the class of the failure can be
// found with errors.As.
func (e *Error) Unwrap() []error {
	var out []error
	for _, err := range []error{e.Src, e.Dest} {
		if err != nil && !errors.Is(err, errAborted) {
			out = append(out, err)
		}
	}
	return out
}

// say prints one progress line of an instance's move.
func (m *Mover) say(inst string, side Side, format string, args ...any) {
	if m.Out == nil {
		return
	}
	msg := fmt.Sprintf(format, args...)
	m.outMu.Lock()
	defer m.outMu.Unlock()
	if side == "" {
		fmt.Fprintf(m.Out, "[%s] %s\n", inst, msg)
		return
	}
	fmt.Fprintf(m.Out, "[%s] %s: %s\n", inst, side, msg)
}

func (m *Mover) sleep(ctx context.Context, d time.Duration) error {
	if m.Sleep != nil {
		return m.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Mover) grace(ctx context.Context) (context.Context, context.CancelFunc) {
	g := m.CancelGrace
	if g <= 0 {
		g = DefaultCancelGrace
	}
	return context.WithTimeout(ctx, g)
}

// retryDelay is the pause before the next opportunistic attempt.
func (m *Mover) retryDelay() time.Duration {
	d := m.OpportunisticDelay
	if d <= 0 {
		d = DefaultOpportunisticDelay
	}
	r := rand.Float64
	if m.Rand != nil {
		r = m.Rand
	}
	return time.Duration(float64(d) * (1 + delayVariation*(2*r()-1)))
}

// MoveAll moves every request, up to Parallel at once, and returns the
// failures (nil when all moved).
func (m *Mover) MoveAll(ctx context.Context, reqs []Request) []error {
	n := max(m.Parallel, 1)
	sem := make(chan struct{}, n)
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			errs[i] = m.Move(ctx, req)
		}()
	}
	wg.Wait()
	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	return failed
}

// srcInfo is what the source hands to the destination.
type srcInfo struct {
	details *Details
	exp     *ExportInfo
}

// run is one instance's move: the source and destination halves run side
// by side and meet through the two channels.
type run struct {
	m         *Mover
	req       Request
	toDest    chan srcInfo
	toSrc     chan *ImportInfo
	abort     chan struct{}
	abortOnce sync.Once
}

func (r *run) fail() { r.abortOnce.Do(func() { close(r.abort) }) }

// Move moves one instance; the error is an *Error unless ctx ended.
func (m *Mover) Move(ctx context.Context, req Request) error {
	r := &run{m: m, req: req, toDest: make(chan srcInfo, 1), toSrc: make(chan *ImportInfo, 1), abort: make(chan struct{})}
	var destErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		destErr = r.dest(ctx)
		if destErr != nil {
			r.fail()
		}
	}()
	srcErr := r.source(ctx)
	if srcErr != nil {
		r.fail()
	}
	<-done
	if srcErr == nil && destErr == nil {
		m.say(req.Instance, "", "moved to %s as %s", m.Dest.Name, req.destName())
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("moving %s: %w; jobs already submitted go on running", req.Instance, ctx.Err())
	}
	e := &Error{Instance: req.Instance, Src: srcErr, Dest: destErr}
	m.say(req.Instance, "", "FAILED: %v", e)
	return e
}

func (r *run) follower(side Side, c *Cluster, onLog func(logEntry) error) *follower {
	if onLog == nil {
		onLog = func(e logEntry) error {
			r.m.say(r.req.Instance, side, "%s", e.text())
			return nil
		}
	}
	return &follower{c: c, side: side, onLog: onLog, abort: r.abort, grace: r.m.grace}
}

// source is the source half: information, prepare-export, export.
func (r *run) source(ctx context.Context) (err error) {
	src, name := r.m.Src, r.req.Instance
	fail := func(err error) error { return src.sideErr(Source, err) }
	if err := src.version(ctx); err != nil {
		return fail(err)
	}
	var inst struct {
		Tags []string `json:"tags"`
	}
	if err := src.Client.Do(ctx, http.MethodGet, instancePath(name, ""), nil, nil, &inst); err != nil {
		if ecode.ClassOf(err) == ecode.NoEnt {
			return &SideError{Side: Source, Err: ecode.Errorf(ecode.NoEnt, "instance %s not found on %s", name, src.Name)}
		}
		return fail(err)
	}
	id, err := src.submit(ctx, http.MethodGet, instancePath(name, "info"), url.Values{"static": {"1"}}, nil)
	if err != nil {
		return fail(err)
	}
	raw, err := r.follower(Source, src, nil).follow(ctx, id)
	if err != nil {
		return fail(err)
	}
	d, err := ParseDetails(raw)
	if err != nil {
		return fail(err)
	}
	d.Tags = inst.Tags
	r.m.say(name, Source, "%s: disk template %s, %d disk(s), %d NIC(s), OS %q, hypervisor %s, state %s",
		d.Name, d.DiskTemplate, len(d.Disks), len(d.NICs), d.OS, d.Hypervisor, d.ConfigState)

	id, err = src.submit(ctx, http.MethodPut, instancePath(name, "prepare-export"), url.Values{"mode": {"remote"}}, nil)
	if err != nil {
		return fail(err)
	}
	raw, err = r.follower(Source, src, nil).follow(ctx, id)
	if err != nil {
		return fail(err)
	}
	exp, err := ParseExportInfo(raw)
	if err != nil {
		return fail(err)
	}
	r.m.say(name, Source, "export prepared (job %d): transfer certificate issued", id)
	defer func() {
		if err != nil {
			r.releaseKey(ctx, exp)
		}
	}()
	r.toDest <- srcInfo{details: d, exp: exp}

	var ii *ImportInfo
	select {
	case ii = <-r.toSrc:
	case <-r.abort:
		return errAborted
	case <-ctx.Done():
		return ctx.Err()
	}
	compress := r.req.Overrides.Compress
	if compress == "" {
		compress = "none"
	}
	body := map[string]any{
		"mode":                "remote",
		"destination":         ii.Disks,
		"shutdown":            true,
		"remove_instance":     !r.req.Overrides.KeepSource,
		"x509_key_name":       exp.X509KeyName,
		"destination_x509_ca": ii.X509CA,
		"compress":            compress,
	}
	id, err = src.submit(ctx, http.MethodPut, instancePath(name, "export"), nil, body)
	if err != nil {
		return fail(err)
	}
	r.m.say(name, Source, "exporting %d disk(s) (job %d)", len(d.Disks), id)
	raw, err = r.follower(Source, src, nil).follow(ctx, id)
	if err != nil {
		return fail(err)
	}
	if err := checkExportResult(raw, id); err != nil {
		return fail(err)
	}
	if r.req.Overrides.KeepSource {
		r.m.say(name, Source, "export done; the instance stays on the source (started again if it ran)")
	} else {
		r.m.say(name, Source, "export done; the instance was removed from the source")
	}
	return nil
}

// releaseKey destroys the source's transfer key after a failed move
// (DELETE prepare-export, Corral's cleanup of a prepared export): the
// export removes it itself once it has run, so this matters when the move
// failed before.
func (r *run) releaseKey(ctx context.Context, exp *ExportInfo) {
	src, name := r.m.Src, r.req.Instance
	gctx, cancel := r.m.grace(ctx)
	defer cancel()
	id, err := src.submit(gctx, http.MethodDelete, instancePath(name, "prepare-export"), nil, map[string]any{"x509_key_name": exp.X509KeyName})
	if err == nil {
		// Followed without the run's abort channel: the move has
		// already failed, so that channel is closed, and following
		// with it would cancel this very clean-up.
		f := &follower{c: src, side: Source, grace: r.m.grace}
		_, err = f.follow(gctx, id)
	}
	if err != nil {
		r.m.say(name, Source, "could not remove the transfer key of the failed move (it expires within a day): %v", err)
		return
	}
	r.m.say(name, Source, "removed the transfer key of the failed move")
}

// checkExportResult checks an export's [finalize_ok, [disk_ok...]].
func checkExportResult(raw json.RawMessage, job int64) error {
	var res []json.RawMessage
	var fin bool
	var disks []bool
	if json.Unmarshal(raw, &res) != nil || len(res) != 2 ||
		json.Unmarshal(res[0], &fin) != nil || json.Unmarshal(res[1], &disks) != nil {
		return ecode.ExecErrorf("job %d: unexpected export result %.80s", job, raw)
	}
	var bad []string
	for i, ok := range disks {
		if !ok {
			bad = append(bad, fmt.Sprint(i))
		}
	}
	switch {
	case len(bad) > 0:
		return ecode.ExecErrorf("job %d: export failed for disk(s) %s", job, strings.Join(bad, ", "))
	case !fin:
		return ecode.ExecErrorf("job %d: the export did not finish cleanly", job)
	}
	return nil
}

// dest is the destination half: create in remote-import mode, hand the
// listeners to the source, wait for the import.
func (r *run) dest(ctx context.Context) error {
	dst, name, inst := r.m.Dest, r.req.destName(), r.req.Instance
	fail := func(err error) error { return dst.sideErr(Destination, err) }
	if err := dst.version(ctx); err != nil {
		return fail(err)
	}
	var si srcInfo
	select {
	case si = <-r.toDest:
	case <-r.abort:
		return errAborted
	case <-ctx.Done():
		return ctx.Err()
	}
	for attempt := 0; ; attempt++ {
		opportunistic := attempt < r.m.OpportunisticTries
		body, err := CreateBody(si.details, si.exp, r.req.Overrides, opportunistic)
		if err != nil {
			return fail(ecode.Errorf(ecode.Inval, "%v", err))
		}
		id, err := dst.submit(ctx, http.MethodPost, "/2/instances", nil, body)
		if err != nil {
			return fail(err)
		}
		how := ""
		if opportunistic {
			how = ", opportunistic attempt"
		}
		r.m.say(inst, Destination, "creating %s in remote-import mode (job %d%s)", name, id, how)
		sent := false
		f := r.follower(Destination, dst, func(e logEntry) error {
			if e.Type != logRemoteImport {
				r.m.say(inst, Destination, "%s", e.text())
				return nil
			}
			if sent {
				return nil
			}
			ii, err := ParseImportInfo(e.Message, len(si.details.Disks))
			if err != nil {
				return err
			}
			sent = true
			r.toSrc <- ii
			r.m.say(inst, Destination, "listening for %d disk(s)", len(ii.Disks))
			return nil
		})
		raw, err := f.follow(ctx, id)
		if err == nil {
			if !sent {
				return fail(ecode.ExecErrorf("job %d succeeded without asking for the disks", id))
			}
			r.m.say(inst, Destination, "import done (job %d), nodes %s", id, raw)
			return nil
		}
		if !opportunistic || sent || !isTempNoRes(err) {
			return fail(err)
		}
		d := r.m.retryDelay()
		r.m.say(inst, Destination, "opportunistic attempt %d failed (%v); trying again in %s", attempt+1, err, d.Round(10*time.Millisecond))
		if err := r.abortableSleep(ctx, d); err != nil {
			return err
		}
	}
}

func isTempNoRes(err error) bool {
	e, ok := ecode.As(err)
	return ok && e.Kind == ecode.OpPrereqError && e.Class == ecode.TempNoRes
}

// abortableSleep waits d unless the other side fails or ctx ends first.
func (r *run) abortableSleep(ctx context.Context, d time.Duration) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-r.abort:
			cancel()
		case <-sctx.Done():
		}
	}()
	if err := r.m.sleep(sctx, d); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errAborted
	}
	return nil
}
