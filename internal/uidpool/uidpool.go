// Package uidpool handles the cluster's pool of user ids for confined qemu
// processes (hvparam security_model "pool"): Ganeti's text format for ranges
// ("1000-1009, 2000"), the cluster-level add and remove rules, and on the node
// the allocation of one uid per running instance through lock files.
package uidpool

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corral/corral/internal/ecode"
)

// Range is an inclusive [low, high] range of uids; its JSON form is Ganeti's
// two-element list.
type Range [2]uint32

// Low is the first uid of the range.
func (r Range) Low() uint32 { return r[0] }

// High is the last uid of the range.
func (r Range) High() uint32 { return r[1] }

// Size is the number of uids in the range.
func (r Range) Size() uint64 { return uint64(r[1]) - uint64(r[0]) + 1 }

// String is "N" for one uid, "N-M" otherwise.
func (r Range) String() string {
	if r[0] == r[1] {
		return strconv.FormatUint(uint64(r[0]), 10)
	}
	return strconv.FormatUint(uint64(r[0]), 10) + "-" + strconv.FormatUint(uint64(r[1]), 10)
}

// Pool is a sorted list of ranges. Ranges are kept as given, not merged, so
// that remove can match them exactly as Ganeti does. The empty pool means
// the feature is off.
type Pool []Range

// Parse reads the text format: comma-separated items, each "N" or "N-M",
// whitespace around numbers allowed, empty items skipped. The result is
// sorted and checked.
func Parse(s string) (Pool, error) {
	var p Pool
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(item, "-")
		if strings.Contains(hi, "-") {
			return nil, ecode.Errorf(ecode.Inval, "invalid user-id range %q: more than one '-'", item)
		}
		low, err := parseUID(lo)
		if err != nil {
			return nil, ecode.Errorf(ecode.Inval, "invalid user-id range %q: %v", item, err)
		}
		high := low
		if isRange {
			if high, err = parseUID(hi); err != nil {
				return nil, ecode.Errorf(ecode.Inval, "invalid user-id range %q: %v", item, err)
			}
		}
		p = append(p, Range{low, high})
	}
	p.sort()
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

func parseUID(s string) (uint32, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("empty number")
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a user id between 0 and %d", s, uint32(1<<32-1))
	}
	return uint32(n), nil
}

// String formats the pool with ", " between items, the inverse of Parse.
func (p Pool) String() string {
	parts := make([]string, len(p))
	for i, r := range p {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// Lines formats one item a line, as Ganeti's ssconf_uid_pool file does.
func (p Pool) Lines() string {
	var b strings.Builder
	for _, r := range p {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Check verifies that every range has low <= high.
func (p Pool) Check() error {
	for _, r := range p {
		if r[0] > r[1] {
			return ecode.Errorf(ecode.Inval, "invalid user-id range %d-%d: the lower bound is greater than the upper one", r[0], r[1])
		}
	}
	return nil
}

func (p Pool) sort() {
	slices.SortFunc(p, func(a, b Range) int {
		if a[0] != b[0] {
			return cmpU(a[0], b[0])
		}
		return cmpU(a[1], b[1])
	})
}

func cmpU(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Contains reports whether uid is in one of the ranges.
func (p Pool) Contains(uid uint32) bool {
	for _, r := range p {
		if uid >= r[0] && uid <= r[1] {
			return true
		}
	}
	return false
}

// Size counts the uids of the pool; overlapping ranges count twice.
func (p Pool) Size() uint64 {
	var n uint64
	for _, r := range p {
		n += r.Size()
	}
	return n
}

// Add returns p with the ranges of add that it lacks; adding a range that is
// already there changes nothing.
func Add(p, add Pool) (Pool, error) {
	if err := add.Check(); err != nil {
		return nil, err
	}
	out := slices.Clone(p)
	for _, r := range add {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	out.sort()
	return out, nil
}

// Remove returns p without the ranges of rm, each of which must be in p
// exactly as written.
func Remove(p, rm Pool) (Pool, error) {
	out := slices.Clone(p)
	for _, r := range rm {
		i := slices.Index(out, r)
		if i < 0 {
			return nil, ecode.Errorf(ecode.Inval, "user-id range %s to remove is not in the pool (%s)", r, p)
		}
		out = slices.Delete(out, i, i+1)
	}
	return out, nil
}

// FromPairs converts the opcode and config form (lists of [low, high]
// numbers, as JSON decodes them) into a checked, sorted pool.
func FromPairs(v any) (Pool, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "a uid pool must be a list of [low, high] pairs, got %T", v)
	}
	var p Pool
	for _, e := range l {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, ecode.Errorf(ecode.Inval, "uid pool entry %v is not a [low, high] pair", e)
		}
		var r Range
		for i, x := range pair {
			f, ok := x.(float64)
			if !ok || f < 0 || f > 1<<32-1 || f != float64(uint32(f)) {
				return nil, ecode.Errorf(ecode.Inval, "uid pool entry %v: %v is not a user id", e, x)
			}
			r[i] = uint32(f)
		}
		p = append(p, r)
	}
	p.sort()
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// Pairs is the opcode form of the pool: a list of [low, high] lists.
func (p Pool) Pairs() []any {
	out := make([]any, len(p))
	for i, r := range p {
		out[i] = []any{float64(r[0]), float64(r[1])}
	}
	return out
}

// FromArrays converts the config's form into a Pool (no check: the config
// only ever holds checked pools).
func FromArrays(a [][2]uint32) Pool {
	p := make(Pool, len(a))
	for i, r := range a {
		p[i] = Range(r)
	}
	return p
}

// Arrays is the config's form of the pool; nil when empty.
func (p Pool) Arrays() [][2]uint32 {
	if len(p) == 0 {
		return nil
	}
	out := make([][2]uint32, len(p))
	for i, r := range p {
		out[i] = r
	}
	return out
}
