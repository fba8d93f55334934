package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral/corral/internal/bootstrap"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/etcdproc/etcdtest"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/storecfg"
)

// requireEtcd skips a test when etcd is not installed, unless
// CORRAL_REQUIRE_ETCD=1 makes that a failure.
func requireEtcd(t *testing.T) {
	t.Helper()
	requireRoot(t)
	etcdtest.Require(t)
}

// storeRecord reads the cluster's store.json.
func (c *cluster) storeRecord() storecfg.Config {
	c.t.Helper()
	cfg, err := storecfg.Load(bootstrap.Layout{StateDir: c.dir}.MasterDir())
	if err != nil {
		c.t.Fatal(err)
	}
	return cfg
}

// killEtcdMember SIGKILLs the n-th etcd member and waits until it is gone.
func (c *cluster) killEtcdMember(n int) {
	c.t.Helper()
	if err := c.h.Kill(devcluster.EtcdMemberName(n), 10*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

// restartEtcdMember starts the n-th etcd member again with its flags and
// user, and waits until it reports healthy.
func (c *cluster) restartEtcdMember(n int) {
	c.t.Helper()
	name := devcluster.EtcdMemberName(n)
	np, err := devcluster.Restart(c.st, name)
	if err != nil {
		c.t.Fatal(err)
	}
	if np.User != bootstrap.EtcdUser {
		c.t.Fatalf("%s restarted as %q, want %s", name, np.User, bootstrap.EtcdUser)
	}
	client := c.etcdHealthClient()
	url := c.st.EtcdEndpoints[n-1] + "/health"
	waitFor(c.t, 30*time.Second, name+" healthy after its restart", func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// etcdHealthClient talks to the members with their own certificate (root
// may read it), which carries the name the members demand of clients.
func (c *cluster) etcdHealthClient() *http.Client {
	c.t.Helper()
	pdir := filepath.Join(bootstrap.Layout{StateDir: c.dir}.EtcdDir(), "pki")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(pdir, name))
		if err != nil {
			c.t.Fatal(err)
		}
		return b
	}
	cert, err := tls.X509KeyPair(read("member.pem"), read("member.key"))
	if err != nil {
		c.t.Fatal(err)
	}
	pool, _, err := pki.CAPool(read("ca.pem"))
	if err != nil {
		c.t.Fatal(err)
	}
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool}}}
}

// stopCorrald stops corrald with SIGTERM, as an operator stops a cluster,
// and waits until it has exited.
func (c *cluster) stopCorrald() { c.stopDaemon("corrald") }

// submitDelays submits n one-op test-delay jobs in one call and returns
// their ids.
func (c *cluster) submitDelays(n int, seconds float64) []int64 {
	c.t.Helper()
	jobs := make([][]any, n)
	for i := range jobs {
		jobs[i] = []any{map[string]any{"OP_ID": "OP_TEST_DELAY", "duration": seconds}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := c.luxi.SubmitManyJobs(ctx, jobs)
	if err != nil {
		c.t.Fatalf("submitting %d jobs: %v", n, err)
	}
	ids := make([]int64, len(res))
	for i, r := range res {
		if !r.OK {
			c.t.Fatalf("job %d of %d refused: %v", i, n, r.Err)
		}
		ids[i] = r.JobID
	}
	return ids
}

// waitJobs waits, bounded, until every job in ids is finalized and fails
// the test for any that did not succeed.
func (c *cluster) waitJobs(ids []int64, limit time.Duration) {
	c.t.Helper()
	var open []int64
	waitFor(c.t, limit, fmt.Sprintf("%d jobs to finish", len(ids)), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		rows, err := queryJobs(ctx, c.luxi, ids, []string{"status"})
		if err != nil {
			c.t.Fatalf("querying jobs: %v", err)
		}
		open = open[:0]
		for i, r := range rows {
			if r == nil {
				c.t.Fatalf("job %d is lost", ids[i])
			}
			st, _ := r[0].(string)
			switch {
			case !finalStatus(st):
				open = append(open, ids[i])
			case st != "success":
				c.t.Fatalf("job %d ended %s", ids[i], st)
			}
		}
		return len(open) == 0
	})
}
