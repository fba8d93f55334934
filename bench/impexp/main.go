// Command impexp measures disk streams: moving a file of --size from a
// source file to a destination file over loopback TLS, in MB/s (10^6
// bytes per second), on random and on zero-filled data. The cases are a
// plain Go crypto/tls copy (the baseline every other case is compared
// with, measured in the same run), Ganeti's transport (socat with
// OpenSSL, alone and in gzip and zstd shell pipelines) and Corral's
// internal/impexp package with each of its compressions.
//
// Both files live in the page cache: the source is written (and read once)
// before the first run and the destination is written, not synced (except
// in the impexp+fsync case), so the figures are of the transport and the
// compression, not of the disk. Every run starts from recently used memory
// (see harness.PrimeMemory).
// The cases of one run are interleaved (run 1 of every case, then run 2
// ...) so that load from other work on the machine spreads over all of
// them. Prints a Markdown table on stdout and progress on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/bench/harness"
)

type namedCase struct {
	name string
	run  transfer
	// needs are the programs the case runs; it is skipped without them.
	needs []string
}

type sample struct {
	mbps   float64
	cpuSec float64 // CPU time of both ends (this process and its children)
	sysSec float64 // the part of cpuSec spent in the kernel
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/impexp:", err)
		os.Exit(1)
	}
}

