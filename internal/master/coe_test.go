package master

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

func rawArgs(t *testing.T, args ...any) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(args))
	for i, a := range args {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// putCOECluster stores a cluster and its default groups, as a create
// unit's first step would.
func putCOECluster(t *testing.T, d *Daemon, uuid, name string) {
	t.Helper()
	tx := d.cfg.Begin()
	tx.PutCOECluster(&config.COECluster{Meta: config.Meta{UUID: uuid, Name: name}, Status: config.COECreateInProgress})
	tx.PutCOENodeGroup(&config.COENodeGroup{Meta: config.Meta{UUID: config.NewUUID(), Name: "default-worker"},
		Cluster: uuid, Role: config.COERoleWorker, IsDefault: true, NodeCount: 3})
	if err := d.cfg.Commit(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

// COESubmit of a create answers once the cluster is stored, while its job
// still runs, so a GET right after the API's 202 finds it; a refused op
// answers with its error, kind kept (the quota's 403).
func TestCOESubmitAnswersOnceTheObjectIsStored(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	uuid := config.NewUUID()
	release := make(chan struct{})
	var d *Daemon
	d = reconcilerDaemon(t, Options{WatcherInterval: time.Hour}, func(ctx context.Context) error {
		putCOECluster(t, d, uuid, "c1")
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	defer close(release)
	h := &luxiHandler{d: d}
	op := map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": "c1", "uuid": uuid, "cluster_template": "t"}
	reply, err := h.luxiCOESubmit(ctx, rawArgs(t, op))
	if err != nil {
		t.Fatal(err)
	}
	if done, _ := d.machineJobOutcome(ctx, reply.(coewire.SubmitReply).JobID); done {
		t.Fatal("COESubmit waited for the job's end")
	}
	got, err := h.luxiCOEClusters(ctx, rawArgs(t, []string{"c1"}))
	if err != nil {
		t.Fatal(err)
	}
	recs := got.([]coewire.ClusterRecord)
	if len(recs) != 1 || recs[0].Cluster.UUID != uuid || len(recs[0].NodeGroups) != 1 || recs[0].NodeGroups[0].NodeCount != 3 {
		t.Fatalf("cluster query: %+v", recs)
	}
	if _, err := h.luxiCOESubmit(ctx, rawArgs(t, map[string]any{"OP_ID": "OP_INSTANCE_STARTUP"})); err == nil {
		t.Fatal("COESubmit took a non-COE op")
	}
	if _, err := h.luxiCOEClusters(ctx, rawArgs(t, []string{"c2"})); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("unknown cluster: %v", err)
	}
}

func TestCOESubmitAnswersTheRefusal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	quota := ecode.New(ecode.PermissionDenied, ecode.NoRes, "Resource limit exceeded: You have reached the maximum clusters per project, 1.")
	d := reconcilerDaemon(t, Options{WatcherInterval: time.Hour}, func(context.Context) error { return quota })
	h := &luxiHandler{d: d}
	op := map[string]any{"OP_ID": "OP_COE_CLUSTER_CREATE", "name": "c1", "uuid": config.NewUUID(), "cluster_template": "t"}
	_, err := h.luxiCOESubmit(ctx, rawArgs(t, op))
	e, ok := ecode.As(err)
	if !ok || e.Kind != ecode.PermissionDenied || !strings.HasPrefix(e.Msg, "Resource limit exceeded") {
		t.Fatalf("refusal: %#v", err)
	}
}

type testSigner struct{ got string }

func (s *testSigner) SignCSR(_ context.Context, ca *config.COECertificate, csr string) (string, error) {
	if csr == "bad" {
		return "", ecode.Errorf(ecode.Inval, "The CSR is invalid.")
	}
	s.got = ca.Cluster + " " + csr
	return "SIGNED", nil
}

func TestCOECAAndSigning(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	d := reconcilerDaemon(t, Options{WatcherInterval: time.Hour}, succeed)
	h := &luxiHandler{d: d}
	uuid := config.NewUUID()
	putCOECluster(t, d, uuid, "c1")
	if _, err := h.luxiCOECA(ctx, rawArgs(t, "c1")); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("CA before there is one: %v", err)
	}
	if _, err := h.luxiCOESign(ctx, rawArgs(t, coewire.SignArgs{Cluster: "c1", CSR: "x"})); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("signing before there is a CA: %v", err)
	}
	tx := d.cfg.Begin()
	tx.PutCOECertificate(&config.COECertificate{Meta: config.Meta{UUID: config.NewUUID()}, Cluster: uuid, CertPEM: "CA-PEM", KeySealed: []byte("sealed")})
	if err := d.cfg.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	got, err := h.luxiCOECA(ctx, rawArgs(t, "c1"))
	if err != nil || got != (coewire.Certificate{ClusterUUID: uuid, PEM: "CA-PEM"}) {
		t.Fatalf("CA: %+v %v", got, err)
	}
	if _, err := h.luxiCOESign(ctx, rawArgs(t, coewire.SignArgs{Cluster: "c1", CSR: "x"})); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("signing without a signer: %v", err)
	}
	s := &testSigner{}
	d.opts.COESigner = s
	got, err = h.luxiCOESign(ctx, rawArgs(t, coewire.SignArgs{Cluster: "c1", CSR: "x"}))
	if err != nil || got != (coewire.Certificate{ClusterUUID: uuid, PEM: "SIGNED"}) || s.got != uuid+" x" {
		t.Fatalf("sign: %+v %v (signer got %q)", got, err, s.got)
	}
	if _, err := h.luxiCOESign(ctx, rawArgs(t, coewire.SignArgs{Cluster: "c1", CSR: "bad"})); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("bad CSR: %v", err)
	}
	svcs, err := h.luxiCOEServices(ctx, nil)
	if err != nil || len(svcs.([]coewire.Service)) != 1 || !svcs.([]coewire.Service)[0].Up {
		t.Fatalf("services: %+v %v", svcs, err)
	}
	if q, err := h.luxiCOEQuotas(ctx, nil); err != nil || q == nil {
		t.Fatalf("quotas: %v %v", q, err)
	}
}
