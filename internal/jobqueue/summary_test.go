package jobqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestSummariesFollowInputs: a job's summaries are kept in memory, so they
// must be made again whenever what they are made from changes: an op's
// input when its secrets are scrubbed at its end, the archived record, and
// every job loaded after a restart. Each must read as it would if made
// from the stored input at query time.
func TestSummariesFollowInputs(t *testing.T) {
	// The summary shows the whole input, so a stale one would show the
	// secret the scrub removed.
	summary := func(opID string, in json.RawMessage) string {
		return strings.TrimPrefix(opID, "OP_") + " " + string(in)
	}
	tweak := func(o *Options) {
		o.Summary = summary
		o.Scrub = func(in json.RawMessage) json.RawMessage {
			return bytes.ReplaceAll(in, []byte("hunter2"), []byte("<redacted>"))
		}
	}
	e := newEnv(t, tweak)
	g := newGate()
	e.runner.on("OP_GATED", func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		return nil, g.pass(ctx)
	})
	first := `{"OP_ID":"OP_GATED","password":"hunter2"}`
	second := `{"OP_ID":"OP_NOOP","name":"n1"}`
	id := e.submit(first, second)
	want := func(ins ...string) []any {
		out := make([]any, len(ins))
		for i, in := range ins {
			var v struct {
				OpID string `json:"OP_ID"`
			}
			if err := json.Unmarshal([]byte(in), &v); err != nil {
				t.Fatal(err)
			}
			out[i] = summary(v.OpID, json.RawMessage(in))
		}
		return out
	}
	check := func(when string, ins ...string) {
		t.Helper()
		got := e.query(id, "summary")[0]
		jsonEq(t, got, mustJSON(t, want(ins...)))
		// Rows are the caller's: editing one must not reach the queue.
		got.([]any)[0] = "edited"
		jsonEq(t, e.query(id, "summary")[0], mustJSON(t, want(ins...)))
		if t.Failed() {
			t.Fatalf("%s: summary %v", when, got)
		}
	}
	g.wait(t)
	check("while the first op runs", first, second)
	scrubbed := strings.ReplaceAll(first, "hunter2", "<redacted>")
	g.open()
	e.waitStatus(id, StatusSuccess)
	check("after the job ended", scrubbed, second)

	e.restart()
	e.start()
	check("after a restart", scrubbed, second)
	if _, err := e.q.Archive(ctxT(t), id); err != nil {
		t.Fatal(err)
	}
	check("archived", scrubbed, second)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
