package luxi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/corral/corral/internal/ecode"
)

// Method names, as Ganeti spells them. The arguments of each are positional;
// the Client helpers below document their order.
const (
	MethodSubmitJob               = "SubmitJob"
	MethodSubmitJobToDrainedQueue = "SubmitJobToDrainedQueue"
	MethodSubmitManyJobs          = "SubmitManyJobs"
	MethodWaitForJobChange        = "WaitForJobChange"
	MethodCancelJob               = "CancelJob"
	MethodArchiveJob              = "ArchiveJob"
	MethodAutoArchiveJobs         = "AutoArchiveJobs"
	MethodChangeJobPriority       = "ChangeJobPriority"
	MethodQueryJobs               = "QueryJobs"
	MethodQuery                   = "Query"
	MethodQueryFields             = "QueryFields"
	MethodQueryInstances          = "QueryInstances"
	MethodQueryNodes              = "QueryNodes"
	MethodQueryGroups             = "QueryGroups"
	MethodQueryNetworks           = "QueryNetworks"
	MethodQueryClusterInfo        = "QueryClusterInfo"
	MethodQueryConfigValues       = "QueryConfigValues"
	MethodQueryTags               = "QueryTags"
	MethodSetDrainFlag            = "SetDrainFlag"
	MethodSetWatcherPause         = "SetWatcherPause"
	// MethodQueryMetrics is Corral's own: corrald's metrics in Prometheus'
	// text exposition format, for corral-rapi's /metrics.
	MethodQueryMetrics = "QueryMetrics"
	// MethodNotifyEvent is Corral's own: it delivers an event to the ops
	// suspended on it (an agent called back, a machine booted).
	MethodNotifyEvent = "NotifyEvent"
)

// WaitForJobChangeTimeout is the longest wait, in seconds, a server grants
// one WaitForJobChange call: (180 s read/write timeout - 1) / 2, as in
// Ganeti, so the answer always beats the client's read timeout.
const WaitForJobChangeTimeout = 89

// noChange is what historical servers answered when WaitForJobChange timed
// out with nothing new.
const noChange = "nochange"

// SubmitResult is the outcome of one job in SubmitManyJobs; on the wire
// [true, id] or [false, "message"].
type SubmitResult struct {
	OK    bool
	JobID int64
	Err   string
}

// JobChange is a WaitForJobChange answer: the requested fields' values and
// the log entries ([serial, [sec, usec], type, message]) newer than the
// serial given. NoChange reports a "nochange" answer (the wait timed out);
// poll again with the same arguments.
type JobChange struct {
	JobInfo    []any
	LogEntries [][]any
	NoChange   bool
}

// FieldDef describes one query field.
type FieldDef struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	Kind  string `json:"kind"`
	Doc   string `json:"doc"`
}

// QueryResult is a Query answer: one row per item, each cell [status, value]
// where status 0 means the value is valid (Ganeti's RS_* codes).
type QueryResult struct {
	Fields []FieldDef `json:"fields"`
	Data   [][][2]any `json:"data"`
}

// QueryFieldsResult is a QueryFields answer.
type QueryFieldsResult struct {
	Fields []FieldDef `json:"fields"`
}

// SubmitJob submits one job made of ops (opcode dicts) and returns its id.
func (c *Client) SubmitJob(ctx context.Context, ops []any) (int64, error) {
	return c.submit(ctx, MethodSubmitJob, ops)
}

// SubmitJobToDrainedQueue submits a job even while the queue is drained.
func (c *Client) SubmitJobToDrainedQueue(ctx context.Context, ops []any) (int64, error) {
	return c.submit(ctx, MethodSubmitJobToDrainedQueue, ops)
}

func (c *Client) submit(ctx context.Context, method string, ops []any) (int64, error) {
	var raw json.RawMessage
	if err := c.Call(ctx, method, []any{nonNil(ops)}, &raw); err != nil {
		return 0, err
	}
	return decodeJobID(method, raw)
}

// SubmitManyJobs submits several jobs at once (relative dependencies refer
// to jobs of the same submission) and returns one result per job.
func (c *Client) SubmitManyJobs(ctx context.Context, jobs [][]any) ([]SubmitResult, error) {
	wire := make([]any, len(jobs))
	for i, ops := range jobs {
		wire[i] = nonNil(ops)
	}
	var raw []json.RawMessage
	if err := c.Call(ctx, MethodSubmitManyJobs, []any{wire}, &raw); err != nil {
		return nil, err
	}
	out := make([]SubmitResult, len(raw))
	for i, r := range raw {
		var pair []json.RawMessage
		if err := json.Unmarshal(r, &pair); err != nil || len(pair) != 2 {
			return nil, badResult(MethodSubmitManyJobs, "entry %d is not a [status, value] pair", i)
		}
		if err := json.Unmarshal(pair[0], &out[i].OK); err != nil {
			return nil, badResult(MethodSubmitManyJobs, "entry %d has no boolean status", i)
		}
		if out[i].OK {
			id, err := decodeJobID(MethodSubmitManyJobs, pair[1])
			if err != nil {
				return nil, err
			}
			out[i].JobID = id
			continue
		}
		if err := json.Unmarshal(pair[1], &out[i].Err); err != nil {
			out[i].Err = string(pair[1])
		}
	}
	return out, nil
}

