package cmdlib

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/opcodes"
)

func TestSetUIDPool(t *testing.T) {
	pairs := func(p ...[2]float64) []any {
		out := []any{}
		for _, r := range p {
			out = append(out, []any{r[0], r[1]})
		}
		return out
	}
	tests := []struct {
		name   string
		start  [][2]uint32
		params map[string]any
		want   string
		err    string
	}{
		{"replace", [][2]uint32{{1, 2}}, map[string]any{"uid_pool": pairs([2]float64{2000, 2009}, [2]float64{1000, 1000})}, "[[1000 1000] [2000 2009]]", ""},
		{"replace with text", nil, map[string]any{"uid_pool": "2000-2001, 1000"}, "[[1000 1000] [2000 2001]]", ""},
		{"clear", [][2]uint32{{1, 2}}, map[string]any{"uid_pool": []any{}}, "[]", ""},
		{"add existing is a no-op", [][2]uint32{{5, 9}}, map[string]any{"add_uids": pairs([2]float64{5, 9}, [2]float64{1, 1})}, "[[1 1] [5 9]]", ""},
		{"remove", [][2]uint32{{1, 1}, {5, 9}}, map[string]any{"remove_uids": pairs([2]float64{5, 9})}, "[[1 1]]", ""},
		{"remove absent", [][2]uint32{{5, 9}}, map[string]any{"remove_uids": pairs([2]float64{5, 6})}, "", "not in the pool"},
		{"reversed", nil, map[string]any{"add_uids": pairs([2]float64{9, 5})}, "", "lower bound"},
		{"bad text", nil, map[string]any{"uid_pool": "1-2-3"}, "", "more than one"},
		{"untouched", [][2]uint32{{5, 9}}, map[string]any{}, "[[5 9]]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &config.Cluster{UIDPool: tt.start}
			changed := false
			err := setUIDPool(&opcodes.Op{Params: tt.params}, c, &changed)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := "[]"
			if len(c.UIDPool) > 0 {
				got = fmt.Sprint(c.UIDPool)
			}
			if got != tt.want {
				t.Errorf("pool = %s, want %s", got, tt.want)
			}
			if changed != (len(tt.params) > 0) {
				t.Errorf("changed = %v", changed)
			}
		})
	}
}
