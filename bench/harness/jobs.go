package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/luxi"
)

// Op builds an opcode: Op("OP_TEST_DELAY", "duration", 0).
func Op(id string, kv ...any) map[string]any {
	op := map[string]any{"OP_ID": id}
	for i := 0; i+1 < len(kv); i += 2 {
		op[kv[i].(string)] = kv[i+1]
	}
	return op
}

// Finalized reports whether a job status is final.
func Finalized(status string) bool {
	switch status {
	case "success", "error", "canceled":
		return true
	}
	return false
}

// SubmitBatches submits jobs with SubmitManyJobs, batch at a time, and
// returns their ids in order. A refused job is an error.
func SubmitBatches(ctx context.Context, c *luxi.Client, jobs [][]any, batch int) ([]int64, error) {
	batch = max(batch, 1)
	ids := make([]int64, 0, len(jobs))
	for done := 0; done < len(jobs); done += batch {
		res, err := c.SubmitManyJobs(ctx, jobs[done:min(done+batch, len(jobs))])
		if err != nil {
			return ids, err
		}
		for i, r := range res {
			if !r.OK {
				return ids, fmt.Errorf("job %d of the submission refused: %s", done+i, r.Err)
			}
			ids = append(ids, r.JobID)
		}
	}
	return ids, nil
}

// QueryJobs queries ids in chunks of at most chunk, so that very long
// lists do not make one huge request and reply.
func QueryJobs(ctx context.Context, c *luxi.Client, ids []int64, fields []string, chunk int) ([][]any, error) {
	chunk = max(chunk, 1)
	rows := make([][]any, 0, len(ids))
	for i := 0; i < len(ids); i += chunk {
		r, err := c.QueryJobs(ctx, ids[i:min(i+chunk, len(ids))], fields)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// WaitFinalized polls until every job of ids has a final status, querying
// only the jobs not yet seen final. It returns the ids by final status.
func WaitFinalized(ctx context.Context, c *luxi.Client, ids []int64, poll time.Duration) (map[string][]int64, error) {
	pending := ids
	out := map[string][]int64{}
	for len(pending) > 0 {
		rows, err := QueryJobs(ctx, c, pending, []string{"status"}, 5000)
		if err != nil {
			return out, err
		}
		var still []int64
		for i, r := range rows {
			if r == nil {
				return out, fmt.Errorf("job %d is unknown", pending[i])
			}
			if s, _ := r[0].(string); Finalized(s) {
				out[s] = append(out[s], pending[i])
			} else {
				still = append(still, pending[i])
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(poll):
		}
	}
	return out, nil
}

// RunJob submits one job and waits for it to succeed.
func RunJob(ctx context.Context, c *luxi.Client, ops ...any) error {
	id, err := c.SubmitJob(ctx, ops)
	if err != nil {
		return err
	}
	status, _, err := luxi.WaitForJob(ctx, c, id, nil)
	if err != nil {
		return fmt.Errorf("job %d (%s): %w", id, status, err)
	}
	return nil
}

// SetClusterParams changes cluster parameters (OP_CLUSTER_SET_PARAMS), for
// example max_running_jobs or job_queue_size.
func SetClusterParams(ctx context.Context, c *luxi.Client, kv ...any) error {
	return RunJob(ctx, c, Op("OP_CLUSTER_SET_PARAMS", kv...))
}

// TS converts a job timestamp ([sec, usec] on the wire) to seconds; zero
// if v is not one.
func TS(v any) float64 {
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return 0
	}
	s, _ := l[0].(float64)
	u, _ := l[1].(float64)
	return s + u/1e6
}

// Now returns the current time in the seconds TS gives.
func Now() float64 { return float64(time.Now().UnixMicro()) / 1e6 }

// InstanceSpec describes fake-hypervisor instances to create.
type InstanceSpec struct {
	Template string // "diskless" or "file"
	DiskMiB  int    // size of the one disk of a file instance
	OS       string // guest OS; "" installs none (no_install)
	MemMiB   int    // 0: the cluster's default
	Start    bool
	Node     string // primary node; "" lets the cluster place it
}

// CreateOp is the OP_INSTANCE_CREATE of one instance named name, with no
// NICs.
func (s InstanceSpec) CreateOp(name string) map[string]any {
	op := Op("OP_INSTANCE_CREATE", "instance_name", name, "disk_template", s.Template,
		"nics", []any{}, "hypervisor", "fake", "start", s.Start)
	disks := []any{}
	if s.Template != "diskless" {
		disks = append(disks, map[string]any{"size": s.DiskMiB})
	}
	op["disks"] = disks
	if s.OS != "" {
		op["os_type"] = s.OS
	} else {
		op["no_install"] = true
	}
	if s.MemMiB > 0 {
		op["beparams"] = map[string]any{"memory": s.MemMiB}
	}
	if s.Node != "" {
		op["pnode"] = s.Node
	}
	return op
}

// Failed describes the first failed job of ids (by QueryJobs opresult),
// for error messages.
func Failed(ctx context.Context, c *luxi.Client, ids []int64) string {
	if len(ids) == 0 {
		return ""
	}
	rows, err := c.QueryJobs(ctx, ids[:1], []string{"status", "opresult"})
	if err != nil || len(rows) == 0 || rows[0] == nil {
		return fmt.Sprintf("job %d failed", ids[0])
	}
	return fmt.Sprintf("job %d %v: %v", ids[0], rows[0][0], rows[0][1])
}

// RunAll submits jobs (SubmitManyJobs, batch at a time), waits until all
// are finalized and fails unless all succeeded. It returns their ids.
func RunAll(ctx context.Context, c *luxi.Client, jobs [][]any, batch int) ([]int64, error) {
	ids, err := SubmitBatches(ctx, c, jobs, batch)
	if err != nil {
		return ids, err
	}
	by, err := WaitFinalized(ctx, c, ids, 50*time.Millisecond)
	if err != nil {
		return ids, err
	}
	if n := len(by["success"]); n != len(ids) {
		bad := append(by["error"], by["canceled"]...)
		return ids, fmt.Errorf("%d of %d jobs did not succeed; %s", len(ids)-n, len(ids), Failed(ctx, c, bad))
	}
	return ids, nil
}
