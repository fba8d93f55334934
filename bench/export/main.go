// Command export measures a disk's whole way between nodes, end to end, on
// a real dev cluster (corrald, node daemons, fake hypervisor, file disks):
// `backup export` of an instance to the other node, `backup import` of
// that export into a new instance, and `instance move` of the instance to
// a second dev cluster on the same machine, each timed from the job's
// submission (or the move command's start) to its success. Next to them,
// in the same run and on the same disk file, Ganeti's transport: socat with
// OpenSSL from the first node's address to the second's, writing a file in
// the second node's export directory, alone (as Ganeti's dd, which does not
// sync) and with an fdatasync of the copy at the end (as durable as
// Corral's import, which syncs before it acknowledges).
//
// Every case runs on random and on zero-filled disks, through the OS
// definition's export and import scripts (the dev cluster's tiny OS by
// default) and raw (an instance without OS). Cases are interleaved (run 1
// of every case, then run 2...) so that load from other work spreads over
// them, every run starts from recently used memory (harness.PrimeMemory),
// and every copy is compared with its source byte for byte outside the
// timing (a move's copy on the OS path by the data file in its file
// system, since the destination runs the rename script). Prints a Markdown table on stdout, with each case's median as a
// ratio to socat's median on the same data in the same run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/bench/harness"
)

// caseNames lists every case in table order.
var caseNames = []string{"socat", "socat+sync", "export", "import", "move"}

// options are the program's flags.
type options struct {
	cluster  harness.Flags
	sizeMiB  int64
	runs     int
	kinds    []string // random, zero
	modes    []string // os, raw
	cases    []string
	osName   string
	compress string
	prime    bool
	verify   bool
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/export:", err)
		os.Exit(1)
	}
}

func parseFlags() (options, error) {
	o := options{cluster: harness.Flags{Nodes: 1}}
	o.cluster.Register(flag.CommandLine)
	flag.Int64Var(&o.sizeMiB, "size", 1024, "size of the instance disk, MiB")
	flag.IntVar(&o.runs, "runs", 3, "runs of every case; the median is reported")
	data := flag.String("data", "random,zero", "disk contents: random, zero or both (comma list)")
	modes := flag.String("modes", "os,raw", "os (the OS definition's export/import scripts), raw (an instance without OS), or both")
	cases := flag.String("cases", strings.Join(caseNames, ","), "cases to run (comma list; socat is always run, the ratios need it)")
	flag.StringVar(&o.osName, "os-type", "tiny+default", "OS definition of the os mode")
	flag.StringVar(&o.compress, "compress", "none", "compression of export, import and move")
	flag.BoolVar(&o.prime, "prime", true, "before every case, write and delete a scratch file of -size in 1 MiB blocks (outside the timing)")
	flag.BoolVar(&o.verify, "verify", true, "compare every copy with its source (outside the timing)")
	flag.Parse()
	if o.sizeMiB < 1 || o.runs < 1 {
		return o, errors.New("-size and -runs must be at least 1")
	}
	var err error
	if o.kinds, err = list("-data", *data, []string{"random", "zero"}); err != nil {
		return o, err
	}
	if o.modes, err = list("-modes", *modes, []string{"os", "raw"}); err != nil {
		return o, err
	}
	if o.cases, err = list("-cases", *cases, caseNames); err != nil {
		return o, err
	}
	if !slices.Contains(o.cases, "socat") {
		o.cases = append([]string{"socat"}, o.cases...)
	}
	return o, nil
}