func run() error {
	sizeFlag := flag.String("size", "1G", "bytes per transfer (suffix K, M or G: powers of 1024)")
	runs := flag.Int("runs", 3, "runs of every case; the median is reported")
	dirFlag := flag.String("dir", "", "directory for the files (default: a new temporary directory under /var/tmp, removed afterwards)")
	casesFlag := flag.String("cases", "", "comma-separated cases to run (default: all)")
	data := flag.String("data", "both", "random, zero or both")
	verify := flag.Bool("verify", true, "compare every destination with its source (outside the timing)")
	prime := flag.Bool("prime", true, "before every run, write and delete a scratch file of -size in 1 MiB blocks (outside the timing)")
	flag.Parse()

	size, err := parseSize(*sizeFlag)
	if err != nil {
		return err
	}
	if *runs < 1 {
		return errors.New("-runs must be at least 1")
	}
	var kinds []string
	switch *data {
	case "random", "zero":
		kinds = []string{*data}
	case "both":
		kinds = []string{"random", "zero"}
	default:
		return fmt.Errorf("-data %q: want random, zero or both", *data)
	}
	load := loadAverage()
	started := time.Now()

	dir := *dirFlag
	if dir == "" {
		dir, err = os.MkdirTemp("/var/tmp", "corral-bench-impexp-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	certDir, err := os.MkdirTemp(dir, "certs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(certDir)
	recv, err := harness.NewTLSEndpoint(certDir, "corral-bench-recv")
	if err != nil {
		return err
	}
	send, err := harness.NewTLSEndpoint(certDir, "corral-bench-send")
	if err != nil {
		return err
	}
	e := &env{recv: recv, send: send}

	all := allCases(e)
	cases, skipped, err := selectCases(all, *casesFlag)
	if err != nil {
		return err
	}

	srcs := map[string]string{}
	for _, k := range kinds {
		p := filepath.Join(dir, "src-"+k)
		progress(started, "writing %s (%s of %s data)", p, *sizeFlag, k)
		if err := harness.WriteDataFile(p, size, k == "random"); err != nil {
			return err
		}
		defer os.Remove(p)
		srcs[k] = p
	}
	dst := filepath.Join(dir, "dst")
	defer os.Remove(dst)

	// An interrupt ends the current transfer and still removes the files.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	maxLoad := load1()
	results := map[string][]sample{} // key: kind + "/" + case
	for r := 1; r <= *runs; r++ {
		for _, k := range kinds {
			for _, c := range cases {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if *prime {
					if err := harness.PrimeMemory(dst, size); err != nil {
						return err
					}
				}
				s, err := measure(ctx, c.run, srcs[k], dst, size, *verify)
				if err != nil {
					return fmt.Errorf("%s on %s data, run %d: %w", c.name, k, r, err)
				}
				if l := load1(); l > maxLoad {
					maxLoad = l
				}
				progress(started, "run %d/%d %-6s %-12s %8.1f MB/s  %5.2f CPU s (%.2f system)", r, *runs, k, c.name, s.mbps, s.cpuSec, s.sysSec)
				results[k+"/"+c.name] = append(results[k+"/"+c.name], s)
			}
		}
	}

	fmt.Print(table(tableInput{
		size: size, sizeText: *sizeFlag, runs: *runs, load: load, maxLoad: maxLoad, endLoad: loadAverage(), when: started,
		kinds: kinds, cases: cases, skipped: skipped, results: results,
	}))
	return nil
}

// allCases lists every case in table order.
func allCases(e *env) []namedCase {
	cs := []namedCase{
		{name: "raw-tls", run: e.rawTLS},
		{name: "socat", run: e.socat(""), needs: []string{"socat"}},
		{name: "socat+gzip", run: e.socat("gzip"), needs: []string{"socat", "gzip"}},
		{name: "socat+zstd", run: e.socat("zstd"), needs: []string{"socat", "zstd"}},
	}
	return append(cs, impexpCases(e)...)
}

// selectCases keeps the cases named in list (all if empty), always with
// raw-tls first since every ratio needs it, and drops the cases whose
// programs are missing.
func selectCases(all []namedCase, list string) (cases []namedCase, skipped []string, err error) {
	want := map[string]bool{"raw-tls": true}
	if list != "" {
		for n := range strings.SplitSeq(list, ",") {
			n = strings.TrimSpace(n)
			if !slices.ContainsFunc(all, func(c namedCase) bool { return c.name == n }) {
				return nil, nil, fmt.Errorf("-cases: unknown case %q", n)
			}
			want[n] = true
		}
	}
	for _, c := range all {
		if list != "" && !want[c.name] {
			continue
		}
		missing := ""
		for _, prog := range c.needs {
			if _, err := exec.LookPath(prog); err != nil {
				missing = prog
				break
			}
		}
		if missing != "" {
			skipped = append(skipped, fmt.Sprintf("%s (no %s)", c.name, missing))
			continue
		}
		cases = append(cases, c)
	}
	return cases, skipped, nil
}

// measure runs one transfer and checks its result.
func measure(ctx context.Context, t transfer, src, dst string, size int64, verify bool) (sample, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	_ = os.Remove(dst)
	timed, cleanup, err := t(ctx, src, dst)
	if err != nil {
		return sample{}, err
	}
	defer cleanup()
	user0, sys0 := cpuTime()
	t0 := time.Now()
	err = timed()
	elapsed := time.Since(t0)
	user1, sys1 := cpuTime()
	if err != nil {
		return sample{}, err
	}
	if verify {
		if err := harness.SameContent(src, dst); err != nil {
			return sample{}, err
		}
	} else if fi, err := os.Stat(dst); err != nil {
		return sample{}, err
	} else if fi.Size() != size {
		return sample{}, fmt.Errorf("destination has %d bytes, want %d", fi.Size(), size)
	}
	// Removing the copy drops its pages (and any pending writeback)
	// before the next run.
	if err := os.Remove(dst); err != nil {
		return sample{}, err
	}
	return sample{
		mbps:   float64(size) / elapsed.Seconds() / 1e6,
		cpuSec: (user1 - user0 + sys1 - sys0).Seconds(),
		sysSec: (sys1 - sys0).Seconds(),
	}, nil
}

// cpuTime is the user and system time of this process and of its waited-for
// children and their descendants.
func cpuTime() (user, sys time.Duration) {
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err == nil {
			user += time.Duration(ru.Utime.Nano())
			sys += time.Duration(ru.Stime.Nano())
		}
	}
	return user, sys
}

// parseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024; a trailing "iB" or "B" is allowed).
func parseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(strings.TrimSpace(s)), "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 || n > (1<<50)/mult {
		return 0, fmt.Errorf("-size %q: want a positive byte count such as 1G or 512M", s)
	}
	return n * mult, nil
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// load1 is the one-minute load average (0 if unknown).
func load1() float64 {
	f := strings.Fields(loadAverage())
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

func progress(start time.Time, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
}

type tableInput struct {
	size     int64
	sizeText string
	runs     int
	load     string  // load averages at start
	endLoad  string  // and at the end
	maxLoad  float64 // highest one-minute load seen after a case
	when     time.Time
	kinds    []string
	cases    []namedCase
	skipped  []string
	results  map[string][]sample
}

// table renders the medians as Markdown. The ratio is of the case's
// median to raw-tls's median on the same data in this run.
func table(in tableInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Transfers of %s (%d bytes), %d runs each, median; %s, %d cores (nproc), %s; "+
		"load average %s at start, %s at the end, one-minute load up to %.2f during the run.\n\n",
		in.sizeText, in.size, in.runs, in.when.UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), runtime.Version(),
		in.load, in.endLoad, in.maxLoad)
	b.WriteString("MB/s is 10^6 bytes per second of file data; × raw-tls divides medians on the same data; " +
		"CPU s per GB is the median user+system CPU time of both ends per 10^9 bytes.\n\n")
	b.WriteString("| data | case | MB/s | min–max | × raw-tls | CPU s per GB |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: |\n")
	for _, k := range in.kinds {
		base := median(in.results[k+"/raw-tls"], func(s sample) float64 { return s.mbps })
		for _, c := range in.cases {
			ss := in.results[k+"/"+c.name]
			mbps := median(ss, func(s sample) float64 { return s.mbps })
			cpu := median(ss, func(s sample) float64 { return s.cpuSec })
			lo, hi := ss[0].mbps, ss[0].mbps
			for _, s := range ss {
				lo, hi = min(lo, s.mbps), max(hi, s.mbps)
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f–%.0f | %.2f | %.2f |\n",
				k, c.name, mbps, lo, hi, mbps/base, cpu/(float64(in.size)/1e9))
		}
	}
	if len(in.skipped) > 0 {
		fmt.Fprintf(&b, "\nSkipped: %s.\n", strings.Join(in.skipped, ", "))
	}
	return b.String()
}

func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
