package luxi

import (
	"context"
	"fmt"

	"github.com/corral/corral/internal/ecode"
)

// Job statuses that end a job (canceling counts: the job will not run any
// further opcode).
func jobDone(status string) bool {
	switch status {
	case "success", "error", "canceling", "canceled":
		return true
	}
	return false
}

// WaitForJob follows job id until it ends, the way Ganeti's command-line
// tools do: it waits for changes of the job's status, hands every new log
// entry to onLog (if not nil) in order, and stops once a finished status
// arrives without new log entries, so no entry is missed. It then reads the
// job's final status and per-opcode results.
//
// err is nil only when the job succeeded. Otherwise status and opresult are
// still returned, and err is the failing opcode's error decoded from its
// result (an *ecode.Error keeping the original kind and class), an
// OpExecError for a cancelled job, or the error that stopped the polling.
func WaitForJob(ctx context.Context, c *Client, id int64, onLog func(entry []any)) (status string, opresult []any, err error) {
	var prevInfo []any
	var prevSerial *int64
	for {
		ch, err := c.WaitForJobChange(ctx, id, []string{"status"}, prevInfo, prevSerial, WaitForJobChangeTimeout)
		if err != nil {
			return "", nil, err
		}
		if ch.NoChange {
			continue
		}
		if len(ch.JobInfo) != 1 {
			return "", nil, badResult(MethodWaitForJobChange, "expected 1 field value, got %d", len(ch.JobInfo))
		}
		st, _ := ch.JobInfo[0].(string)
		if len(ch.LogEntries) > 0 {
			for _, e := range ch.LogEntries {
				if len(e) > 0 {
					if n, ok := asInt64(e[0]); ok && (prevSerial == nil || n > *prevSerial) {
						prevSerial = &n
					}
				}
				if onLog != nil {
					onLog(e)
				}
			}
		} else if jobDone(st) {
			break
		}
		prevInfo = ch.JobInfo
	}

	rows, err := c.QueryJobs(ctx, []int64{id}, []string{"status", "opstatus", "opresult"})
	if err != nil {
		return "", nil, err
	}
	if len(rows) == 0 || rows[0] == nil {
		return "", nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %d lost", id))
	}
	row := rows[0]
	if len(row) != 3 {
		return "", nil, badResult(MethodQueryJobs, "expected 3 field values, got %d", len(row))
	}
	status, _ = row[0].(string)
	opstatus, _ := row[1].([]any)
	opresult, _ = row[2].([]any)
	return status, opresult, jobError(status, opstatus, opresult)
}

// jobError turns a finished job's outcome into an error, as Ganeti's
// GenericPollJob does: the first failed opcode's encoded error if it has
// one, noting a partial failure when earlier opcodes succeeded.
func jobError(status string, opstatus, opresult []any) error {
	switch status {
	case "success":
		return nil
	case "canceling", "canceled":
		return ecode.New(ecode.OpExecError, ecode.Fault, "Job was canceled")
	}
	hasOK := false
	for i, s := range opstatus {
		switch s {
		case "success":
			hasOK = true
		case "error":
			var res any
			if i < len(opresult) {
				res = opresult[i]
			}
			if isEncodedError(res) {
				return ecode.Decode(res)
			}
			if hasOK {
				return ecode.New(ecode.OpExecError, ecode.Fault, fmt.Sprintf("partial failure (opcode %d): %v", i, res))
			}
			return ecode.New(ecode.OpExecError, ecode.Fault, fmt.Sprint(res))
		}
	}
	return ecode.New(ecode.OpExecError, ecode.Fault, fmt.Sprintf("job ended with status %q: %v", status, opresult))
}

// isEncodedError reports whether v has the [Kind, [args...]] shape of an
// encoded exception.
func isEncodedError(v any) bool {
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return false
	}
	kind, ok := l[0].(string)
	if !ok || kind == "" {
		return false
	}
	_, ok = l[1].([]any)
	return ok
}

func asInt64(v any) (int64, bool) {
	f, ok := v.(float64)
	if !ok || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}