// list splits a comma list and checks its items, keeping valid's order.
func list(flagName, s string, valid []string) ([]string, error) {
	want := map[string]bool{}
	for it := range strings.SplitSeq(s, ",") {
		it = strings.TrimSpace(it)
		if it == "both" {
			for _, v := range valid {
				want[v] = true
			}
			continue
		}
		if !slices.Contains(valid, it) {
			return nil, fmt.Errorf("%s: unknown item %q (valid: %s)", flagName, it, strings.Join(valid, ", "))
		}
		want[it] = true
	}
	var out []string
	for _, v := range valid {
		if want[v] {
			out = append(out, v)
		}
	}
	return out, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	b, err := setUp(ctx, o)
	if b != nil {
		defer b.close()
	}
	if err != nil {
		return err
	}
	load := loadAverage()
	results := map[string][]sample{} // data/mode/case
	maxLoad := 0.0
	for r := 1; r <= o.runs; r++ {
		for i := range b.sources {
			src := &b.sources[i]
			for _, c := range o.cases {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if strings.HasPrefix(c, "socat") && src.mode != b.socatMode() {
					continue // the same kind of file on each path: once per data is enough
				}
				s, err := b.measure(ctx, c, src)
				if err != nil {
					return fmt.Errorf("%s, %s data, %s, run %d: %w", c, src.kind, src.mode, r, err)
				}
				maxLoad = max(maxLoad, load1())
				harness.Progress(b.started, "run %d/%d %-6s %-3s %-10s %7.1f MB/s (%.2f s; data phase %.2f s; %.2f CPU s)",
					r, o.runs, src.kind, src.mode, c, s.mbps(b.size), s.total.Seconds(), s.data.Seconds(), s.cpu.Seconds())
				key := src.kind + "/" + src.mode + "/" + c
				results[key] = append(results[key], s)
			}
		}
	}
	fmt.Print(table(o, b, results, load, maxLoad))
	return nil
}

// sample is one timed case.
type sample struct {
	total time.Duration // submission to success (socat: the transfer)
	data  time.Duration // the job's data phase (its first and last transfer log lines); 0 when unknown
	cpu   time.Duration // CPU time of the daemons, their scripts and this program's children
}

func (s sample) mbps(size int64) float64 { return float64(size) / s.total.Seconds() / 1e6 }

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

func load1() float64 {
	var v float64
	_, _ = fmt.Sscan(loadAverage(), &v)
	return v
}

// table renders the medians as Markdown.
func table(o options, b *bench, results map[string][]sample, load string, maxLoad float64) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Disk of %d MiB (%d bytes), %d runs each, median; %s, %d cores; load average %s at start, %s at the end, "+
		"one-minute load up to %.2f; compress %s; OS %s.\n\n",
		o.sizeMiB, b.size, o.runs, b.started.UTC().Format("2006-01-02 15:04 UTC"), b.machine.Cores, load, loadAverage(), maxLoad, o.compress, o.osName)
	sb.WriteString("MB/s is 10^6 bytes of disk per second from submission to success; × socat divides medians on the same data in this run; " +
		"data phase is the job's time from its first to its last transfer log line; " +
		"CPU s per GB is the median CPU time of the daemons of both clusters, their scripts and socat or the move command, per 10^9 bytes.\n\n")
	sb.WriteString("| data | path | case | MB/s | min–max | × socat | × socat+sync | data phase s | CPU s per GB |\n")
	sb.WriteString("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, src := range b.sources {
		base := medianMBps(results[src.kind+"/"+b.socatMode()+"/socat"], b.size)
		baseSync := medianMBps(results[src.kind+"/"+b.socatMode()+"/socat+sync"], b.size)
		for _, c := range o.cases {
			ss := results[src.kind+"/"+src.mode+"/"+c]
			if len(ss) == 0 {
				continue
			}
			m := medianMBps(ss, b.size)
			lo, hi := ss[0].mbps(b.size), ss[0].mbps(b.size)
			var datas, cpus []float64
			for _, s := range ss {
				cpus = append(cpus, s.cpu.Seconds())
				lo, hi = min(lo, s.mbps(b.size)), max(hi, s.mbps(b.size))
				if s.data > 0 {
					datas = append(datas, s.data.Seconds())
				}
			}
			data := "–"
			if len(datas) > 0 {
				data = fmt.Sprintf("%.2f", median(datas))
			}
			syncRatio := "–"
			if baseSync > 0 {
				syncRatio = fmt.Sprintf("%.2f", m/baseSync)
			}
			path := src.mode
			if c == "socat" || c == "socat+sync" {
				path = "file"
			}
			fmt.Fprintf(&sb, "| %s | %s | %s | %.0f | %.0f–%.0f | %.2f | %s | %s | %.2f |\n", src.kind, path, c, m, lo, hi, m/base, syncRatio, data,
				median(cpus)/(float64(b.size)/1e9))
		}
	}
	return sb.String()
}

func medianMBps(ss []sample, size int64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = s.mbps(size)
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
