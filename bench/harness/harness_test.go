package harness

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name string
		in   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one", []float64{7}, 99, 7},
		{"median of 1..100", hundred, 50, 50},
		{"p99 of 1..100", hundred, 99, 99},
		{"p100 of 1..100", hundred, 100, 100},
		{"p0 is the minimum", hundred, 0, 1},
		{"p99 of ten values is the maximum", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("Percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestSummarizeLeavesInputAlone(t *testing.T) {
	in := []float64{3, 1, 2, 10}
	s := Summarize(in)
	if s.N != 4 || s.P50 != 2 || s.Max != 10 || s.Mean != 4 {
		t.Errorf("Summarize = %+v", s)
	}
	if in[0] != 3 || in[3] != 10 {
		t.Errorf("input reordered: %v", in)
	}
}

func TestLatenciesCountsErrors(t *testing.T) {
	var l Latencies
	boom := errors.New("boom")
	l.Time(func() error { return nil })
	l.Time(func() error { return boom })
	l.Time(func() error { return errors.New("second") })
	if n, err := l.Errors(); n != 2 || err != boom {
		t.Errorf("Errors() = %d, %v; want 2, boom", n, err)
	}
	if l.Stats().N != 1 {
		t.Errorf("recorded %d latencies, want 1", l.Stats().N)
	}
}

const statLine = "1234 (cor rald) (x)) S 1 1234 1234 0 -1 4194560 2410 0 0 0 250 130 0 0 20 0 11 0 4242 1253376000 5120 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

func TestParseStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Stat
		wantErr bool
	}{
		{"command with spaces and parens", statLine, Stat{State: 'S', User: 2500 * time.Millisecond, System: 1300 * time.Millisecond, Threads: 11}, false},
		{"no command", "1234 S 1 2", Stat{}, true},
		{"truncated", "1 (a) S 1 2 3", Stat{}, true},
		{"non-numeric utime", "1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 1 0 0 20 0 1 0", Stat{}, true},
		{"two-letter state", "1 (a) SS 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0", Stat{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStat = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add(statLine)
	f.Add("1 (a) S")
	f.Add(")")
	f.Add("1 (a) S 1 1 1 0 -1 0 0 0 0 0 99999999999999999999 1 0 0 20 0 1 0")
	f.Fuzz(func(t *testing.T, s string) {
		st, err := parseStat(s)
		if err == nil && (st.User < 0 || st.System < 0 || st.Threads < 0) {
			t.Errorf("negative figures from %q: %+v", s, st)
		}
	})
}

func TestStatusKB(t *testing.T) {
	status := "Name:\tcorrald\nVmPeak:\t 1000 kB\nVmRSS:\t   20480 kB\nThreads:\t11\n"
	tests := []struct {
		key     string
		want    int64
		wantErr bool
	}{
		{"VmRSS", 20480, false},
		{"VmPeak", 1000, false},
		{"VmSwap", 0, true},
		{"Threads", 0, true}, // no unit: not a size line
	}
	for _, tt := range tests {
		got, err := statusKB(status, tt.key)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("statusKB(%s) = %d, %v; want %d, err %v", tt.key, got, err, tt.want, tt.wantErr)
		}
	}
}

func FuzzStatusKB(f *testing.F) {
	f.Add("VmRSS:\t   20480 kB\n")
	f.Add("VmRSS: -1 kB")
	f.Add("VmRSS:")
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := statusKB(s, "VmRSS"); err == nil && n < 0 {
			t.Errorf("negative size %d from %q", n, s)
		}
	})
}

func TestReadOwnProcess(t *testing.T) {
	pid := os.Getpid()
	st, err := ReadStat(pid)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != 'R' && st.State != 'S' {
		t.Errorf("own state %q", st.State)
	}
	if st.Threads < 1 {
		t.Errorf("threads = %d", st.Threads)
	}
	rss, err := RSS(pid)
	if err != nil || rss < 1<<20 {
		t.Errorf("RSS = %d, %v; want at least 1 MiB", rss, err)
	}
	m, err := ReadMem(pid)
	if err != nil || m.RSSMiB < 1 || m.AnonMiB+m.FileMiB > m.RSSMiB+1 {
		t.Errorf("ReadMem = %+v, %v", m, err)
	}
	n, err := OpenFDs(pid)
	if err != nil || n < 3 {
		t.Errorf("OpenFDs = %d, %v", n, err)
	}
	if lim, err := NoFileLimit(pid); err != nil || lim == 0 {
		t.Errorf("NoFileLimit = %d, %v", lim, err)
	}
}

func TestTS(t *testing.T) {
	tests := []struct {
		in   any
		want float64
	}{
		{[]any{float64(10), float64(500000)}, 10.5},
		{[]any{float64(10)}, 0},
		{nil, 0},
		{"x", 0},
	}
	for _, tt := range tests {
		if got := TS(tt.in); got != tt.want {
			t.Errorf("TS(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestOp(t *testing.T) {
	op := Op("OP_TEST_DELAY", "duration", 0.5, "repeat", 3)
	if op["OP_ID"] != "OP_TEST_DELAY" || op["duration"] != 0.5 || op["repeat"] != 3 || len(op) != 3 {
		t.Errorf("Op = %v", op)
	}
}
