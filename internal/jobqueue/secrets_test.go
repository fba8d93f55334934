package jobqueue

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/corral/corral/internal/opcodes"
)

const secretValue = "s3cr3t-root-pw"

// secretOp is an opcode with a secret parameter, as the master's table
// types it.
func secretOp(opID string) string {
	return `{"OP_ID":"` + opID + `","instance_name":"i1","osparams_secret":{"root_password":"` + secretValue + `"}}`
}

// TestSecretsScrubbedWhenOpEnds: while an op runs its record keeps its
// secret parameters (it may have to resume after a crash); the write that
// records its end (success by the last step's commit, error, cancel) drops
// them, without a write of its own, and the archive never holds them.
func TestSecretsScrubbedWhenOpEnds(t *testing.T) {
	tab := opcodes.Default()
	e := newEnv(t, func(o *Options) {
		o.Scrub = func(in json.RawMessage) json.RawMessage { return tab.Redact(in, opcodes.Secret) }
	})
	g := newGate()
	finish := func(ctx context.Context, h *OpHandle) (any, error) {
		if err := h.SetRunning(ctx); err != nil {
			return nil, err
		}
		if err := g.pass(ctx); err != nil {
			return nil, err
		}
		if h.OpID() == "OP_INSTANCE_REINSTALL" {
			return nil, errBoom
		}
		_, err := h.CommitStep(ctx, StepCommit{Next: 1, Final: true, Result: json.RawMessage(`"ok"`)})
		return "ok", err
	}
	e.runner.on("OP_INSTANCE_CREATE", finish)
	e.runner.on("OP_INSTANCE_REINSTALL", finish)
	ctx := ctxT(t)
	holds := func(id int64) bool {
		kv, err := e.st.Get(ctx, e.q.jobKey(id))
		if err != nil || kv == nil {
			kv, err = e.st.Get(ctx, e.q.archiveKey(id))
		}
		if err != nil || kv == nil {
			t.Fatalf("job %d not in the store: %v", id, err)
		}
		return strings.Contains(string(kv.Value), secretValue)
	}

	for _, tc := range []struct {
		opID string
		want Status
	}{{"OP_INSTANCE_CREATE", StatusSuccess}, {"OP_INSTANCE_REINSTALL", StatusError}} {
		id := e.submit(secretOp(tc.opID))
		g.wait(t)
		if !holds(id) {
			t.Fatalf("%s: the running op's record lost its secret; it could not resume", tc.opID)
		}
		rev0, _ := e.st.Revision(ctx)
		g.release <- struct{}{}
		e.waitStatus(id, tc.want)
		if holds(id) {
			t.Errorf("%s: the secret is still in the stored record after the op ended %s", tc.opID, tc.want)
		}
		if tc.want == StatusSuccess {
			if rev1, _ := e.st.Revision(ctx); rev1-rev0 != 1 {
				t.Errorf("the end took %d writes, want 1 (the last step's commit)", rev1-rev0)
			}
		}
		rec := storedRecord(t, e.st, e.q.jobKey(id))
		if !strings.Contains(string(rec.Ops[0].Input), `"root_password":"\u003credacted\u003e"`) {
			t.Errorf("stored input %s, want the secret's name with a redaction marker", rec.Ops[0].Input)
		}
	}

	// A job canceled while its op waits for locks.
	g2 := newGate()
	e.runner.on("OP_INSTANCE_CREATE", func(ctx context.Context, h *OpHandle) (any, error) { return nil, g2.pass(ctx) })
	id := e.submit(secretOp("OP_INSTANCE_CREATE"))
	g2.wait(t)
	if ok, _, err := e.q.Cancel(ctx, id, false); err != nil || !ok {
		t.Fatalf("cancel: %v %v", ok, err)
	}
	e.waitStatus(id, StatusCanceled)
	if holds(id) {
		t.Error("the secret is still in the stored record after the op was canceled")
	}
}

// TestArchiveScrubsSecrets: a job that ended before secrets were scrubbed
// (an older master) loses them when it is archived.
func TestArchiveScrubsSecrets(t *testing.T) {
	e := newEnv(t, nil)
	e.runner.on("OP_INSTANCE_CREATE", func(ctx context.Context, h *OpHandle) (any, error) { return nil, nil })
	id := e.submit(secretOp("OP_INSTANCE_CREATE"))
	e.waitStatus(id, StatusSuccess)
	if rec := storedRecord(t, e.st, e.q.jobKey(id)); !strings.Contains(string(rec.Ops[0].Input), secretValue) {
		t.Fatal("without Scrub the record should keep its input as submitted")
	}
	e.restart()
	tab := opcodes.Default()
	e.opts.Scrub = func(in json.RawMessage) json.RawMessage { return tab.Redact(in, opcodes.Secret) }
	e.start()
	if ok, err := e.q.Archive(ctxT(t), id); !ok || err != nil {
		t.Fatalf("archive: %v %v", ok, err)
	}
	kv, err := e.st.Get(ctxT(t), e.q.archiveKey(id))
	if err != nil || kv == nil {
		t.Fatalf("archived record: %v", err)
	}
	if strings.Contains(string(kv.Value), secretValue) {
		t.Errorf("the archive holds the secret: %s", kv.Value)
	}
	row := e.query(id, "ops")
	if b, _ := json.Marshal(row); strings.Contains(string(b), secretValue) {
		t.Errorf("the archived job answers the secret: %s", b)
	}
}