// WaitForJobChange waits up to timeout seconds for job id to differ from
// prevJobInfo (the values of fields) or to log past prevLogSerial (nil: any
// entry). A nil prevJobInfo returns at once. Both the current answer on
// timeout and the historical "nochange" string are accepted.
func (c *Client) WaitForJobChange(ctx context.Context, id int64, fields []string, prevJobInfo []any, prevLogSerial *int64, timeout int) (*JobChange, error) {
	var prev any // a nil slice must go out as null, not []
	if prevJobInfo != nil {
		prev = prevJobInfo
	}
	var serial any
	if prevLogSerial != nil {
		serial = *prevLogSerial
	}
	var raw json.RawMessage
	args := []any{id, nonNilStrings(fields), prev, serial, timeout}
	if err := c.Call(ctx, MethodWaitForJobChange, args, &raw); err != nil {
		return nil, err
	}
	return decodeJobChange(id, raw)
}

func decodeJobChange(id int64, raw json.RawMessage) (*JobChange, error) {
	if isJSONNull(raw) {
		return nil, ecode.New(ecode.JobLost, ecode.NoEnt, fmt.Sprintf("Job with id %d lost", id))
	}
	if isJSONString(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil || s != noChange {
			return nil, badResult(MethodWaitForJobChange, "unexpected string answer")
		}
		return &JobChange{NoChange: true}, nil
	}
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return nil, badResult(MethodWaitForJobChange, "answer is not [job_info, log_entries]")
	}
	ch := &JobChange{}
	if err := json.Unmarshal(pair[0], &ch.JobInfo); err != nil {
		return nil, badResult(MethodWaitForJobChange, "job_info is not a list")
	}
	if err := json.Unmarshal(pair[1], &ch.LogEntries); err != nil {
		return nil, badResult(MethodWaitForJobChange, "log_entries is not a list of lists")
	}
	return ch, nil
}

// CancelJob cancels a job that has not started running; kill also stops a
// job waiting for locks at once. It returns whether the job was cancelled
// and the server's message.
func (c *Client) CancelJob(ctx context.Context, id int64, kill bool) (bool, string, error) {
	return c.boolMessage(ctx, MethodCancelJob, []any{id, kill})
}

// ChangeJobPriority changes a pending job's priority (-20 highest … 19).
func (c *Client) ChangeJobPriority(ctx context.Context, id int64, prio int) (bool, string, error) {
	return c.boolMessage(ctx, MethodChangeJobPriority, []any{id, prio})
}

func (c *Client) boolMessage(ctx context.Context, method string, args []any) (bool, string, error) {
	var pair []json.RawMessage
	if err := c.Call(ctx, method, args, &pair); err != nil {
		return false, "", err
	}
	var ok bool
	var msg string
	if len(pair) != 2 || json.Unmarshal(pair[0], &ok) != nil || json.Unmarshal(pair[1], &msg) != nil {
		return false, "", badResult(method, "answer is not [bool, message]")
	}
	return ok, msg, nil
}

// ArchiveJob archives a finished job; false means it was not archived.
func (c *Client) ArchiveJob(ctx context.Context, id int64) (bool, error) {
	var ok bool
	err := c.Call(ctx, MethodArchiveJob, []any{id}, &ok)
	return ok, err
}

// AutoArchiveJobs archives finished jobs older than age seconds (-1: all),
// working for at most timeout seconds. It returns how many were archived and
// how many were left unchecked.
func (c *Client) AutoArchiveJobs(ctx context.Context, age, timeout int) (archived, remaining int, err error) {
	var pair []int
	if err := c.Call(ctx, MethodAutoArchiveJobs, []any{age, timeout}, &pair); err != nil {
		return 0, 0, err
	}
	if len(pair) != 2 {
		return 0, 0, badResult(MethodAutoArchiveJobs, "answer is not [archived, remaining]")
	}
	return pair[0], pair[1], nil
}

// QueryJobs returns one row of field values per id (all jobs when ids is
// empty); the row of an unknown job is nil.
func (c *Client) QueryJobs(ctx context.Context, ids []int64, fields []string) ([][]any, error) {
	if ids == nil {
		ids = []int64{}
	}
	var rows [][]any
	err := c.Call(ctx, MethodQueryJobs, []any{ids, nonNilStrings(fields)}, &rows)
	return rows, err
}

