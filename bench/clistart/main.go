// Command clistart measures what one `corral` call costs from exec to exit:
// `corral --version` (process start, package initialisation and the
// command tree, nothing else) and `corral job list` against a dev cluster
// (the same plus one LUXI query), each run --runs times in turn, one
// process at a time. A static binary that exits at once is timed the same
// way as the floor: what exec and the process's teardown cost on this
// machine whatever the program. Give --corral a binary built from another
// commit to compare two builds in one sitting.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/corral/corral/bench/harness"
)

type command struct {
	Name    string        `json:"name"`
	Args    []string      `json:"args"`
	Latency harness.Stats `json:"latency"`
	// anyExit accepts a non-zero exit status: builds older than the
	// --version flag answer it with a usage error, which costs the same
	// start-up.
	anyExit bool
}

type result struct {
	Bench    string          `json:"bench"`
	Binary   string          `json:"binary"`
	Size     int64           `json:"binary_bytes"`
	Runs     int             `json:"runs"`
	Commands []command       `json:"commands"`
	Machine  harness.Machine `json:"machine"`
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
	corral := flag.String("corral", "", "corral binary to measure (default <bin>/corral)")
	runs := flag.Int("runs", 300, "runs of each command")
	noCluster := flag.Bool("no-cluster", false, "time only the commands that need no cluster")
	flag.Parse()
	if *corral == "" {
		*corral = filepath.Join(cf.Bin, "corral")
	}
	bin, err := filepath.Abs(*corral)
	if err != nil {
		return err
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return err
	}
	floor, err := buildFloor()
	if err != nil {
		return err
	}
	defer os.RemoveAll(filepath.Dir(floor))
	res := result{Bench: "clistart", Binary: bin, Size: fi.Size(), Runs: *runs, Machine: harness.ReadMachine()}
	cmds := []command{
		{Name: "exec floor (static binary that exits)", Args: []string{floor}},
		{Name: "corral --version", Args: []string{bin, "--version"}, anyExit: true},
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
		cmds = append(cmds, command{Name: "corral job list", Args: []string{bin, "job", "list"}})
	}
	// Interleave the commands run by run, so a change in the machine's
	// load touches each of them alike.
	samples := make([][]float64, len(cmds))
	for range *runs {
		for i := range cmds {
			ms, err := timeRun(cmds[i].Args, env, cmds[i].anyExit)
			if err != nil {
				return err
			}
			samples[i] = append(samples[i], ms)
		}
	}
	var summary bytes.Buffer
	fmt.Fprintf(&summary, "%s (%.1f MiB), %d runs each, load %.2f:\n", bin, harness.MiB(fi.Size()), *runs, res.Machine.Load1)
	for i := range cmds {
		cmds[i].Latency = harness.Summarize(samples[i])
		fmt.Fprintf(&summary, "  %-40s %s\n", cmds[i].Name, cmds[i].Latency)
	}
	res.Commands = cmds
	return harness.Emit(res, summary.String())
}

// timeRun runs one command to its end and returns the wall time from
// before the fork to after the wait, in milliseconds.
func timeRun(args, env []string, anyExit bool) (float64, error) {
	var stderr bytes.Buffer
	c := exec.Command(args[0], args[1:]...)
	c.Env = env
	c.Stderr = &stderr
	t0 := time.Now()
	err := c.Run()
	ms := float64(time.Since(t0).Microseconds()) / 1000
	var exit *exec.ExitError
	if anyExit && errors.As(err, &exit) {
		err = nil
	}
	if err != nil {
		return 0, fmt.Errorf("%v: %w: %s", args, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return ms, nil
}

// floorSource is the smallest Go program: the runtime starts and exits.
const floorSource = "package main\n\nfunc main() {}\n"

// buildFloor builds the floor program into a temporary directory.
func buildFloor() (string, error) {
	dir, err := os.MkdirTemp("", "clistart-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(floorSource), 0o644); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "floor")
	b := exec.Command("go", "build", "-o", out, src)
	b.Dir = dir
	b.Env = append(os.Environ(), "GO111MODULE=off", "CGO_ENABLED=0")
	if msg, err := b.CombinedOutput(); err != nil {
		return "", errors.Join(fmt.Errorf("building the floor program: %w", err), errors.New(string(msg)))
	}
	return out, nil
}
