package rapiclient

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

func TestNewChecksConfig(t *testing.T) {
	s := newTestServer(t)
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"http", Config{URL: "http://127.0.0.1:5080", CAPEM: s.caPEM}},
		{"no host", Config{URL: "https://", CAPEM: s.caPEM}},
		{"credentials in URL", Config{URL: "https://u:p@127.0.0.1:5080", CAPEM: s.caPEM}},
		{"no CA", Config{URL: "https://127.0.0.1:5080"}},
		{"CA not PEM", Config{URL: "https://127.0.0.1:5080", CAPEM: []byte("junk")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("New(%+v): %v, want an invalid-input error", tc.cfg, err)
			}
		})
	}
}

func TestLuxiOverRAPI(t *testing.T) {
	s := newTestServer(t)
	c := s.luxi(t, "admin", "secret")
	ctx := context.Background()

	info, err := c.QueryClusterInfo(ctx)
	if err != nil || info["name"] != "cl.example.com" {
		t.Fatalf("QueryClusterInfo: %v, %v", info, err)
	}
	vals, err := c.QueryConfigValues(ctx, []string{"cluster_name", "master_node"})
	if err != nil || !slices.Equal(vals, []any{"cl.example.com", "node1"}) {
		t.Fatalf("QueryConfigValues: %v, %v", vals, err)
	}

	rows, err := c.QueryInstances(ctx, nil, []string{"status", "name"}, false)
	if err != nil || len(rows) != 2 || rows[0][1] != "web1" || rows[0][0] != "running" || rows[1][1] != "web2" {
		t.Fatalf("QueryInstances(all): %v, %v", rows, err)
	}
	rows, err = c.QueryInstances(ctx, []string{"web2", "web1"}, []string{"status"}, false)
	if err != nil || len(rows) != 2 || rows[0][0] != "ADMIN_down" || rows[1][0] != "running" {
		t.Fatalf("QueryInstances(web2, web1) must keep the order asked: %v, %v", rows, err)
	}
	if _, err := c.QueryInstances(ctx, []string{"nope"}, []string{"name"}, false); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("QueryInstances(nope): %v, want unknown entity", err)
	}
	qr, err := c.Query(ctx, "instance", []string{"name"}, []any{"|", []any{"=", "name", "web2"}})
	if err != nil || len(qr.Data) != 1 || qr.Data[0][0][1] != "web2" {
		t.Fatalf("Query: %+v, %v", qr, err)
	}
	qf, err := c.QueryFields(ctx, "instance", []string{"name", "status"})
	if err != nil || len(qf.Fields) != 2 || qf.Fields[1].Title != "instance:status" {
		t.Fatalf("QueryFields: %+v, %v", qf, err)
	}
	tags, err := c.QueryTags(ctx, "instance", "web1")
	if err != nil || !slices.Equal(tags, []string{"a", "b"}) {
		t.Fatalf("QueryTags: %v, %v", tags, err)
	}

	// A job: submitted, followed with its log, read back.
	id, err := c.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1", "timeout": 30}})
	if err != nil {
		t.Fatal(err)
	}
	op := s.be.lastOps()[0].(map[string]any)
	if op["OP_ID"] != "OP_INSTANCE_SHUTDOWN" || op["instance_name"] != "web1" || op["timeout"] != 30.0 || op["reason"] == nil {
		t.Errorf("corrald got %v", op)
	}
	var logs []string
	status, res, err := luxi.WaitForJob(ctx, c, id, func(e []any) { logs = append(logs, e[3].(string)) })
	if err != nil || status != "success" || !slices.Equal(res, []any{"done"}) || !slices.Equal(logs, []string{"did OP_INSTANCE_SHUTDOWN"}) {
		t.Fatalf("WaitForJob: %s %v %v, log %v", status, res, err, logs)
	}
	jobs, err := c.QueryJobs(ctx, []int64{id, 999}, []string{"id", "status"})
	if err != nil || len(jobs) != 2 || jobs[0][0] != float64(id) || jobs[0][1] != "success" || jobs[1] != nil {
		t.Fatalf("QueryJobs(id, unknown): %v, %v", jobs, err)
	}
	jobs, err = c.QueryJobs(ctx, nil, []string{"status", "id"})
	if err != nil || len(jobs) != 2 || jobs[0][1] != 5.0 || jobs[0][0] != "queued" || jobs[1][1] != float64(id) {
		t.Fatalf("QueryJobs(all, bulk fields): %v, %v", jobs, err)
	}
	// priority is no field of /2/jobs/[id]: the job query answers it.
	jobs, err = c.QueryJobs(ctx, nil, []string{"id", "priority"})
	if err != nil || len(jobs) != 2 || jobs[0][0] != 5.0 || jobs[1][0] != float64(id) || jobs[1][1] != 0.0 {
		t.Fatalf("QueryJobs(all): %v, %v", jobs, err)
	}
	ok, msg, err := c.CancelJob(ctx, id, false)
	if err != nil || ok || msg != "Job already finished" {
		t.Fatalf("CancelJob: %v %q %v", ok, msg, err)
	}
	if ch, err := c.WaitForJobChange(ctx, 5, []string{"status"}, []any{"queued"}, nil, 5); err != nil || !ch.NoChange {
		t.Fatalf("WaitForJobChange(queued job, unchanged): %+v, %v; want no change", ch, err)
	}
	if _, err := c.WaitForJobChange(ctx, 999, []string{"status"}, nil, nil, 5); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("WaitForJobChange(unknown): %v", err)
	}

	// What RAPI has no resource for says so, and changes nothing.
	before := len(s.be.submitted)
	for name, call := range map[string]func() error{
		"SetDrainFlag":      func() error { return c.SetDrainFlag(ctx, true) },
		"QueryConfigValues": func() error { _, err := c.QueryConfigValues(ctx, []string{"drain_flag"}); return err },
		"ArchiveJob":        func() error { _, err := c.ArchiveJob(ctx, id); return err },
		"CancelJob kill":    func() error { _, _, err := c.CancelJob(ctx, id, true); return err },
		"two opcodes": func() error {
			_, err := c.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_TEST_DELAY"}, map[string]any{"OP_ID": "OP_TEST_DELAY"}})
			return err
		},
		"no route": func() error {
			_, err := c.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_CLUSTER_VERIFY"}})
			return err
		},
		"startup override": func() error {
			_, err := c.SubmitJob(ctx, []any{map[string]any{"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1", "beparams": map[string]any{"maxmem": 256}}})
			return err
		},
	} {
		err := call()
		e, isE := ecode.As(err)
		if !isE || e.Class != ecode.Environ || !strings.Contains(e.Msg, "not available over RAPI; run it on the master") {
			t.Errorf("%s: %v, want an environment error saying to run it on the master", name, err)
		}
	}
	if len(s.be.submitted) != before {
		t.Errorf("refused calls submitted %d jobs", len(s.be.submitted)-before)
	}
}

