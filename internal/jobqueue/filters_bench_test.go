package jobqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/corral/corral/internal/jobfilter"
)

// BenchmarkScheduleWithFilters measures one scheduling round with filter
// rules in place: finished jobs not yet archived, queued jobs a PAUSE rule
// holds (each round looks at all of them), and rules that match nothing
// before the one that applies.
func BenchmarkScheduleWithFilters(b *testing.B) {
	for _, size := range []struct{ finished, held, rules int }{{0, 100, 3}, {5000, 100, 1}, {5000, 100, 3}, {5000, 1000, 10}} {
		b.Run(fmt.Sprintf("finished=%d/held=%d/rules=%d", size.finished, size.held, size.rules), func(b *testing.B) {
			q := benchQueue(b, false, newRunner())
			ctx := context.Background()
			noop := []json.RawMessage{json.RawMessage(`{"OP_ID":"OP_NOOP","reason":[["gnt:user","bench",1]]}`)}
			var last int64
			for range size.finished {
				id, err := q.Submit(ctx, noop)
				if err != nil {
					b.Fatal(err)
				}
				last = id
			}
			for last > 0 {
				info, _, _, err := q.WaitForChange(ctx, last, []string{"status"}, nil, 0, 0)
				if err != nil {
					b.Fatal(err)
				}
				if Status(info[0].(string)).Finalized() {
					break
				}
				if _, _, _, err := q.WaitForChange(ctx, last, []string{"status"}, info, 1<<62, 1e9); err != nil {
					b.Fatal(err)
				}
			}
			for i := range size.rules - 1 {
				var r jobfilter.Rule
				if err := json.Unmarshal([]byte(fmt.Sprintf(`{"priority":%d,"action":"REJECT","predicates":[["opcode",["=","OP_ID","OP_NONE_%d"]]]}`, i, i)), &r); err != nil {
					b.Fatal(err)
				}
				if _, err := q.ReplaceFilter(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
			var pause jobfilter.Rule
			if err := json.Unmarshal([]byte(`{"priority":100,"action":"PAUSE","predicates":[["reason",["=","reason","bench"]]]}`), &pause); err != nil {
				b.Fatal(err)
			}
			if _, err := q.ReplaceFilter(ctx, pause); err != nil {
				b.Fatal(err)
			}
			for range size.held {
				if _, err := q.Submit(ctx, noop); err != nil {
					b.Fatal(err)
				}
			}
			if s := q.Stats(); s.Ready != size.held {
				b.Fatalf("held %d, want %d", s.Ready, size.held)
			}
			b.ResetTimer()
			for range b.N {
				q.schedule()
			}
		})
	}
}
