package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat. Linux fixes
// USER_HZ at 100 for user space on every architecture we run on, which saves
// a cgo sysconf call.
const clockTick = 10 * time.Millisecond

// Stat is the part of /proc/<pid>/stat the benchmarks use.
type Stat struct {
	State  byte          // R, S, D, Z, ...
	User   time.Duration // utime
	System time.Duration // stime
	// Children is the user plus system time of the process's waited-for
	// children (cutime + cstime): the scripts a node daemon ran.
	Children time.Duration
	Threads  int
}

// CPU is the process's user plus system time.
func (s Stat) CPU() time.Duration { return s.User + s.System }

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return parseStat(string(b))
}

// parseStat parses a /proc/<pid>/stat line. The command name is in
// parentheses and may itself hold spaces and parentheses, so the fields are
// counted from the last ')'.
func parseStat(s string) (Stat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, errors.New("proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15,
	// num_threads field 20.
	if len(f) < 18 || len(f[0]) != 1 {
		return Stat{}, fmt.Errorf("proc stat: %d fields after the command name, want at least 18", len(f))
	}
	var n [5]uint64
	for k, idx := range []int{11, 12, 17, 13, 14} {
		v, err := strconv.ParseUint(f[idx], 10, 63)
		if err != nil {
			return Stat{}, fmt.Errorf("proc stat: field %d: %w", idx+3, err)
		}
		n[k] = v
	}
	return Stat{State: f[0][0], User: time.Duration(n[0]) * clockTick, System: time.Duration(n[1]) * clockTick, Threads: int(n[2]),
		Children: time.Duration(n[3]+n[4]) * clockTick}, nil
}

// RSS returns the resident set size of pid in bytes (VmRSS).
func RSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	kb, err := statusKB(string(b), "VmRSS")
	return kb * 1024, err
}

// Mem is a process's resident memory, split into anonymous memory (the
// heap, stacks) and file-backed pages (mapped files, such as a memory-mapped
// database, which the kernel can drop and read again).
type Mem struct {
	RSSMiB  float64 `json:"rss_mib"`
	AnonMiB float64 `json:"anon_mib"`
	FileMiB float64 `json:"file_mib"`
}

// ReadMem reads pid's resident memory from /proc/<pid>/status.
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	for _, f := range []struct {
		key string
		dst *float64
	}{{"VmRSS", &m.RSSMiB}, {"RssAnon", &m.AnonMiB}, {"RssFile", &m.FileMiB}} {
		kb, err := statusKB(string(b), f.key)
		if err != nil {
			return Mem{}, err
		}
		*f.dst = float64(kb) / 1024
	}
	return m, nil
}

// String reads "160 MiB (33 anonymous, 127 file-backed)".
func (m Mem) String() string {
	return fmt.Sprintf("%.0f MiB (%.0f anonymous, %.0f file-backed)", m.RSSMiB, m.AnonMiB, m.FileMiB)
}

// statusKB reads a "Key:   123 kB" line of /proc/<pid>/status.
func statusKB(s, key string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("proc status: malformed %s line %q", key, sc.Text())
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("proc status: malformed %s value %q", key, f[0])
		}
		return n, nil
	}
	return 0, fmt.Errorf("proc status: no %s line", key)
}

// OpenFDs counts the open file descriptors of pid.
func OpenFDs(pid int) (int, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents), err
}

// NoFileLimit returns pid's soft limit on open files, read from
// /proc/<pid>/limits ("unlimited" is reported as -1).
func NoFileLimit(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "Max open files") {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, "Max open files"))
		if len(f) < 1 {
			break
		}
		if f[0] == "unlimited" {
			return -1, nil
		}
		return strconv.ParseInt(f[0], 10, 64)
	}
	return 0, errors.New("proc limits: no 'Max open files' line")
}

// RaiseNoFile raises this process's soft and hard limits on open files to
// at least n (raising the hard limit needs root). Processes started
// afterwards inherit the new limits: once a Go program sets RLIMIT_NOFILE
// itself, os/exec no longer restores the original soft limit in children.
func RaiseNoFile(n uint64) (syscall.Rlimit, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return lim, err
	}
	if lim.Cur >= n && lim.Max >= n {
		// Still set it, so that children inherit the raised soft limit.
		return lim, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	hard := lim.Max
	lim.Cur = max(lim.Cur, n)
	lim.Max = max(lim.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		if errors.Is(err, syscall.EPERM) {
			return lim, fmt.Errorf("raising the open-file limit to %d: the hard limit is %d and raising it needs CAP_SYS_RESOURCE: %w", n, hard, err)
		}
		return lim, fmt.Errorf("raising the open-file limit to %d: %w", n, err)
	}
	return lim, nil
}

// ChildrenCPU is the CPU time of this process's waited-for children and
// their descendants.
func ChildrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// SelfCPU is the CPU time this process has used.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
