package devcluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"
)

// RAPIProbe polls GET /2/info on a dev cluster's corral-rapi, with the
// write user's credentials, and records when each call ended and whether it
// succeeded: how failover tests and benchmarks see RAPI's availability.
type RAPIProbe struct {
	mu      sync.Mutex
	answers []probeAnswer
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

type probeAnswer struct {
	at time.Time
	ok bool
}

// StartRAPIProbe starts polling every interval, each call bounded by 5 s,
// until Stop.
func StartRAPIProbe(st *State, every time.Duration) (*RAPIProbe, error) {
	env, err := ReadRAPIEnv(st.StateDir)
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
	hc := &http.Client{Timeout: 5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	p := &RAPIProbe{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer hc.CloseIdleConnections()
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(every):
			}
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/2/info", nil)
			req.SetBasicAuth(env.User, env.Password)
			ok := false
			if resp, err := hc.Do(req); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			p.mu.Lock()
			p.answers = append(p.answers, probeAnswer{time.Now(), ok})
			p.mu.Unlock()
		}
	}()
	return p, nil
}

// Stop ends the polling and waits for the call in progress.
func (p *RAPIProbe) Stop() {
	p.once.Do(func() { close(p.stop) })
	<-p.done
}

// AnyOK reports whether some call succeeded.
func (p *RAPIProbe) AnyOK() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.answers {
		if a.ok {
			return true
		}
	}
	return false
}

// RAPIOutage is what a probe saw after a moment: the first failed call and
// the first successful one after it (zero when there was none), and how
// many calls ended and failed.
type RAPIOutage struct {
	FailAt, OKAt  time.Time
	Failed, Calls int
}

// Recovered reports whether RAPI failed and then answered again.
func (o RAPIOutage) Recovered() bool { return !o.OKAt.IsZero() }

// Length is the time from the first failure to the answer after it (0
// when RAPI never failed or has not answered again).
func (o RAPIOutage) Length() time.Duration {
	if o.FailAt.IsZero() || o.OKAt.IsZero() {
		return 0
	}
	return o.OKAt.Sub(o.FailAt)
}

// Since reports the calls that ended after t0.
func (p *RAPIProbe) Since(t0 time.Time) RAPIOutage {
	p.mu.Lock()
	defer p.mu.Unlock()
	var o RAPIOutage
	for _, a := range p.answers {
		if !a.at.After(t0) {
			continue
		}
		o.Calls++
		switch {
		case !a.ok:
			o.Failed++
			if o.FailAt.IsZero() {
				o.FailAt = a.at
			}
		case !o.FailAt.IsZero() && o.OKAt.IsZero():
			o.OKAt = a.at
		}
	}
	return o
}
