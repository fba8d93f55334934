// Package seconds converts a number of seconds, as opcodes, LUXI arguments
// and node RPCs carry them, to a time.Duration without overflow. Go's
// conversion of an out-of-range float to an integer is undefined (on amd64
// it yields the most negative Duration), so a plain
// time.Duration(s*float64(time.Second)) turns "wait very long" into "already
// past" and "older than 1e308 seconds" into "any age".
package seconds

import (
	"math"
	"time"
)

// Max is the longest Duration (about 292 years).
const Max = time.Duration(math.MaxInt64)

// Duration returns s seconds, saturated to [-Max, Max]; NaN is 0.
func Duration(s float64) time.Duration {
	ns := s * float64(time.Second)
	switch {
	case math.IsNaN(ns):
		return 0
	case ns >= float64(math.MaxInt64): // 2^63, the first float past the range
		return Max
	case ns <= -float64(math.MaxInt64):
		return -Max
	}
	return time.Duration(ns)
}

// Int returns n whole seconds, saturated like Duration.
func Int(n int64) time.Duration {
	if n > int64(Max/time.Second) {
		return Max
	}
	if n < -int64(Max/time.Second) {
		return -Max
	}
	return time.Duration(n) * time.Second
}
