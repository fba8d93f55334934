// Command clistart measures what one `corral` call costs from exec to exit:
// `corral --version` (process start, package initialisation and the
// command tree, nothing else) and `corral job list` against a dev cluster
// (the same plus one LUXI query), each run --runs times in turn, one
// process at a time. A static binary that exits at once is timed the same
// way as the floor: what exec and the process's teardown cost on this
// machine whatever the program. Give --corral more than once (binaries
// built from other commits or with other flags) to compare builds in one
// sitting: all commands of all binaries take turns run by run.
//
// Besides the wall time, each run's CPU time (user and system, from the
// kernel's accounting of the child) and minor page faults are kept: they
// move much less than the wall time with the machine's load.
package main

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/bench/harness"
)

// binary is one corral build being measured.
type binary struct {
	Label string `json:"label"`
	Path  string `json:"path"`
	// run is the copy that is run (see copyFile).
	run  string
	Size int64 `json:"bytes"`
	// Static is false for a binary the dynamic loader starts (built with
	// cgo), which costs a few milliseconds more on each call.
	Static bool `json:"static"`
}

type command struct {
	Name    string        `json:"name"`
	Args    []string      `json:"args"`
	Latency harness.Stats `json:"latency"`
	// CPU is the process's user plus system time, in milliseconds.
	CPU harness.Stats `json:"cpu"`
	// MinorFaults is the median number of minor page faults.
	MinorFaults float64 `json:"minor_faults_p50"`
	// anyExit accepts a non-zero exit status: builds older than the
	// --version flag answer it with a usage error, which costs the same
	// start-up.
	anyExit bool
}

type result struct {
	Bench    string          `json:"bench"`
	Binaries []binary        `json:"binaries"`
	Runs     int             `json:"runs"`
	Commands []command       `json:"commands"`
	Machine  harness.Machine `json:"machine"`
}

// sample is what one run cost.
type sample struct {
	wallMs, cpuMs float64
	minorFaults   int64
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/clistart:", err)
		os.Exit(1)
	}
}

