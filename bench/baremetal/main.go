// Command baremetal measures how long a Bare Metal API takes from the
// request that starts a provision action to the machine showing the
// action's end state, for fake-hardware machines, over the API's own HTTP
// interface: the same program measures Corral and OpenStack Ironic.
//
// It enrolls --machines machines, then walks each through manage,
// provide, active (deploy), rescue, unrescue and deleted (undeploy), one
// request at a time, polling GET /v1/nodes/<uuid> every --poll until the
// state is reached; it reports p50/p99 per action and overall, and
// deletes the machines it made.
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/corral/corral/bench/harness"
)

type action struct {
	target, state string
	body          map[string]any
}

var walk = []action{
	{"manage", "manageable", nil},
	{"provide", "available", nil},
	{"active", "active", nil},
	{"rescue", "rescue", map[string]any{"rescue_password": "bench-rescue-pw"}},
	{"unrescue", "active", nil},
	{"deleted", "available", nil},
}

type result struct {
	Bench    string                   `json:"bench"`
	Endpoint string                   `json:"endpoint"`
	Label    string                   `json:"label"`
	Machines int                      `json:"machines"`
	PollMS   float64                  `json:"poll_ms"`
	Actions  map[string]harness.Stats `json:"actions"`
	All      harness.Stats            `json:"all"`
	Create   harness.Stats            `json:"create"`
	Machine  harness.Machine          `json:"machine"`
}

type client struct {
	http     *http.Client
	endpoint string
	user     string
	password string
	version  string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/baremetal:", err)
		os.Exit(1)
	}
}

func run() error {
	endpoint := flag.String("endpoint", "https://127.0.0.1:6385", "Bare Metal API root, without /v1")
	cacert := flag.String("cacert", "", "CA certificate (PEM) of an https endpoint")
	user := flag.String("user", "", "http_basic user (empty: noauth)")
	pwFile := flag.String("password-file", "", "file holding the http_basic password")
	label := flag.String("label", "", "name of the system measured, for the output")
	machines := flag.Int("machines", 100, "machines to walk")
	poll := flag.Duration("poll", 5*time.Millisecond, "how often the machine is read while an action runs")
	version := flag.String("version", "1.78", "API microversion requested")
	flag.Parse()
	c, err := newClient(*endpoint, *cacert, *user, *pwFile, *version)
	if err != nil {
		return err
	}
	ctx := context.Background()
	res := result{Bench: "baremetal", Endpoint: *endpoint, Label: *label, Machines: *machines,
		PollMS: float64(*poll) / float64(time.Millisecond), Actions: map[string]harness.Stats{}, Machine: harness.ReadMachine()}
	var uuids []string
	defer func() {
		for _, u := range uuids {
			_ = c.do(ctx, "DELETE", "/v1/nodes/"+u, nil, nil)
		}
	}()
	var creates []float64
	for i := range *machines {
		t0 := time.Now()
		var n struct {
			UUID string `json:"uuid"`
		}
		body := map[string]any{"driver": "fake-hardware", "name": fmt.Sprintf("bench-%d-%d", os.Getpid(), i)}
		if err := c.do(ctx, "POST", "/v1/nodes", body, &n); err != nil {
			return fmt.Errorf("creating machine %d: %w", i, err)
		}
		creates = append(creates, ms(time.Since(t0)))
		uuids = append(uuids, n.UUID)
	}
	res.Create = harness.Summarize(creates)
	per := map[string][]float64{}
	var all []float64
	for _, u := range uuids {
		for _, a := range walk {
			d, err := c.act(ctx, u, a, *poll)
			if err != nil {
				return fmt.Errorf("machine %s, %s: %w", u, a.target, err)
			}
			per[a.target] = append(per[a.target], ms(d))
			all = append(all, ms(d))
		}
	}
	for k, v := range per {
		res.Actions[k] = harness.Summarize(v)
	}
	res.All = harness.Summarize(all)
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	fmt.Fprintf(os.Stderr, "%s (%s), %d machines, poll %v, load %.2f:\n", *label, *endpoint, *machines, *poll, res.Machine.Load1)
	fmt.Fprintf(os.Stderr, "  %-9s p50 %7.1f ms  p99 %7.1f ms\n", "create", res.Create.P50, res.Create.P99)
	for _, a := range walk {
		s := res.Actions[a.target]
		fmt.Fprintf(os.Stderr, "  %-9s p50 %7.1f ms  p99 %7.1f ms\n", a.target, s.P50, s.P99)
	}
	fmt.Fprintf(os.Stderr, "  %-9s p50 %7.1f ms  p99 %7.1f ms\n", "all", res.All.P50, res.All.P99)
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// act starts a provision action and waits until the machine shows its
// end state with no target: the time a client's --wait would see.
func (c *client) act(ctx context.Context, uuid string, a action, poll time.Duration) (time.Duration, error) {
	body := map[string]any{"target": a.target}
	for k, v := range a.body {
		body[k] = v
	}
	t0 := time.Now()
	if err := c.do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", body, nil); err != nil {
		return 0, err
	}
	deadline := t0.Add(2 * time.Minute)
	for {
		var n struct {
			State     string  `json:"provision_state"`
			Target    *string `json:"target_provision_state"`
			LastError *string `json:"last_error"`
		}
		if err := c.do(ctx, "GET", "/v1/nodes/"+uuid, nil, &n); err != nil {
			return 0, err
		}
		if n.State == a.state && n.Target == nil {
			return time.Since(t0), nil
		}
		if n.Target == nil && n.State != "" && (n.State == "error" || len(n.State) > 7 && n.State[len(n.State)-7:] == " failed") {
			return 0, fmt.Errorf("machine ended in %q", n.State)
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("still %q after 2 minutes", n.State)
		}
		time.Sleep(poll)
	}
}

func newClient(endpoint, cacert, user, pwFile, version string) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("no certificate in " + cacert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	c := &client{http: &http.Client{Transport: tr, Timeout: time.Minute}, endpoint: endpoint, user: user, version: version}
	if pwFile != "" {
		pw, err := os.ReadFile(pwFile)
		if err != nil {
			return nil, err
		}
		c.password = string(bytes.TrimSpace(pw))
	}
	return c, nil
}

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.endpoint+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	} else {
		req.Header.Set("X-Auth-Token", "notused")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, raw)
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}
