package harness

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes where a figure was measured.
type Machine struct {
	Cores     int     `json:"cores"`
	MemMiB    int64   `json:"mem_mib"`
	Load1     float64 `json:"load1"` // one-minute load average when the run began
	Kernel    string  `json:"kernel"`
	GoVersion string  `json:"go"`
	Time      string  `json:"time"`
}

// ReadMachine describes this machine now.
func ReadMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb, err := statusKB(string(b), "MemTotal"); err == nil {
			m.MemMiB = kb / 1024
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.Load1, _ = strconv.ParseFloat(f[0], 64)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// Emit prints result as one JSON line on stdout and summary (one or more
// lines) on stderr.
func Emit(result any, summary string) error {
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encoding the result: %w", err)
	}
	if _, err := fmt.Println(string(b)); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, strings.TrimRight(summary, "\n"))
	return nil
}

// Progress prints a progress line on stderr, prefixed with the time since
// start, so long set-ups show where the time goes.
func Progress(start time.Time, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

// MiB converts bytes to MiB.
func MiB(b int64) float64 { return float64(b) / (1 << 20) }
