package seconds

import (
	"math"
	"testing"
	"time"
)

func TestDurationSaturates(t *testing.T) {
	cases := []struct {
		in   float64
		want time.Duration
	}{
		{0, 0},
		{1.5, 1500 * time.Millisecond},
		{-2, -2 * time.Second},
		{604800, 7 * 24 * time.Hour},
		{9.2e9, time.Duration(9.2e9 * float64(time.Second))},
		{9.3e9, Max},
		{1e308, Max},
		{math.Inf(1), Max},
		{-1e308, -Max},
		{math.Inf(-1), -Max},
		{math.NaN(), 0},
	}
	for _, c := range cases {
		if got := Duration(c.in); got != c.want {
			t.Errorf("Duration(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestIntSaturates(t *testing.T) {
	cases := []struct {
		in   int64
		want time.Duration
	}{
		{0, 0},
		{120, 2 * time.Minute},
		{-1, -time.Second},
		{9223372036, 9223372036 * time.Second},
		{9223372037, Max},
		{1 << 53, Max},
		{math.MaxInt64, Max},
		{math.MinInt64, -Max},
	}
	for _, c := range cases {
		if got := Int(c.in); got != c.want {
			t.Errorf("Int(%d) = %v, want %v", c.in, got, c.want)
		}
	}
}
