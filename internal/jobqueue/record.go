package jobqueue

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Status is an opcode or job status. The values are Ganeti's.
type Status string

const (
	StatusQueued    Status = "queued"
	StatusWaiting   Status = "waiting"
	StatusCanceling Status = "canceling"
	StatusRunning   Status = "running"
	StatusCanceled  Status = "canceled"
	StatusSuccess   Status = "success"
	StatusError     Status = "error"
)

// rank orders statuses as Ganeti compares them: queued < waiting <
// canceling < running < canceled < success < error.
func (s Status) rank() int {
	switch s {
	case StatusQueued:
		return 0
	case StatusWaiting:
		return 1
	case StatusCanceling:
		return 2
	case StatusRunning:
		return 3
	case StatusCanceled:
		return 4
	case StatusSuccess:
		return 5
	case StatusError:
		return 6
	}
	return -1
}

// Finalized reports whether s is canceled, success or error.
func (s Status) Finalized() bool { return s.rank() > StatusRunning.rank() }

func (s Status) valid() bool { return s.rank() >= 0 }

// Timestamp is Ganeti's [seconds, microseconds] pair.
type Timestamp struct{ Sec, Usec int64 }

func tsOf(t time.Time) *Timestamp {
	return &Timestamp{Sec: t.Unix(), Usec: int64(t.Nanosecond() / 1000)}
}

// Time converts back to a time.Time.
func (t Timestamp) Time() time.Time { return time.Unix(t.Sec, t.Usec*1000) }

// MarshalJSON writes [sec, usec].
func (t Timestamp) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, 24)
	b = append(b, '[')
	b = strconv.AppendInt(b, t.Sec, 10)
	b = append(b, ',')
	b = strconv.AppendInt(b, t.Usec, 10)
	return append(b, ']'), nil
}

// UnmarshalJSON reads [sec, usec]. Ganeti's "no timestamp" (-1, -1) is
// accepted as written; callers treat a nil *Timestamp as absent.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var v [2]int64
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	t.Sec, t.Usec = v[0], v[1]
	return nil
}

// wire renders a possibly absent timestamp for query answers.
func (t *Timestamp) wire() any {
	if t == nil {
		return nil
	}
	return []int64{t.Sec, t.Usec}
}

// Dependency is one entry of an opcode's "depends" parameter, with a
// relative job id already resolved to an absolute one.
type Dependency struct {
	JobID    int64
	Statuses []Status // empty = any final status
}

// MarshalJSON writes Ganeti's [job_id, [statuses...]].
func (d Dependency) MarshalJSON() ([]byte, error) {
	st := d.Statuses
	if st == nil {
		st = []Status{}
	}
	return json.Marshal([]any{d.JobID, st})
}

// UnmarshalJSON reads [job_id, [statuses...]].
func (d *Dependency) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || len(raw) != 2 {
		return fmt.Errorf("dependency must be [job_id, [statuses]]: %s", truncate(b))
	}
	if err := json.Unmarshal(raw[0], &d.JobID); err != nil {
		return fmt.Errorf("dependency job id: %w", err)
	}
	var st []Status
	if !isNull(raw[1]) {
		if err := json.Unmarshal(raw[1], &st); err != nil {
			return fmt.Errorf("dependency statuses: %w", err)
		}
	}
	d.Statuses = st
	return nil
}

// suspension records why a parked op waits: a deadline, an event, or both.
type suspension struct {
	Until *Timestamp `json:"until,omitempty"`
	Event string     `json:"event,omitempty"`
}

