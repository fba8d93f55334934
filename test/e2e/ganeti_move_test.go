package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// A real Ganeti 3.0 next to a dev cluster: instances move from Ganeti to
// Corral and back with Ganeti's own move-instance, and with Corral's
// `corral instance move`, and their disks arrive byte for byte. The Ganeti
// cluster runs at Ganeti's fixed paths (/var/lib/ganeti, its ports 1811,
// 1814, 5080 and 80), so only one such test may run on a machine at a
// time.

const (
	ganetiTools     = "/usr/lib/ganeti/tools/move-instance"
	ganetiSecret    = "/var/lib/ganeti/cluster-domain-secret"
	ganetiRAPICert  = "/var/lib/ganeti/rapi.pem"
	ganetiConfig    = "/var/lib/ganeti/config.data"
	ganetiFileDir   = "/srv/ganeti/file-storage"
	ganetiRAPIUser  = "corral-e2e"
	ganetiRAPIPass  = "corral-e2e-mover"
	ganetiMoveOS    = "rawcopy"
	ganetiDiskMiB   = 32
	ganetiScriptDir = "testdata/ganeti"
)

// rawcopyOS is the OS definition start-ganeti.sh installs on the Ganeti
// side, for the dev cluster: export and import copy the disk's bytes.
var rawcopyOS = map[string]string{
	"ganeti_api_version": "20\n",
	"parameters.list":    "",
	"create":             "#!/bin/sh\nexit 0\n",
	"rename":             "#!/bin/sh\nexit 0\n",
	"verify":             "#!/bin/sh\nexit 0\n",
	"export":             "#!/bin/sh\nset -e\nexec dd if=\"$EXPORT_DEVICE\" bs=1M status=none\n",
	"import":             "#!/bin/sh\nset -e\nexec dd of=\"$IMPORT_DEVICE\" bs=1M conv=notrunc status=none\n",
}

// requireRealGaneti skips without the packages a real Ganeti cluster needs, or fails when
// CORRAL_REQUIRE_GANETI=1 (CI installs them).
func requireRealGaneti(t *testing.T) {
	t.Helper()
	requireRoot(t)
	var missing []string
	for _, p := range []string{"/usr/sbin/gnt-cluster", "/usr/lib/ganeti/daemon-util", ganetiTools, "/usr/bin/socat", "/usr/sbin/sshd", "/usr/bin/fping"} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CORRAL_REQUIRE_GANETI") == "1" {
		t.Fatalf("Ganeti 3.0 is required (scripts/install-deps.sh installs it); missing: %s", strings.Join(missing, ", "))
	}
	t.Skipf("Ganeti 3.0 is not installed (missing %s)", strings.Join(missing, ", "))
}

// realGaneti is the Ganeti cluster start-ganeti.sh runs.
type realGaneti struct {
	t *testing.T
}

func ganetiScript(name string) string {
	return filepath.Join(repoDir, "test", "e2e", ganetiScriptDir, name)
}

// startGaneti runs start-ganeti.sh and stops Ganeti's daemons at the end
// of the test, unless they were running before it; a cluster the test
// initialised is destroyed again.
func startGaneti(t *testing.T) *realGaneti {
	t.Helper()
	_, statErr := os.Stat(ganetiConfig)
	fresh := os.IsNotExist(statErr)
	wasRunning := exec.Command("/usr/lib/ganeti/daemon-util", "check", "ganeti-noded").Run() == nil
	t.Cleanup(func() {
		if wasRunning {
			return
		}
		args := []string{}
		if fresh {
			args = append(args, "--purge")
		}
		out, err := exec.Command(ganetiScript("stop-ganeti.sh"), args...).CombinedOutput()
		if err != nil {
			t.Errorf("stop-ganeti.sh: %v\n%s", err, out)
		}
	})
	cmd := exec.Command(ganetiScript("start-ganeti.sh"))
	cmd.Env = append(os.Environ(), "GANETI_RAPI_USER="+ganetiRAPIUser, "GANETI_RAPI_PASSWORD="+ganetiRAPIPass)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("start-ganeti.sh: %v\n%s", err, out)
	}
	t.Logf("Ganeti started in %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	return &realGaneti{t: t}
}

