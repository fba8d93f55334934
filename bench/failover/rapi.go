package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/devcluster"
)

// rapiPoll is the pause between two GET /2/info of the probe.
const rapiPoll = 20 * time.Millisecond

// rapiProbe polls GET /2/info on corral-rapi and records each answer.
type rapiProbe struct {
	mu      sync.Mutex
	answers []answer
	stop    chan struct{}
	done    chan struct{}
}

type answer struct {
	at time.Time
	ok bool
}

func startProbe(st *devcluster.State) (*rapiProbe, error) {
	env, err := devcluster.ReadRAPIEnv(st.StateDir)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(env.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", env.CA)
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	p := &rapiProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(rapiPoll):
			}
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/2/info", nil)
			req.SetBasicAuth(env.User, env.Password)
			ok := false
			if resp, err := hc.Do(req); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			p.mu.Lock()
			p.answers = append(p.answers, answer{time.Now(), ok})
			p.mu.Unlock()
		}
	}()
	return p, nil
}

func (p *rapiProbe) end() {
	close(p.stop)
	<-p.done
}

// outage is, after t0, the time from the first failed call to the first
// answer after it (0 when nothing failed), with the failed and all calls.
func (p *rapiProbe) outage(t0 time.Time) (ms float64, failed, calls int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var failAt, okAt time.Time
	for _, a := range p.answers {
		if !a.at.After(t0) {
			continue
		}
		calls++
		if !a.ok {
			failed++
			if failAt.IsZero() {
				failAt = a.at
			}
		} else if !failAt.IsZero() && okAt.IsZero() {
			okAt = a.at
		}
	}
	if failAt.IsZero() || okAt.IsZero() {
		return 0, failed, calls
	}
	return harness.Ms(okAt.Sub(failAt)), failed, calls
}

// waitRecovered waits until RAPI answered after t0 following its first
// failure, or a second of answers passed without any failure.
func (p *rapiProbe) waitRecovered(t0 time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ms, failed, calls := p.outage(t0)
		if ms > 0 || (failed == 0 && calls > int(time.Second/rapiPoll)) {
			return nil
		}
		time.Sleep(rapiPoll)
	}
	return errors.New("RAPI did not answer again within a minute of the kill")
}

// moveOffRAPI hands the master role to another candidate when the master
// is the corrald corral-rapi talks to (the first one).
func moveOffRAPI(ctx context.Context, st *devcluster.State, bin string) error {
	lead, err := devcluster.WaitLeader(ctx, st, time.Minute)
	if err != nil {
		return err
	}
	cands := st.Candidates()
	if lead.Proc != cands[0].Proc {
		return nil
	}
	to := cands[1]
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "corral"), "cluster", "master-failover", "--to", to.Name)
	cmd.Env = append(os.Environ(), "CORRAL_SOCKET="+to.Socket, "CORRAL_STATE_DIR="+st.StateDir, "CORRAL_RUN_DIR="+st.RunDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("master-failover --to %s: %w: %s", to.Name, err, out)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l, err := devcluster.Leader(ctx, st); err == nil && l.Proc == to.Proc {
			return waitStandby(ctx, cands[0].Socket)
		}
	}
	return fmt.Errorf("%s did not take over", to.Name)
}

// logOffsets records the size of each corrald's log.
func logOffsets(st *devcluster.State) map[string]int64 {
	offs := map[string]int64{}
	for _, p := range st.Procs {
		if fi, err := os.Stat(p.Log); err == nil && strings.HasPrefix(p.Name, "corrald") {
			offs[p.Name] = fi.Size()
		}
	}
	return offs
}

// elections counts "elected master" lines the candidates other than
// frozen logged since offs.
func elections(st *devcluster.State, offs map[string]int64, frozen string) int {
	n := 0
	for _, p := range st.Procs {
		off, ok := offs[p.Name]
		if !ok || p.Name == frozen {
			continue
		}
		b, err := os.ReadFile(p.Log)
		if err != nil || int64(len(b)) < off {
			continue
		}
		n += strings.Count(string(b[off:]), "elected master")
	}
	return n
}