// opRecord is one queued opcode as stored in the job record. Input is kept
// exactly as submitted; everything else belongs to the queue.
type opRecord struct {
	Input    json.RawMessage `json:"-"`
	Status   Status          `json:"status"`
	Result   json.RawMessage `json:"result"`
	Priority int             `json:"priority"`
	Depends  []Dependency    `json:"depends,omitempty"`
	Start    *Timestamp      `json:"start_timestamp"`
	Exec     *Timestamp      `json:"exec_timestamp"`
	End      *Timestamp      `json:"end_timestamp"`
	Cursor   int             `json:"cursor,omitempty"`
	StepData json.RawMessage `json:"step_data,omitempty"`
	Locks    []string        `json:"locks,omitempty"`
	Suspend  *suspension     `json:"suspend,omitempty"`
	// Woken says what ended the op's last suspension (WokenByEvent or
	// WokenByDeadline), for the step that suspended and runs again; the
	// next suspension or step commit clears it.
	Woken string `json:"woken,omitempty"`
	// Kill marks a cancel requested while the op was running: it ends at
	// the op's next step boundary.
	Kill bool `json:"kill,omitempty"`
	// LogFirst is the serial the op's first log entry gets (the job's last
	// serial + 1 when the op started); it splits the job's single log
	// sequence into per-op lists. 0 = the op never started.
	LogFirst int64 `json:"log_first,omitempty"`
	// Began is set while a step that is unsafe to repeat runs: written
	// before the step acts, cleared by the commit that moves the cursor
	// past it. Found set when the op is run again, it means the step may
	// or may not have taken effect.
	Began *BeganStep `json:"began,omitempty"`
	// Children are the ids of the child jobs the op's committed steps
	// submitted, in order (OpHandle.ChildJobs).
	Children []int64 `json:"children,omitempty"`
}

// begun reports whether the op did part of its work: steps committed, or
// it parked in one (and may have been woken since).
func (o *opRecord) begun() bool {
	return o.Cursor > 0 || o.Suspend != nil || o.Woken != ""
}

// BeganStep records that a step unsafe to repeat started. Name and Check
// are kept with it so the op's failure can name the step and say what to
// look at even if the unit's code changed across the restart.
type BeganStep struct {
	Step  int    `json:"step"`
	Name  string `json:"name"`
	Check string `json:"check,omitempty"`
}

// Err is the failure of an op (opID names its opcode) whose step b began
// and never committed. Nothing is undone, on purpose: a unit's Revert
// assumes it knows what the failed step did, and here nobody knows; undoing
// the earlier steps could also destroy what the operator needs to look at
// to find out. So the message says what to check and leaves the cluster as
// the step left it.
func (b BeganStep) Err(opID string) error {
	check := b.Check
	if check == "" {
		check = "what the step changes"
	}
	return ecode.New(ecode.OpExecError, ecode.State, fmt.Sprintf(
		"%s: step %d (%q) was interrupted: it had begun when the master stopped and it never committed. "+
			"It is unsafe to repeat, so it was not run again, and it may or may not have taken effect. "+
			"Check %s; nothing was undone, so clean up or resubmit by hand",
		opID, b.Step, b.Name, check))
}

// jobRecord is the durable state of one job, stored under jobs/<id> (or
// archive/<id>). Records are immutable once published in a snapshot:
// writers clone, change the clone, persist it, then publish it.
type jobRecord struct {
	ID       int64      `json:"id"`
	Ops      []opRecord `json:"-"`
	Received *Timestamp `json:"received_timestamp"`
	Start    *Timestamp `json:"start_timestamp"`
	End      *Timestamp `json:"end_timestamp"`
}

func (r *jobRecord) clone() *jobRecord {
	c := *r
	c.Ops = append([]opRecord(nil), r.Ops...)
	return &c
}

// status derives the job status from the op statuses (Ganeti's rules).
func (r *jobRecord) status() Status {
	running := StatusQueued
	allSuccess := true
	for i := range r.Ops {
		st := r.Ops[i].Status
		switch st {
		case StatusError, StatusCanceling, StatusCanceled:
			return st
		case StatusWaiting, StatusRunning:
			running = st
		}
		if st != StatusSuccess {
			allSuccess = false
		}
	}
	if allSuccess {
		return StatusSuccess
	}
	return running
}

// priority is the minimum priority of the non-finalized ops (0 if none).
func (r *jobRecord) priority() int {
	p, found := 0, false
	for i := range r.Ops {
		if r.Ops[i].Status.Finalized() {
			continue
		}
		if !found || r.Ops[i].Priority < p {
			p, found = r.Ops[i].Priority, true
		}
	}
	return p
}

// current returns the index of the first non-finalized op, or -1.
func (r *jobRecord) current() int {
	for i := range r.Ops {
		if !r.Ops[i].Status.Finalized() {
			return i
		}
	}
	return -1
}

