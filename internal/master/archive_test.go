package master

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/corral/corral/internal/jobqueue"
)

// TestAutoArchiveHugeAgeArchivesNothing: AutoArchiveJobs with an age past
// time.Duration's range means "older than ever", not "any age" (the
// overflowed conversion used to make it negative, which archives all).
func TestAutoArchiveHugeAgeArchivesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	q, err := jobqueue.New(jobqueue.Options{
		Store:  testStore(t),
		Runner: runnerFunc(func(ctx context.Context) error { return nil }),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Stop)
	h := &luxiHandler{&Daemon{queue: q}}
	runDelayJob(t, ctx, h, q)
	archive := func(age float64) []any {
		t.Helper()
		args, _ := json.Marshal([]any{age, 10})
		var raw []json.RawMessage
		_ = json.Unmarshal(args, &raw)
		res, err := h.Call(ctx, "AutoArchiveJobs", raw)
		if err != nil {
			t.Fatal(err)
		}
		return res.([]any)
	}
	for _, age := range []float64{1e308, 1e10} {
		if got := archive(age); got[0] != 0 {
			t.Fatalf("age %v archived %v jobs, want none", age, got[0])
		}
	}
	if got := archive(-1); got[0] != 1 {
		t.Fatalf("age -1 archived %v jobs, want the one", got[0])
	}
}
