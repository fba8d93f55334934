package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// onJobEnded installs OP_AWAIT: it suspends until the end of the job in
// its "job" parameter (or one minute) and returns what woke it.
func onJobEnded(r *fakeRunner) {
	r.on("OP_AWAIT", func(ctx context.Context, h *OpHandle) (any, error) {
		if w := h.Woken(); w != "" {
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
			return w, nil
		}
		var in struct {
			Job int64 `json:"job"`
		}
		if err := json.Unmarshal(h.Input(), &in); err != nil {
			return nil, err
		}
		return nil, h.Suspend(ctx, time.Now().Add(time.Minute), JobEndedEvent(in.Job))
	})
}

// TestJobEndedEventOfArchivedOrUnknownJob suspends on the end of a job
// that ended and was archived before the suspension (woken at once) and of
// a job that does not exist (left waiting).
func TestJobEndedEventOfArchivedOrUnknownJob(t *testing.T) {
	e := newEnv(t, nil)
	onJobEnded(e.runner)
	done := e.submit(`{"OP_ID":"OP_NOOP"}`)
	e.waitStatus(done, StatusSuccess)
	if ok, err := e.q.Archive(ctxT(t), done); err != nil || !ok {
		t.Fatalf("archive job %d: %v %v", done, ok, err)
	}
	unknown := e.submit(fmt.Sprintf(`{"OP_ID":"OP_AWAIT","job":%d}`, done+1000))
	waitParked(t, e.q, 1)
	onArchived := e.submit(fmt.Sprintf(`{"OP_ID":"OP_AWAIT","job":%d}`, done))
	e.waitStatus(onArchived, StatusSuccess)
	jsonEq(t, e.query(onArchived, "opresult"), `[["event"]]`)
	if st := e.query(unknown, "status")[0]; st != "waiting" {
		t.Errorf("op waiting on an unknown job is %v", st)
	}
}

// TestChildJobsRecorded checks that the ids of the children a step
// submits are kept in the op's record, across a restart.
func TestChildJobsRecorded(t *testing.T) {
	e := newEnv(t, nil)
	var seen []int64
	parent := func(ctx context.Context, h *OpHandle) (any, error) {
		if cur, _ := h.Cursor(); cur < 2 {
			if err := h.SetRunning(ctx); err != nil {
				return nil, err
			}
			for step := cur; step < 2; step++ {
				if _, err := h.CommitStep(ctx, StepCommit{Next: step + 1, Children: [][]json.RawMessage{{op(`{"OP_ID":"OP_NOOP"}`)}}}); err != nil {
					return nil, err
				}
			}
			return nil, h.Suspend(ctx, time.Time{}, "go-on")
		}
		seen = h.ChildJobs()
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return nil, nil
	}
	e.runner.on("OP_PARENT", parent)
	id := e.submit(`{"OP_ID":"OP_PARENT"}`)
	waitParked(t, e.q, 1)
	e.restart()
	e.runner.on("OP_PARENT", parent)
	e.start()
	e.q.Notify("go-on")
	e.waitStatus(id, StatusSuccess)
	if len(seen) != 2 || seen[0] <= id || seen[1] != seen[0]+1 {
		t.Fatalf("child jobs of %d after a restart: %v", id, seen)
	}
}

func TestEndedJobOf(t *testing.T) {
	for name, want := range map[string]int64{
		"job/7/ended": 7, "job/123456789/ended": 123456789,
		"job/0/ended": 0, "job/-1/ended": 0, "job/07/ended": 0, "job/+7/ended": 0,
		"job/7/ended/": 0, "job//ended": 0, "jobs/7/ended": 0, "job/7": 0, "agent/7/ended": 0,
	} {
		id, ok := endedJobOf(name)
		if ok != (want != 0) || id != want {
			t.Errorf("endedJobOf(%q) = %d %v, want %d", name, id, ok, want)
		}
	}
}

// FuzzEndedJobOf checks that endedJobOf accepts exactly the names
// JobEndedEvent makes, and gives back their id.
func FuzzEndedJobOf(f *testing.F) {
	for _, s := range []string{"job/1/ended", "job/0/ended", "job/-3/ended", "job/1/ended/", "job/9223372036854775808/ended", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		id, ok := endedJobOf(name)
		if !ok {
			if id != 0 {
				t.Fatalf("%q refused with id %d", name, id)
			}
			return
		}
		if id <= 0 || JobEndedEvent(id) != name {
			t.Fatalf("%q accepted as job %d, whose event is %q", name, id, JobEndedEvent(id))
		}
		if _, err := strconv.ParseInt(name[len("job/"):len(name)-len("/ended")], 10, 64); err != nil {
			t.Fatalf("%q accepted: %v", name, err)
		}
	})
}
