package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/luxi"
)

// holdIdle is the idle-connection holder: this program re-executed with
// --hold-idle. It opens n LUXI connections, proves each one is served with
// one call, reports "ready <n>" on stdout and then keeps them open, idle,
// until its stdin closes (the parent is done or died).
func holdIdle(ctx context.Context, socket string, n int) error {
	if _, err := harness.RaiseNoFile(uint64(n) + 64); err != nil {
		fmt.Printf("error %v\n", err)
		return err
	}
	conns := make([]*luxi.Client, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	fail := func(err error) error {
		fmt.Printf("error %v\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return err
	}
	// A full listen backlog (corrald accepting slower than we connect)
	// makes a unix-socket connect fail with EAGAIN at once: wait a little
	// and try again, counting how often.
	retries := 0
	for i := range n {
		c, err := luxi.Dial(ctx, socket)
		for try := 0; err != nil && errors.Is(err, syscall.EAGAIN) && try < 1000; try++ {
			retries++
			time.Sleep(time.Millisecond)
			c, err = luxi.Dial(ctx, socket)
		}
		if err != nil {
			return fail(fmt.Errorf("connection %d: %w", i, err))
		}
		conns = append(conns, c)
	}
	// A connection over corrald's limit is accepted and then answered with
	// an error, and one corrald has no descriptor for waits in the listen
	// backlog: only a call shows whether it is really served.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var next atomic.Int64
	var rejected atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(conns) {
					return
				}
				if _, err := conns[i].QueryConfigValues(cctx, []string{"cluster_name"}); err != nil {
					rejected.Add(1)
					first.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	if r := rejected.Load(); r > 0 {
		return fail(fmt.Errorf("%d of %d connections not served, first: %v", r, n, first.Load()))
	}
	fmt.Printf("ready %d %d\n", len(conns), retries)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// idleHolder is the running holder process.
type idleHolder struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	Open    time.Duration // time to open and check all connections
	Retries int           // connects refused with EAGAIN (full listen backlog) and retried
}

// startIdleHolder runs this program again as the holder of n idle
// connections and waits until they are all open and served.
func startIdleHolder(ctx context.Context, socket string, n int, limit time.Duration) (*idleHolder, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, "--hold-idle", strconv.Itoa(n), "--socket", socket)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	h := &idleHolder{cmd: cmd, stdin: stdin}
	var ready string
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case ready = <-line:
		if s := ready; !strings.HasPrefix(s, "ready ") {
			h.Stop()
			if s == "" {
				s = "holder exited without a word"
			}
			return nil, fmt.Errorf("idle-connection holder: %s", s)
		}
	case <-time.After(limit):
		h.Stop()
		return nil, fmt.Errorf("idle-connection holder not ready after %s", limit)
	}
	h.Open = time.Since(t0)
	if f := strings.Fields(ready); len(f) == 3 {
		h.Retries, _ = strconv.Atoi(f[2])
	}
	return h, nil
}

// Stop closes the holder's stdin, which makes it close its connections and
// exit, and waits for it.
func (h *idleHolder) Stop() error {
	_ = h.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		_ = h.cmd.Process.Kill()
		return errors.Join(errors.New("idle-connection holder did not exit; killed"), <-done)
	}
}