// gnt runs a Ganeti command.
func (g *realGaneti) gnt(args ...string) string {
	g.t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// diskFile is the one file disk of a Ganeti instance.
func (g *realGaneti) diskFile(name string) string {
	g.t.Helper()
	files, _ := filepath.Glob(filepath.Join(ganetiFileDir, name, "*.file.disk0"))
	if len(files) != 1 {
		g.t.Fatalf("Ganeti instance %s has disk files %v", name, files)
	}
	return files[0]
}

func (g *realGaneti) hasInstance(name string) bool {
	g.t.Helper()
	out := g.gnt("gnt-instance", "list", "--no-headers", "-o", "name")
	for _, l := range strings.Fields(out) {
		if l == name {
			return true
		}
	}
	return false
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func fillFileRandom(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(w, h), rand.Reader, fi.Size()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// rawcopyOSDir writes the rawcopy OS definition for the dev cluster.
func rawcopyOSDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	osDir := filepath.Join(dir, ganetiMoveOS)
	if err := os.MkdirAll(osDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, osDir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, body := range rawcopyOS {
		mode := os.FileMode(0o644)
		if strings.HasPrefix(body, "#!") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(osDir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// moveInstanceArgs are Ganeti's move-instance options between the real
// Ganeti ("ganeti") and the dev cluster ("corral"), in the given
// direction. --opportunistic-tries is given because 3.0.2's tool compares
// its unset default with a number under Python 3.
func moveInstanceArgs(t *testing.T, c *cluster, from, to string) []string {
	t.Helper()
	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gpw, cpw := filepath.Join(dir, "ganeti-password"), filepath.Join(dir, "corral-password")
	if err := os.WriteFile(gpw, []byte(ganetiRAPIPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cpw, []byte(env.Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	corralHost, corralPort, _ := strings.Cut(strings.TrimPrefix(env.URL, "https://"), ":")
	side := map[string][]string{
		"ganeti": {"ca-file", ganetiRAPICert, "username", ganetiRAPIUser, "password-file", gpw, "rapi-port", "5080"},
		"corral": {"ca-file", env.CA, "username", env.User, "password-file", cpw, "rapi-port", corralPort},
	}
	host := map[string]string{"ganeti": "127.0.0.1", "corral": corralHost}
	args := []string{"-v", "--opportunistic-tries=0"}
	for _, p := range []struct{ prefix, who string }{{"src", from}, {"dest", to}} {
		kv := side[p.who]
		for i := 0; i < len(kv); i += 2 {
			args = append(args, fmt.Sprintf("--%s-%s=%s", p.prefix, kv[i], kv[i+1]))
		}
	}
	return append(args, host[from], host[to])
}

// runMoveInstance runs Ganeti's move-instance and returns its output and
// wall time.
func runMoveInstance(t *testing.T, args ...string) (string, time.Duration) {
	t.Helper()
	cmd := exec.Command(ganetiTools, args...)
	cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil || !strings.Contains(string(out), ": Success") {
		t.Fatalf("move-instance %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	checkGanetiStream(t, string(out))
	return string(out), d
}

// TestGanetiMoveRoundTrip moves an instance with a 32 MiB disk of random
// bytes from a real Ganeti 3.0 to a dev cluster and back with Ganeti's
// move-instance, then again with corral instance move: Ganeti's socat
// streams meet Corral's Ganeti stream mode in both directions, and the
// disk arrives intact each time.
func TestGanetiMoveRoundTrip(t *testing.T) {
	requireRealGaneti(t)
	g := startGaneti(t)
	c := newCluster(t, clusterOpts{nodes: 0, hypervisors: []string{"fake"}, osDir: rawcopyOSDir(t)})
	if out, err := c.corral("cluster", "renew-crypto", "--cluster-domain-secret", ganetiSecret, "--force"); err != nil {
		t.Fatalf("renew-crypto: %v\n%s", err, out)
	}

	// A name start-ganeti.sh made resolvable: a Ganeti destination checks.
	name := "inst1.ganeti.test"
	if g.hasInstance(name) {
		// Left by a run of this test that was killed before its clean-up.
		t.Logf("removing %s, left on Ganeti by an earlier run", name)
		g.gnt("gnt-instance", "remove", "--force", "--ignore-failures", name)
	}
	g.gnt("gnt-instance", "add", "-t", "file", "-s", fmt.Sprintf("%dM", ganetiDiskMiB), "-o", ganetiMoveOS,
		"-n", ganetiNodeName(t), "--no-ip-check", "--no-nics", "--no-start", name)
	t.Cleanup(func() {
		cmd := exec.Command("gnt-instance", "remove", "--force", "--ignore-failures", name)
		cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
		_ = cmd.Run()
	})
	want := fillFileRandom(t, g.diskFile(name))

	// Ganeti -> Corral, with gzip on the way.
	out, d := runMoveInstance(t, append([]string{"--compress=gzip", "--dest-primary-node=node1"},
		append(moveInstanceArgs(t, c, "ganeti", "corral"), name)...)...)
	t.Logf("Ganeti -> Corral in %s:\n%s", d.Round(time.Millisecond), out)
	if got := c.diskSums("node1", name); len(got) != 1 || got[0] != want {
		t.Fatalf("the disk on Corral has sums %v, want %s", got, want)
	}
	if g.hasInstance(name) {
		t.Fatalf("%s is still on Ganeti after the move", name)
	}

	// Corral -> Ganeti, uncompressed.
	out, d = runMoveInstance(t, append([]string{"--dest-primary-node=" + ganetiNodeName(t)},
		append(moveInstanceArgs(t, c, "corral", "ganeti"), name)...)...)
	t.Logf("Corral -> Ganeti in %s:\n%s", d.Round(time.Millisecond), out)
	if got := fileSum(t, g.diskFile(name)); got != want {
		t.Fatalf("the disk back on Ganeti has sum %s, want %s", got, want)
	}
	if rows, _ := c.luxi.QueryInstances(t.Context(), []string{name}, []string{"name"}, false); len(rows) != 0 {
		t.Fatalf("%s is still on Corral after the move back: %v", name, rows)
	}

	// The same round trip with Corral's own move tool: it reaches
	// Ganeti's RAPI with Ganeti's certificate as the CA file.
	for _, hop := range []struct{ from, to, node, compress string }{
		{"ganeti", "corral", "node1", "gzip-fast"},
		{"corral", "ganeti", ganetiNodeName(t), "none"},
	} {
		args := []string{"instance", "move", "--compress", hop.compress, "--dest-primary-node", hop.node}
		args = append(append(args, corralMoveArgs(t, c, hop.from, hop.to)...), name)
		start := time.Now()
		out, err := c.corral(args...)
		if err != nil {
			t.Fatalf("corral instance move %s -> %s: %v\n%s", hop.from, hop.to, err, out)
		}
		checkGanetiStream(t, out)
		t.Logf("corral instance move %s -> %s in %s:\n%s", hop.from, hop.to, time.Since(start).Round(time.Millisecond), out)
		var got string
		if hop.to == "corral" {
			sums := c.diskSums("node1", name)
			if len(sums) == 1 {
				got = sums[0]
			}
		} else {
			got = fileSum(t, g.diskFile(name))
		}
		if got != want {
			t.Fatalf("after corral instance move to %s the disk has sum %q, want %s", hop.to, got, want)
		}
	}
}

// corralMoveArgs turns move-instance's options into corral instance
// move's: the same flags, with https:// URLs for the clusters.
func corralMoveArgs(t *testing.T, c *cluster, from, to string) []string {
	t.Helper()
	in := moveInstanceArgs(t, c, from, to)
	var out []string
	for _, a := range in[:len(in)-2] {
		if a == "-v" || strings.HasPrefix(a, "--opportunistic-tries") || strings.Contains(a, "-rapi-port=") {
			continue
		}
		out = append(out, a)
	}
	url := func(who string) string {
		if who == "ganeti" {
			return "https://127.0.0.1:5080"
		}
		return rapiURL(t, c)
	}
	return append(out, url(from), url(to))
}

// ganetiNodeName is the Ganeti node's name (the master).
func ganetiNodeName(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("gnt-cluster", "getmaster")
	cmd.Env = append(os.Environ(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("gnt-cluster getmaster: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// checkGanetiStream wants Corral's side of a move with Ganeti to have
// logged that the disks travel in Ganeti's stream.
func checkGanetiStream(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "in Ganeti's stream") {
		t.Errorf("Corral's job log does not say the disks travel in Ganeti's stream:\n%s", out)
	}
}
