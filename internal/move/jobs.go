package move

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/corral/corral/internal/ecode"
)

// Log entry types a move cares about (spec 2.3).
const (
	logMessage      = "message"
	logRemoteImport = "remote-import"
)

// logEntry is one job log entry, [serial, [sec, usec], type, message].
type logEntry struct {
	Serial  int64
	Type    string
	Message json.RawMessage
}

// text renders the message of a plain entry; other types are shown as
// their JSON.
func (e logEntry) text() string {
	var s string
	if json.Unmarshal(e.Message, &s) == nil {
		return s
	}
	return string(e.Message)
}

func parseLogEntry(raw json.RawMessage) (logEntry, error) {
	var parts []json.RawMessage
	if err := json.Unmarshal(raw, &parts); err != nil || len(parts) != 4 {
		return logEntry{}, fmt.Errorf("malformed job log entry %.80s", raw)
	}
	var e logEntry
	var serial float64
	if err := json.Unmarshal(parts[0], &serial); err != nil {
		return logEntry{}, fmt.Errorf("malformed job log serial %.40s", parts[0])
	}
	if err := json.Unmarshal(parts[2], &e.Type); err != nil {
		return logEntry{}, fmt.Errorf("malformed job log type %.40s", parts[2])
	}
	e.Serial, e.Message = int64(serial), parts[3]
	return e, nil
}

// waitAnswer is GET /2/jobs/[id]/wait's answer; the server sends null when
// nothing changed within its timeout.
type waitAnswer struct {
	JobInfo    []any             `json:"job_info"`
	LogEntries []json.RawMessage `json:"log_entries"`
}

// JobError is a job that did not succeed.
type JobError struct {
	Side Side
	Job  int64
	// Err is the failed opcode's error, classified (canceled jobs have
	// none of their own and get a wrong-state error).
	Err *ecode.Error
}

func (e *JobError) Error() string { return fmt.Sprintf("job %d: %s", e.Job, e.Err.Msg) }
func (e *JobError) Unwrap() error { return e.Err }

// finalized says whether the wait loop may stop at status s (spec 2.4:
// canceling counts, the job no longer runs anything).
func finalized(s string) bool {
	switch s {
	case "success", "error", "canceling", "canceled":
		return true
	}
	return false
}

// follower follows one job of one side.
type follower struct {
	c    *Cluster
	side Side
	// onLog gets every new log entry in order; an error stops following.
	onLog func(logEntry) error
	// abort, when closed, asks to cancel the job and stop following it
	// within grace.
	abort <-chan struct{}
	grace GraceFunc
}

// GraceFunc derives the context within which an aborted job must end.
type GraceFunc func(ctx context.Context) (context.Context, context.CancelFunc)

// follow waits for job id to end and returns its first opcode's result.
func (f *follower) follow(ctx context.Context, id int64) (json.RawMessage, error) {
	var (
		prevInfo   []any
		prevSerial *int64
		canceled   bool
		cancelMsg  string
	)
	waitPath := "/2/jobs/" + strconv.FormatInt(id, 10) + "/wait"
	wctx := ctx
	for {
		if !canceled && f.abort != nil {
			select {
			case <-f.abort:
				canceled = true
				cancelMsg = f.cancel(ctx, id)
				var stop context.CancelFunc
				wctx, stop = f.grace(ctx)
				defer stop()
			default:
			}
		}
		body := map[string]any{"fields": []string{"status"}, "previous_job_info": prevInfo, "previous_log_serial": prevSerial}
		var ans *waitAnswer
		if err := f.c.Client.Do(wctx, http.MethodGet, waitPath, nil, body, &ans); err != nil {
			if canceled && ctx.Err() == nil && wctx.Err() != nil {
				return nil, &abortedError{err: fmt.Errorf("job %d is still running after the request to cancel it (%s); follow it on %s", id, cancelMsg, f.c.Name)}
			}
			return nil, err
		}
		if ans == nil {
			continue
		}
		fresh := false
		for _, raw := range ans.LogEntries {
			e, err := parseLogEntry(raw)
			if err != nil {
				return nil, err
			}
			if prevSerial != nil && e.Serial <= *prevSerial {
				continue
			}
			s := e.Serial
			prevSerial, fresh = &s, true
			if f.onLog != nil {
				if err := f.onLog(e); err != nil {
					return nil, err
				}
			}
		}
		prevInfo = ans.JobInfo
		status := ""
		if len(ans.JobInfo) > 0 {
			status, _ = ans.JobInfo[0].(string)
		}
		if !fresh && finalized(status) {
			break
		}
	}
	res, err := f.result(ctx, id)
	if canceled && err != nil {
		var je *JobError
		if errors.As(err, &je) && je.Err.Class == ecode.State {
			je.Err.Msg += " (" + cancelMsg + ")"
		}
		return nil, &abortedError{err: err}
	}
	return res, err
}

// result reads a finished job and returns its first opcode's result, or
// the failed opcode's error.
func (f *follower) result(ctx context.Context, id int64) (json.RawMessage, error) {
	var job struct {
		Status   string            `json:"status"`
		OpStatus []string          `json:"opstatus"`
		OpResult []json.RawMessage `json:"opresult"`
	}
	if err := f.c.Client.Do(ctx, http.MethodGet, "/2/jobs/"+strconv.FormatInt(id, 10), nil, nil, &job); err != nil {
		return nil, err
	}
	switch job.Status {
	case "success":
		if len(job.OpResult) == 0 {
			return json.RawMessage("null"), nil
		}
		return job.OpResult[0], nil
	case "error":
		for i, s := range job.OpStatus {
			if s != "error" || i >= len(job.OpResult) {
				continue
			}
			var v any
			if err := json.Unmarshal(job.OpResult[i], &v); err != nil {
				break
			}
			return nil, &JobError{Side: f.side, Job: id, Err: ecode.Decode(v)}
		}
		return nil, &JobError{Side: f.side, Job: id, Err: ecode.ExecErrorf("the job failed without saying why")}
	case "canceling", "canceled":
		return nil, &JobError{Side: f.side, Job: id, Err: ecode.Errorf(ecode.State, "the job was canceled")}
	}
	return nil, &JobError{Side: f.side, Job: id, Err: ecode.ExecErrorf("the job ended in status %q", job.Status)}
}

// cancel asks the server to cancel job id and returns what it said.
func (f *follower) cancel(ctx context.Context, id int64) string {
	var ans []any
	err := f.c.Client.Do(ctx, http.MethodDelete, "/2/jobs/"+strconv.FormatInt(id, 10), nil, nil, &ans)
	switch {
	case err != nil:
		return fmt.Sprintf("canceling job %d failed: %v", id, err)
	case len(ans) == 2:
		if msg, ok := ans[1].(string); ok && msg != "" {
			return fmt.Sprintf("cancel: %s", msg)
		}
	}
	return fmt.Sprintf("cancel requested for job %d", id)
}
