// Command rapi measures corral-rapi: with --instances fake-hypervisor
// instances in the cluster (diskless, not started), it times --requests
// sequential GET /2/info and GET /2/instances?bulk=1 over one keep-alive
// HTTPS connection (p50/p99/max), then the requests per second --clients
// concurrent keep-alive clients reach on /2/info. It talks to the dev
// cluster's own corral-rapi with the credentials and CA of its rapi.env,
// as a script would.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/devcluster"
)

type route struct {
	Path    string        `json:"path"`
	Latency harness.Stats `json:"latency"`
	Bytes   int           `json:"bytes"`
}

type result struct {
	Bench       string          `json:"bench"`
	Instances   int             `json:"instances"`
	Requests    int             `json:"requests"`
	Routes      []route         `json:"routes"`
	Clients     int             `json:"clients"`
	InfoPerSec  float64         `json:"info_requests_per_second"`
	Machine     harness.Machine `json:"machine"`
	CreateSecs  float64         `json:"create_seconds"`
	ErrorsSeen  int             `json:"errors"`
	FirstError  string          `json:"first_error,omitempty"`
	ReferenceMs float64         `json:"reference_ganeti_info_p50_ms"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/rapi:", err)
		os.Exit(1)
	}
}

func run() error {
	// Room on the fake node for every instance's memory (128 MiB each by
	// default).
	cf := harness.Flags{FakeMemMiB: 1 << 20}
	cf.Register(flag.CommandLine)
	n := flag.Int("instances", 1000, "instances in the cluster")
	requests := flag.Int("requests", 1000, "sequential requests per route")
	clients := flag.Int("clients", 8, "concurrent keep-alive clients for the throughput phase")
	secs := flag.Float64("seconds", 5, "length of the throughput phase")
	flag.Parse()
	machine := harness.ReadMachine()
	ctx := context.Background()
	start := time.Now()
	cl, err := harness.Start(ctx, cf)
	if err != nil {
		return err
	}
	defer cl.Close()
	if cl.State == nil {
		return errors.New("needs a dev cluster (its rapi.env): not --socket")
	}
	env, err := devcluster.ReadRAPIEnv(cl.State.StateDir)
	if err != nil {
		return err
	}
	c, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res := result{Bench: "rapi", Instances: *n, Requests: *requests, Clients: *clients, Machine: machine, ReferenceMs: 50}

	harness.Progress(start, "creating %d instances", *n)
	spec := harness.InstanceSpec{Template: "diskless"}
	jobs := make([][]any, *n)
	for i := range jobs {
		jobs[i] = []any{spec.CreateOp(fmt.Sprintf("r%05d", i))}
	}
	t0 := time.Now()
	ids, err := harness.SubmitBatches(ctx, c, jobs, 500)
	if err != nil {
		return err
	}
	byStatus, err := harness.WaitFinalized(ctx, c, ids, 200*time.Millisecond)
	if err != nil {
		return err
	}
	if len(byStatus["success"]) != *n {
		return fmt.Errorf("%d of %d creations succeeded: %s", len(byStatus["success"]), *n, harness.Failed(ctx, c, ids))
	}
	res.CreateSecs = time.Since(t0).Seconds()

	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(env.CA)
	if err != nil {
		return err
	}
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no certificate in %s", env.CA)
	}
	newClient := func() *http.Client {
		return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 1}}
	}
	var errs atomic.Int64
	var firstErr atomic.Value
	get := func(hc *http.Client, path string) (int, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+path, nil)
		if err != nil {
			return 0, err
		}
		req.SetBasicAuth(env.User, env.Password)
		resp, err := hc.Do(req)
		if err == nil {
			defer resp.Body.Close()
			var b []byte
			if b, err = io.ReadAll(resp.Body); err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("%s: %s: %.200s", path, resp.Status, b)
			}
			if err == nil {
				return len(b), nil
			}
		}
		if errs.Add(1) == 1 {
			firstErr.Store(err.Error())
		}
		return 0, err
	}

	hc := newClient()
	for _, path := range []string{"/2/info", "/2/instances?bulk=1"} {
		harness.Progress(start, "%d sequential GET %s", *requests, path)
		if _, err := get(hc, path); err != nil { // warm the connection
			return err
		}
		ms := make([]float64, 0, *requests)
		size := 0
		for range *requests {
			t := time.Now()
			b, err := get(hc, path)
			if err != nil {
				continue
			}
			ms = append(ms, float64(time.Since(t).Microseconds())/1000)
			size = b
		}
		res.Routes = append(res.Routes, route{Path: path, Latency: harness.Summarize(ms), Bytes: size})
	}

	harness.Progress(start, "%d clients on GET /2/info for %.0f s", *clients, *secs)
	var done atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Duration(*secs * float64(time.Second)))
	t1 := time.Now()
	for range *clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := newClient()
			for time.Now().Before(stop) {
				if _, err := get(hc, "/2/info"); err == nil {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	res.InfoPerSec = float64(done.Load()) / time.Since(t1).Seconds()
	res.ErrorsSeen = int(errs.Load())
	if v, ok := firstErr.Load().(string); ok {
		res.FirstError = v
	}

	summary := fmt.Sprintf("corral-rapi with %d instances (created in %.1fs), one keep-alive HTTPS connection:\n", *n, res.CreateSecs)
	for _, r := range res.Routes {
		summary += fmt.Sprintf("  GET %-20s p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d bytes)\n", r.Path, r.Latency.P50, r.Latency.P99, r.Latency.Max, r.Bytes)
	}
	summary += fmt.Sprintf("  %d keep-alive clients: %.0f GET /2/info per second; %d errors\n", *clients, res.InfoPerSec, res.ErrorsSeen)
	summary += "  reference (quoted, not measured here): Ganeti 3.0.2 answers /2/info in about 50 ms p50"
	return harness.Emit(res, summary)
}
