// Command coe measures Kubernetes clusters of the k8s_process driver on a
// dev cluster: it creates --clusters clusters at once from the template
// dev up makes (kwok-small: real etcd, kube-apiserver, controller manager,
// scheduler and kwok per cluster; --workers kwok nodes each), and reports
// per cluster the time from the submit to CREATE_COMPLETE and to every
// node Ready (read from the cluster's API server with a certificate
// corrald signs), then, after --idle, the memory (RSS) and CPU of each
// idle cluster's processes, and the time to delete them all. It needs
// root, `make build` and `make k8s-tools`.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/bench/harness"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/devcluster"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/secret"
)

type clusterResult struct {
	Name          string             `json:"name"`
	CompleteSecs  float64            `json:"create_complete_seconds"`
	AllReadySecs  float64            `json:"all_nodes_ready_seconds"`
	Processes     int                `json:"processes"`
	IdleRSSMiB    float64            `json:"idle_rss_mib"`
	IdleCPUCores  float64            `json:"idle_cpu_cores"`
	ComponentsMiB map[string]float64 `json:"components_rss_mib"`
}

type result struct {
	Bench      string          `json:"bench"`
	Clusters   int             `json:"clusters"`
	Workers    int             `json:"workers_per_cluster"`
	Results    []clusterResult `json:"results"`
	Complete   harness.Stats   `json:"create_complete_ms"`
	AllReady   harness.Stats   `json:"all_nodes_ready_ms"`
	RSSPerMiB  float64         `json:"idle_rss_mib_per_cluster"`
	DeleteSecs float64         `json:"delete_all_seconds"`
	Machine    harness.Machine `json:"machine"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench/coe:", err)
		os.Exit(1)
	}
}

func run() error {
	cf := harness.Flags{Nodes: 0}
	cf.Register(flag.CommandLine)
	n := flag.Int("clusters", 1, "clusters to create at once")
	workers := flag.Int("workers", 3, "kwok worker nodes per cluster")
	idle := flag.Duration("idle", 30*time.Second, "how long the clusters sit idle before their memory is read")
	window := flag.Duration("cpu-window", 10*time.Second, "how long their idle CPU is measured")
	flag.Parse()
	machine := harness.ReadMachine()
	ctx := context.Background()
	cl, err := harness.Start(ctx, cf)
	if err != nil {
		return err
	}
	defer cl.Close()
	c, err := cl.Dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	res := result{Bench: "coe", Clusters: *n, Workers: *workers, Machine: machine}
	start := time.Now()
	var jobs []int64
	for i := range *n {
		id, err := c.SubmitJob(ctx, []any{harness.Op("OP_COE_CLUSTER_CREATE", "name", fmt.Sprintf("b%d", i+1),
			"cluster_template", devcluster.COEDevTemplate, "node_count", *workers, "master_count", 1,
			"project_id", devcluster.COEDevProject, "user_id", devcluster.COEDevUser)})
		if err != nil {
			return err
		}
		jobs = append(jobs, id)
	}
	for i := range *n {
		r, err := measureCreate(ctx, c, fmt.Sprintf("b%d", i+1), *workers, start)
		if err != nil {
			return fmt.Errorf("cluster b%d (job %d): %w", i+1, jobs[i], err)
		}
		res.Results = append(res.Results, r)
		harness.Progress(start, "b%d: CREATE_COMPLETE %.1fs, all %d nodes Ready %.1fs", i+1, r.CompleteSecs, *workers, r.AllReadySecs)
	}
	time.Sleep(*idle)
	var complete, ready []float64
	var rss float64
	for i := range res.Results {
		r := &res.Results[i]
		if err := measureIdle(ctx, c, r, *window); err != nil {
			return err
		}
		complete, ready = append(complete, r.CompleteSecs*1000), append(ready, r.AllReadySecs*1000)
		rss += r.IdleRSSMiB
	}
	res.Complete, res.AllReady = harness.Summarize(complete), harness.Summarize(ready)
	res.RSSPerMiB = rss / float64(len(res.Results))
	t0 := time.Now()
	for _, r := range res.Results {
		if err := harness.RunJob(ctx, c, harness.Op("OP_COE_CLUSTER_REMOVE", "cluster", r.Name)); err != nil {
			return fmt.Errorf("deleting %s: %w", r.Name, err)
		}
	}
	res.DeleteSecs = time.Since(t0).Seconds()
	return harness.Emit(res, fmt.Sprintf("%d cluster(s) of %d kwok nodes: CREATE_COMPLETE p50 %.1fs, all nodes Ready p50 %.1fs, idle RSS %.0f MiB per cluster, delete %.1fs",
		*n, *workers, res.Complete.P50/1000, res.AllReady.P50/1000, res.RSSPerMiB, res.DeleteSecs))
}

// record is a cluster as corrald reports it.
func record(ctx context.Context, c *luxi.Client, name string) (coewire.ClusterRecord, error) {
	var out []coewire.ClusterRecord
	if err := c.Call(ctx, coewire.MethodClusters, []any{[]string{name}}, &out); err != nil {
		return coewire.ClusterRecord{}, err
	}
	if len(out) != 1 {
		return coewire.ClusterRecord{}, fmt.Errorf("%d clusters named %s", len(out), name)
	}
	return out[0], nil
}

// measureCreate waits for CREATE_COMPLETE, then for every node Ready as
// the cluster's API server reports them.
func measureCreate(ctx context.Context, c *luxi.Client, name string, workers int, start time.Time) (clusterResult, error) {
	r := clusterResult{Name: name}
	var rec coewire.ClusterRecord
	for {
		var err error
		if rec, err = record(ctx, c, name); err != nil {
			if ecode.ClassOf(err) == ecode.NoEnt && time.Since(start) < time.Minute {
				time.Sleep(100 * time.Millisecond) // its job has not stored it yet
				continue
			}
			return r, err
		}
		st := rec.Cluster.Status
		if st == "CREATE_COMPLETE" {
			r.CompleteSecs = time.Since(start).Seconds()
			break
		}
		if strings.HasSuffix(st, "_FAILED") {
			return r, fmt.Errorf("%s: %s", st, rec.Cluster.StatusReason)
		}
		if time.Since(start) > 10*time.Minute {
			return r, fmt.Errorf("still %s after 10 minutes", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	kc, err := adminClient(ctx, c, rec)
	if err != nil {
		return r, err
	}
	defer kc.Close()
	for {
		nodes, err := kc.ListNodes(ctx, "")
		if err != nil {
			return r, err
		}
		ready := 0
		for _, n := range nodes {
			if n.Ready == kube.ConditionTrue {
				ready++
			}
		}
		if ready >= workers {
			r.AllReadySecs = time.Since(start).Seconds()
			return r, nil
		}
		if time.Since(start) > 10*time.Minute {
			return r, fmt.Errorf("%d of %d nodes Ready after 10 minutes", ready, workers)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// adminClient is a client of the cluster's API server with a certificate
// corrald signs, as `openstack coe cluster config` gets one.
func adminClient(ctx context.Context, c *luxi.Client, rec coewire.ClusterRecord) (*kube.Client, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}}, key)
	if err != nil {
		return nil, err
	}
	var signed, ca coewire.Certificate
	if err := c.Call(ctx, coewire.MethodSign, []any{coewire.SignArgs{Cluster: rec.Cluster.UUID,
		CSR: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: csr}))}}, &signed); err != nil {
		return nil, err
	}
	if err := c.Call(ctx, coewire.MethodCA, []any{rec.Cluster.UUID}, &ca); err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return kube.New(rec.Cluster.APIAddress, []byte(ca.PEM), []byte(signed.PEM),
		secret.Secret(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
}

// measureIdle reads the RSS of the cluster's processes (their command
// lines name its uuid) and their CPU over window.
func measureIdle(ctx context.Context, c *luxi.Client, r *clusterResult, window time.Duration) error {
	rec, err := record(ctx, c, r.Name)
	if err != nil {
		return err
	}
	pids := procsMentioning(rec.Cluster.UUID)
	r.Processes = len(pids)
	r.ComponentsMiB = map[string]float64{}
	cpu0 := map[int]time.Duration{}
	for _, pid := range pids {
		rss, err := harness.RSS(pid)
		if err != nil {
			continue
		}
		r.IdleRSSMiB += harness.MiB(rss)
		r.ComponentsMiB[progName(pid)] += harness.MiB(rss)
		if st, err := harness.ReadStat(pid); err == nil {
			cpu0[pid] = st.CPU()
		}
	}
	time.Sleep(window)
	var used time.Duration
	for pid, before := range cpu0 {
		if st, err := harness.ReadStat(pid); err == nil {
			used += st.CPU() - before
		}
	}
	r.IdleCPUCores = used.Seconds() / window.Seconds()
	return nil
}

func procsMentioning(s string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func progName(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return "?"
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return filepath.Base(argv0)
}