// Query runs a query in the filter language over resource what ("instance",
// "node", "job", ...); filter nil selects everything.
func (c *Client) Query(ctx context.Context, what string, fields []string, filter any) (*QueryResult, error) {
	var res QueryResult
	if err := c.Call(ctx, MethodQuery, []any{what, nonNilStrings(fields), filter}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// QueryFields describes the given fields of resource what (all when fields
// is empty).
func (c *Client) QueryFields(ctx context.Context, what string, fields []string) (*QueryFieldsResult, error) {
	var res QueryFieldsResult
	if err := c.Call(ctx, MethodQueryFields, []any{what, nonNilStrings(fields)}, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// QueryInstances is the classic instance query: one row per name (all
// instances when names is empty), nil for unavailable values.
func (c *Client) QueryInstances(ctx context.Context, names, fields []string, lock bool) ([][]any, error) {
	return c.classicQuery(ctx, MethodQueryInstances, names, fields, lock)
}

// QueryNodes is the classic node query.
func (c *Client) QueryNodes(ctx context.Context, names, fields []string, lock bool) ([][]any, error) {
	return c.classicQuery(ctx, MethodQueryNodes, names, fields, lock)
}

// QueryGroups is the classic node group query.
func (c *Client) QueryGroups(ctx context.Context, names, fields []string, lock bool) ([][]any, error) {
	return c.classicQuery(ctx, MethodQueryGroups, names, fields, lock)
}

// QueryNetworks is the classic network query.
func (c *Client) QueryNetworks(ctx context.Context, names, fields []string, lock bool) ([][]any, error) {
	return c.classicQuery(ctx, MethodQueryNetworks, names, fields, lock)
}

func (c *Client) classicQuery(ctx context.Context, method string, names, fields []string, lock bool) ([][]any, error) {
	var rows [][]any
	err := c.Call(ctx, method, []any{nonNilStrings(names), nonNilStrings(fields), lock}, &rows)
	return rows, err
}

// QueryClusterInfo returns the cluster's description.
func (c *Client) QueryClusterInfo(ctx context.Context) (map[string]any, error) {
	var info map[string]any
	err := c.Call(ctx, MethodQueryClusterInfo, nil, &info)
	return info, err
}

// QueryConfigValues returns the values of configuration fields such as
// "cluster_name", "master_node", "drain_flag" or "watcher_pause".
func (c *Client) QueryConfigValues(ctx context.Context, fields []string) ([]any, error) {
	var vals []any
	err := c.Call(ctx, MethodQueryConfigValues, []any{nonNilStrings(fields)}, &vals)
	return vals, err
}

// QueryTags returns the tags of an object; kind is "cluster", "node",
// "instance", "nodegroup" or "network" (name is ignored for the cluster).
func (c *Client) QueryTags(ctx context.Context, kind, name string) ([]string, error) {
	var tags []string
	err := c.Call(ctx, MethodQueryTags, []any{kind, name}, &tags)
	return tags, err
}

// SetDrainFlag sets or clears the queue drain flag: while set, SubmitJob
// fails with JobQueueDrainError.
func (c *Client) SetDrainFlag(ctx context.Context, drain bool) error {
	return c.Call(ctx, MethodSetDrainFlag, []any{drain}, nil)
}

// SetWatcherPause pauses the watcher until the given Unix time; nil resumes
// it.
func (c *Client) SetWatcherPause(ctx context.Context, until *float64) error {
	var arg any
	if until != nil {
		arg = *until
	}
	return c.Call(ctx, MethodSetWatcherPause, []any{arg}, nil)
}

// QueryMetrics returns corrald's metrics in Prometheus' text exposition
// format (version 0.0.4). The method is Corral's own; Ganeti has none.
func (c *Client) QueryMetrics(ctx context.Context) (string, error) {
	var text string
	err := c.Call(ctx, MethodQueryMetrics, nil, &text)
	return text, err
}

// NotifyEvent wakes the ops suspended on event. The method is Corral's
// own; Ganeti has none.
func (c *Client) NotifyEvent(ctx context.Context, event string) error {
	return c.Call(ctx, MethodNotifyEvent, []any{event}, nil)
}

// decodeJobID reads a job id: a JSON integer, or the numeric string old
// Ganeti versions sent.
func decodeJobID(method string, raw json.RawMessage) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if isJSONString(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			if id, err := strconv.ParseInt(s, 10, 64); err == nil {
				return id, nil
			}
		}
		return 0, badResult(method, "job id %s is not a number", raw)
	}
	var id int64
	if err := json.Unmarshal(raw, &id); err != nil {
		return 0, badResult(method, "job id %s is not an integer", raw)
	}
	return id, nil
}

func badResult(method, format string, args ...any) *ecode.Error {
	return ecode.New(ecode.LuxiError, ecode.Fault, fmt.Sprintf("luxi: bad %s answer: ", method)+fmt.Sprintf(format, args...))
}

// nonNil and nonNilStrings make nil lists go out as [], which Ganeti's
// servers expect where a list is required.
func nonNil(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func nonNilStrings(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}
