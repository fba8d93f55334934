package e2e

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
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// TestCLIOverRAPI runs the corral binary against the dev cluster's
// corral-rapi only, with the --rapi flags filled from rapi.env: its
// environment points at no socket, so every command goes over HTTPS.
func TestCLIOverRAPI(t *testing.T) {
	requireRoot(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}})
	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatalf("rapi.env: %v", err)
	}
	dir := t.TempDir()
	pwFile, wrongPW, otherCA := filepath.Join(dir, "pw"), filepath.Join(dir, "wrong"), filepath.Join(dir, "other-ca.pem")
	for f, data := range map[string][]byte{pwFile: []byte(env.Password + "\n"), wrongPW: []byte("not-" + env.Password + "\n"), otherCA: unrelatedCAPEM(t)} {
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// No socket anywhere: the run directory is empty.
	procEnv := []string{"CORRAL_RUN_DIR=" + dir, "CORRAL_STATE_DIR=" + dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORRAL_") {
			procEnv = append(procEnv, kv)
		}
	}
	corral := func(pw, ca string, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		flags := []string{"--rapi", env.URL, "--rapi-user", env.User, "--rapi-password-file", pw, "--rapi-ca", ca}
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "corral"), append(flags, args...)...)
		cmd.Env = procEnv
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return string(out), 0
		case errors.As(err, &ee):
			return string(out), ee.ExitCode()
		}
		t.Fatalf("corral %v: %v", args, err)
		return "", -1
	}
	run := func(args ...string) string {
		t.Helper()
		out, code := corral(pwFile, env.CA, args...)
		if code != 0 {
			t.Fatalf("corral %v over RAPI: exit %d\n%s", args, code, out)
		}
		return out
	}
	ctx := context.Background()
	state := func(name string) []any {
		t.Helper()
		rows, err := c.luxi.QueryInstances(ctx, []string{name}, []string{"admin_state", "oper_state"}, false)
		if err != nil {
			t.Fatalf("LUXI query of %s: %v", name, err)
		}
		return rows[0]
	}

	name, err := c.luxi.QueryConfigValues(ctx, []string{"cluster_name"})
	if err != nil {
		t.Fatal(err)
	}
	if out := run("cluster", "info"); !strings.Contains(out, name[0].(string)) {
		t.Errorf("cluster info does not name the cluster %v:\n%s", name[0], out)
	}

	out := run("instance", "add", "-t", "file", "-o", "tiny+default", "-s", "64M", "-H", "fake", "-B", "memory=128", "--no-nics", "web1")
	if !regexp.MustCompile(`(?m)^\w{3} \w{3} +\d+ [\d:]+ \d{4} .+`).MatchString(out) {
		t.Errorf("instance add did not follow the job's log:\n%s", out)
	}
	if st := state("web1"); st[0] != "up" || st[1] != true {
		t.Fatalf("after instance add: %v", st)
	}
	if out := run("instance", "list", "--no-headers", "-o", "name,status"); !regexp.MustCompile(`(?m)^web1 +running$`).MatchString(out) {
		t.Errorf("instance list:\n%s", out)
	}
	run("instance", "shutdown", "web1")
	if st := state("web1"); st[0] != "down" || st[1] != false {
		t.Fatalf("after shutdown: %v", st)
	}
	run("instance", "startup", "web1")
	if st := state("web1"); st[0] != "up" || st[1] != true {
		t.Fatalf("after startup: %v", st)
	}

	if out := run("instance", "info", "web1"); !strings.Contains(out, "web1") || !strings.Contains(out, "tiny+default") {
		t.Errorf("instance info:\n%s", out)
	}
	nodes, err := c.luxi.QueryNodes(ctx, nil, []string{"name"}, false)
	if err != nil || len(nodes) == 0 {
		t.Fatalf("nodes %v, %v", nodes, err)
	}
	if out := run("node", "list", "--no-headers", "-o", "name"); !strings.Contains(out, nodes[0][0].(string)) {
		t.Errorf("node list does not show %v:\n%s", nodes[0][0], out)
	}

	jobs, err := c.luxi.QueryJobs(ctx, nil, []string{"id", "summary"})
	if err != nil {
		t.Fatal(err)
	}
	var createID string
	for _, j := range jobs {
		if s, _ := j[1].([]any); len(s) == 1 && strings.HasPrefix(s[0].(string), "INSTANCE_CREATE") {
			id, _ := j[0].(float64)
			createID = strconv.FormatInt(int64(id), 10)
		}
	}
	if createID == "" {
		t.Fatalf("no create job among %v", jobs)
	}
	if out := run("job", "list", "--no-headers"); !regexp.MustCompile(`(?m)^ *` + createID + ` +success +INSTANCE_CREATE`).MatchString(out) {
		t.Errorf("job list does not show job %s:\n%s", createID, out)
	}
	if out := run("job", "info", createID); !strings.Contains(out, "OP_INSTANCE_CREATE") || !strings.Contains(out, "success") {
		t.Errorf("job info %s:\n%s", createID, out)
	}

	// Refusals change nothing.
	if out, code := corral(wrongPW, env.CA, "instance", "shutdown", "web1"); code != 7 || !strings.Contains(out, "refused the credentials") {
		t.Errorf("wrong password: exit %d\n%s", code, out)
	}
	if out, code := corral(pwFile, otherCA, "instance", "list"); code != 7 || !strings.Contains(out, "certificate signed by unknown authority") {
		t.Errorf("CA that did not sign the server's certificate: exit %d\n%s", code, out)
	}
	if out, code := corral(pwFile, env.CA, "cluster", "queue", "drain"); code != 7 || !strings.Contains(out, "not available over RAPI") {
		t.Errorf("queue drain over RAPI: exit %d\n%s", code, out)
	}
	if st := state("web1"); st[0] != "up" {
		t.Fatalf("a refused shutdown changed the instance: %v", st)
	}

	run("instance", "remove", "-f", "web1")
	if rows, err := c.luxi.QueryInstances(ctx, nil, []string{"name"}, false); err != nil || len(rows) != 0 {
		t.Fatalf("after remove: %v, %v", rows, err)
	}
}

// unrelatedCAPEM is a CA certificate that signed nothing the cluster uses.
func unrelatedCAPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "unrelated CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