// encode writes the record as JSON. It is hand-assembled so that each op's
// input goes out byte-for-byte: encoding/json would re-compact it.
func (r *jobRecord) encode() ([]byte, error) {
	head, err := json.Marshal(struct {
		ID       int64      `json:"id"`
		Received *Timestamp `json:"received_timestamp"`
		Start    *Timestamp `json:"start_timestamp"`
		End      *Timestamp `json:"end_timestamp"`
	}{r.ID, r.Received, r.Start, r.End})
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(len(head) + 256*len(r.Ops))
	b.Write(head[:len(head)-1])
	b.WriteString(`,"ops":[`)
	for i := range r.Ops {
		op := &r.Ops[i]
		if i > 0 {
			b.WriteByte(',')
		}
		meta, err := json.Marshal(op)
		if err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		b.WriteString(`{"input":`)
		b.Write(op.Input)
		b.WriteByte(',')
		b.Write(meta[1:])
	}
	b.WriteString("]}")
	return b.Bytes(), nil
}

// decodeRecord parses a stored job record.
func decodeRecord(data []byte) (*jobRecord, error) {
	var r jobRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("job record: %w", err)
	}
	var wrapper struct {
		Ops []json.RawMessage `json:"ops"`
	}
	if err := json.Unmarshal(data, &wrapper); err != nil {
		return nil, fmt.Errorf("job record ops: %w", err)
	}
	if len(wrapper.Ops) == 0 {
		return nil, fmt.Errorf("job record %d has no ops", r.ID)
	}
	r.Ops = make([]opRecord, len(wrapper.Ops))
	for i, raw := range wrapper.Ops {
		op := &r.Ops[i]
		if err := json.Unmarshal(raw, op); err != nil {
			return nil, fmt.Errorf("job %d op %d: %w", r.ID, i, err)
		}
		var in struct {
			Input json.RawMessage `json:"input"`
		}
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, fmt.Errorf("job %d op %d input: %w", r.ID, i, err)
		}
		if len(in.Input) == 0 || in.Input[0] != '{' {
			return nil, fmt.Errorf("job %d op %d: input is not an object", r.ID, i)
		}
		op.Input = in.Input
		if !op.Status.valid() {
			return nil, fmt.Errorf("job %d op %d: unknown status %q", r.ID, i, op.Status)
		}
		if isNull(op.Result) {
			op.Result = nil
		}
	}
	return &r, nil
}

// logEntry is one durable job log entry.
type logEntry struct {
	Serial  int64
	Time    Timestamp
	Type    string
	Message json.RawMessage
}

func (e *logEntry) encode() []byte {
	b := make([]byte, 0, 48+len(e.Type)+len(e.Message))
	b = append(b, '[')
	b = strconv.AppendInt(b, e.Serial, 10)
	b = append(b, ',')
	ts, _ := e.Time.MarshalJSON()
	b = append(b, ts...)
	b = append(b, ',')
	typ, _ := json.Marshal(e.Type)
	b = append(b, typ...)
	b = append(b, ',')
	b = append(b, e.Message...)
	return append(b, ']')
}

// decodeLogEntry parses [serial, [sec, usec], type, message].
func decodeLogEntry(data []byte) (logEntry, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return logEntry{}, fmt.Errorf("log entry: %w", err)
	}
	if len(raw) != 4 {
		return logEntry{}, fmt.Errorf("log entry has %d elements, want 4", len(raw))
	}
	var e logEntry
	if err := json.Unmarshal(raw[0], &e.Serial); err != nil {
		return logEntry{}, fmt.Errorf("log entry serial: %w", err)
	}
	if err := json.Unmarshal(raw[1], &e.Time); err != nil {
		return logEntry{}, fmt.Errorf("log entry time: %w", err)
	}
	if err := json.Unmarshal(raw[2], &e.Type); err != nil {
		return logEntry{}, fmt.Errorf("log entry type: %w", err)
	}
	e.Message = raw[3]
	return e, nil
}

// wire renders the entry for query answers.
func (e *logEntry) wire() []any {
	return []any{e.Serial, []int64{e.Time.Sec, e.Time.Usec}, e.Type, e.Message}
}

func isNull(b json.RawMessage) bool {
	return len(b) == 0 || string(bytes.TrimSpace(b)) == "null"
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