func TestAuthAndTLSFailures(t *testing.T) {
	s := newTestServer(t)
	ctx := context.Background()
	shutdown := []any{map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"}}

	_, err := s.luxi(t, "admin", "wrong").QueryClusterInfo(ctx)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.PermissionDenied || e.Class != ecode.Environ ||
		!strings.Contains(e.Msg, `user "admin" or its password is not accepted`) {
		t.Errorf("wrong password: %#v", err)
	}
	_, err = s.luxi(t, "viewer", "look").SubmitJob(ctx, shutdown)
	if e, ok := ecode.As(err); !ok || e.Kind != ecode.PermissionDenied || !strings.Contains(e.Msg, "write option") {
		t.Errorf("read user writing: %#v", err)
	}
	if rows, err := s.luxi(t, "viewer", "look").QueryInstances(ctx, []string{"web1"}, []string{"name"}, false); err != nil || len(rows) != 1 {
		t.Errorf("read user reading: %v, %v", rows, err)
	}
	if len(s.be.submitted) != 0 {
		t.Errorf("denied requests submitted %v", s.be.submitted)
	}

	// A CA that did not sign the server's certificate.
	other := selfSignedPEM(t)
	c, err := New(Config{URL: s.srv.URL, User: "admin", Password: "secret", CAPEM: other})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Do(ctx, "GET", "/version", nil, nil, nil)
	var te *TransportError
	var ue x509.UnknownAuthorityError
	if !errors.As(err, &te) || !errors.As(err, &ue) || !strings.Contains(err.Error(), s.srv.URL) {
		t.Errorf("foreign CA: %v, want a transport error of unknown authority naming the server", err)
	}
}

func TestRequestTimeout(t *testing.T) {
	s := newTestServer(t)
	c, err := New(Config{URL: s.srv.URL, CAPEM: s.caPEM, RequestTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Do(context.Background(), "GET", "/version", nil, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("1ns timeout: %v, want DeadlineExceeded", err)
	}
}

// selfSignedPEM makes an unrelated CA certificate.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