func run() error {
	var cf harness.Flags
	cf.Register(flag.CommandLine)
	var corrals []string
	flag.Func("corral", "corral binary to measure, as PATH or LABEL=PATH; repeat to compare builds (default <bin>/corral)", func(s string) error {
		corrals = append(corrals, s)
		return nil
	})
	runs := flag.Int("runs", 300, "runs of each command")
	noCluster := flag.Bool("no-cluster", false, "time only the commands that need no cluster")
	flag.Parse()
	if len(corrals) == 0 {
		corrals = []string{filepath.Join(cf.Bin, "corral")}
	}
	dir, err := os.MkdirTemp("", "clistart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bins, err := describeBinaries(corrals, dir)
	if err != nil {
		return err
	}
	floor, err := buildFloor(dir)
	if err != nil {
		return err
	}
	res := result{Bench: "clistart", Binaries: bins, Runs: *runs, Machine: harness.ReadMachine()}
	cmds := []command{{Name: "exec floor (static binary that exits)", Args: []string{floor}}}
	for _, b := range bins {
		cmds = append(cmds, command{Name: b.Label + " --version", Args: []string{b.run, "--version"}, anyExit: true})
	}
	env := os.Environ()
	if !*noCluster {
		ctx := context.Background()
		cl, err := harness.Start(ctx, cf)
		if err != nil {
			return err
		}
		defer cl.Close()
		env = append(env, "CORRAL_SOCKET="+cl.Socket)
		for _, b := range bins {
			cmds = append(cmds, command{Name: b.Label + " job list", Args: []string{b.run, "job", "list"}})
		}
	}
	// Interleave the commands run by run, so a change in the machine's
	// load touches each of them alike.
	samples := make([][]sample, len(cmds))
	for range *runs {
		for i := range cmds {
			s, err := timeRun(cmds[i].Args, env, cmds[i].anyExit)
			if err != nil {
				return err
			}
			samples[i] = append(samples[i], s)
		}
	}
	var summary bytes.Buffer
	fmt.Fprintf(&summary, "%d runs each, load %.2f:\n", *runs, res.Machine.Load1)
	for _, b := range bins {
		linking := "static"
		if !b.Static {
			linking = "dynamically linked"
		}
		fmt.Fprintf(&summary, "  %s: %s (%.1f MiB, %s)\n", b.Label, b.Path, harness.MiB(b.Size), linking)
	}
	for i := range cmds {
		var wall, cpu, faults []float64
		for _, s := range samples[i] {
			wall = append(wall, s.wallMs)
			cpu = append(cpu, s.cpuMs)
			faults = append(faults, float64(s.minorFaults))
		}
		cmds[i].Latency = harness.Summarize(wall)
		cmds[i].CPU = harness.Summarize(cpu)
		slices.Sort(faults)
		cmds[i].MinorFaults = harness.Percentile(faults, 50)
		fmt.Fprintf(&summary, "  %-40s %s; CPU p50 %.2f ms; %.0f minor faults\n",
			cmds[i].Name, cmds[i].Latency, cmds[i].CPU.P50, cmds[i].MinorFaults)
	}
	res.Commands = cmds
	return harness.Emit(res, summary.String())
}

// describeBinaries resolves the --corral arguments and copies each binary
// into dir; a binary without a label is labelled "corral", or by its
// position when there are several.
func describeBinaries(args []string, dir string) ([]binary, error) {
	var bins []binary
	for i, a := range args {
		label, path, ok := strings.Cut(a, "=")
		if !ok {
			label, path = "corral", a
			if len(args) > 1 {
				label = fmt.Sprintf("corral#%d", i+1)
			}
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, err
		}
		static, err := isStatic(abs)
		if err != nil {
			return nil, err
		}
		run := filepath.Join(dir, fmt.Sprintf("corral-%d", i+1))
		if err := copyFile(abs, run); err != nil {
			return nil, err
		}
		bins = append(bins, binary{Label: label, Path: abs, run: run, Size: fi.Size(), Static: static})
	}
	return bins, nil
}

// copyFile copies a binary to a new file written in one pass. The copies,
// not the originals, are run: a binary the Go linker has just written
// starts measurably slower (1.5 ms here) than the same bytes written with
// plain writes, as an installed binary is, because of the state it leaves
// in the page cache; without the copies a fresh build would be compared
// with an older one on unequal terms.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}

// timeRun runs one command to its end: the wall time from before the fork
// to after the wait, and the child's CPU time and minor page faults.
func timeRun(args, env []string, anyExit bool) (sample, error) {
	var stderr bytes.Buffer
	c := exec.Command(args[0], args[1:]...)
	c.Env = env
	c.Stderr = &stderr
	t0 := time.Now()
	err := c.Run()
	wall := time.Since(t0)
	var exit *exec.ExitError
	if anyExit && errors.As(err, &exit) {
		err = nil
	}
	if err != nil {
		return sample{}, fmt.Errorf("%v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	s := sample{wallMs: float64(wall.Microseconds()) / 1000}
	if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok {
		s.cpuMs = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
		s.minorFaults = ru.Minflt
	}
	return s, nil
}

// isStatic reports whether the ELF binary at path starts without a program
// interpreter (the dynamic loader).
func isStatic(path string) (bool, error) {
	f, err := elf.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// floorSource is the smallest Go program: the runtime starts and exits.
const floorSource = "package main\n\nfunc main() {}\n"

// buildFloor builds the floor program in dir and returns the path of its
// copy (see copyFile).
func buildFloor(dir string) (string, error) {
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(floorSource), 0o644); err != nil {
		return "", err
	}
	built := filepath.Join(dir, "floor-built")
	b := exec.Command("go", "build", "-o", built, src)
	b.Dir = dir
	b.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
	if msg, err := b.CombinedOutput(); err != nil {
		return "", errors.Join(fmt.Errorf("building the floor program: %w", err), errors.New(string(msg)))
	}
	out := filepath.Join(dir, "floor")
	return out, copyFile(built, out)
}
