package luxi

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestCallClient(t *testing.T) {
	var closed atomic.Int32
	var gotMethod string
	var gotArgs []any
	answers := map[string]string{
		MethodQueryClusterInfo: `{"name":"c1"}`,
		MethodSubmitJob:        `"17"`,
		MethodWaitForJobChange: `"nochange"`,
	}
	c := NewCallClient(func(_ context.Context, method string, args []any) (json.RawMessage, error) {
		gotMethod, gotArgs = method, args
		if a, ok := answers[method]; ok {
			return json.RawMessage(a), nil
		}
		return nil, ecode.Errorf(ecode.NoEnt, "no %s here", method)
	}, func() error { closed.Add(1); return nil })
	ctx := context.Background()

	info, err := c.QueryClusterInfo(ctx)
	if err != nil || info["name"] != "c1" {
		t.Fatalf("QueryClusterInfo: %v, %v", info, err)
	}
	id, err := c.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}})
	if err != nil || id != 17 || gotMethod != MethodSubmitJob || len(gotArgs) != 1 {
		t.Fatalf("SubmitJob: %d, %v (call %s %v)", id, err, gotMethod, gotArgs)
	}
	ch, err := c.WaitForJobChange(ctx, 17, []string{"status"}, nil, nil, 5)
	if err != nil || !ch.NoChange {
		t.Fatalf("WaitForJobChange: %+v, %v", ch, err)
	}
	if want := []any{int64(17), []string{"status"}, nil, nil, 5}; len(gotArgs) != len(want) || gotArgs[0] != want[0] ||
		!slices.Equal(gotArgs[1].([]string), want[1].([]string)) {
		t.Errorf("WaitForJobChange args %#v", gotArgs)
	}
	_, err = c.QueryTags(ctx, "instance", "x")
	if e, ok := ecode.As(err); !ok || e.Class != ecode.NoEnt {
		t.Fatalf("QueryTags error %v: want the call's NoEnt error", err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.QueryClusterInfo(cancelled); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if n := closed.Load(); n != 1 {
		t.Errorf("closer ran %d times, want once", n)
	}
	if _, err := c.QueryClusterInfo(ctx); !errors.Is(err, ErrClientClosed) {
		t.Errorf("after Close: %v, want ErrClientClosed", err)
	}
}

// WaitForJob works unchanged over a call function.
func TestCallClientWaitForJob(t *testing.T) {
	waits := 0
	c := NewCallClient(func(_ context.Context, method string, _ []any) (json.RawMessage, error) {
		switch method {
		case MethodWaitForJobChange:
			waits++
			if waits == 1 {
				return json.RawMessage(`[["running"],[[1,[1,0],"message","hello"]]]`), nil
			}
			return json.RawMessage(`[["success"],[]]`), nil
		case MethodQueryJobs:
			return json.RawMessage(`[["success",["success"],[42]]]`), nil
		}
		return nil, errors.New("unexpected " + method)
	}, nil)
	defer c.Close()
	var logs []string
	status, res, err := WaitForJob(context.Background(), c, 3, func(e []any) { logs = append(logs, e[3].(string)) })
	if err != nil || status != "success" || len(res) != 1 || res[0] != 42.0 || !slices.Equal(logs, []string{"hello"}) {
		t.Fatalf("WaitForJob: %s %v %v, logs %v", status, res, err, logs)
	}
}
