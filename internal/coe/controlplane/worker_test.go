package controlplane

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/k8sbin"
	"github.com/corral/corral/internal/ecode"
)

func testWorkerSpec(t *testing.T, base string, tools k8sbin.Tools) WorkerSpec {
	t.Helper()
	b, err := certs.NewBundle(certs.BundleSpec{ClusterName: "unit", APIAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	client, err := b.CA.IssueNode("c1-w-1")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := b.CA.IssueKubeletServing("c1-w-1", []net.IP{net.IPv4(127, 0, 0, 9)})
	if err != nil {
		t.Fatal(err)
	}
	id := WorkerID("u-1", "c1-w-1")
	return WorkerSpec{ClusterUUID: "u-1", ClusterName: "c1", NodeName: "c1-w-1",
		Dir: filepath.Join(base, "workers", id), SocketDir: filepath.Join(base, "s", id),
		Server: "https://127.0.0.1:6443", BindAddress: netip.MustParseAddr("127.0.0.9"), KubeletPort: 24001,
		PodSubnet: netip.MustParsePrefix("10.244.7.0/24"), Labels: map[string]string{"b.example/role": "worker", "a.example/group": "w"},
		CACert: b.CA.CertPEM(), Client: client, Serving: serving, Tools: tools, Host: DefaultWorkerHost()}
}

func TestNewWorkerDerivesContainerdAndKubelet(t *testing.T) {
	base := baseDir(t)
	spec := testWorkerSpec(t, base, fakeToolsDir(t, base))
	cp, err := NewWorker(spec)
	if err != nil {
		t.Fatal(err)
	}
	if cp.ID() != "u-1/c1-w-1" {
		t.Fatalf("id %q", cp.ID())
	}
	cs := cp.Components()
	if len(cs) != 2 || cs[0].Name != Containerd || cs[1].Name != Kubelet {
		t.Fatalf("components %+v", cs)
	}
	if cs[1].After != filepath.Join(spec.SocketDir, "containerd.sock") {
		t.Fatalf("the kubelet waits for %q, not containerd's socket", cs[1].After)
	}
	args := strings.Join(cs[1].Args, " ")
	for _, want := range []string{"--node-ip=127.0.0.9", "--hostname-override=c1-w-1", "--root-dir=" + spec.Dir + "/kubelet",
		"--node-labels=a.example/group=w,b.example/role=worker"} {
		if !strings.Contains(args, want) {
			t.Errorf("kubelet args %q lack %q", args, want)
		}
	}
	if b := cp.Bridge(); len(b) > 15 || !strings.HasPrefix(b, "ckb") {
		t.Fatalf("bridge name %q", b)
	}
}

func TestNewWorkerRefusesBadSpecs(t *testing.T) {
	base := baseDir(t)
	tools := fakeToolsDir(t, base)
	for name, change := range map[string]func(*WorkerSpec){
		"node name":      func(w *WorkerSpec) { w.NodeName = "Not_A_Name" },
		"relative dir":   func(w *WorkerSpec) { w.Dir = "workers/x" },
		"long sockets":   func(w *WorkerSpec) { w.SocketDir = "/" + strings.Repeat("s", 100) },
		"server":         func(w *WorkerSpec) { w.Server = "http://127.0.0.1:6443" },
		"port":           func(w *WorkerSpec) { w.KubeletPort = 70000 },
		"subnet":         func(w *WorkerSpec) { w.PodSubnet = netip.MustParsePrefix("10.0.0.0/30") },
		"ipv6 subnet":    func(w *WorkerSpec) { w.PodSubnet = netip.MustParsePrefix("fd00::/64") },
		"label with =":   func(w *WorkerSpec) { w.Labels = map[string]string{"a": "b=c"} },
		"label with ,":   func(w *WorkerSpec) { w.Labels = map[string]string{"a,b": "c"} },
		"no bind":        func(w *WorkerSpec) { w.BindAddress = netip.Addr{} },
		"cluster uuid":   func(w *WorkerSpec) { w.ClusterUUID = "../x" },
		"no tools found": func(w *WorkerSpec) { w.Tools = k8sbin.Tools{} },
	} {
		spec := testWorkerSpec(t, base, tools)
		change(&spec)
		if _, err := NewWorker(spec); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: %v, want an Inval error", name, err)
		}
	}
}

func TestWorkerConfigs(t *testing.T) {
	base := baseDir(t)
	cp, err := NewWorker(testWorkerSpec(t, base, fakeToolsDir(t, base)))
	if err != nil {
		t.Fatal(err)
	}
	dir := cp.Worker().Dir
	ctrd := cp.containerdConfig()
	for _, want := range []string{
		"restrict_oom_score_adj = true", // no CAP_SYS_RESOURCE needed
		"netns_mounts_under_state_dir = true",
		`Root = "` + dir + `/runc"`,
		`sandbox_image = "docker.io/corral/pause:1"`,
		`conf_dir = "` + dir + `/cni/net.d"`,
		`address = "` + cp.ContainerdSocket() + `"`,
	} {
		if !strings.Contains(ctrd, want) {
			t.Errorf("containerd config lacks %q:\n%s", want, ctrd)
		}
	}
	kl := cp.kubeletConfig()
	for _, want := range []string{`cgroupRoot: "` + cp.CgroupRoot() + `"`, "port: 24001", `address: "127.0.0.9"`,
		"makeIPTablesUtilChains: false", "readOnlyPort: 0", `podLogsDir: "` + dir + `/pod-logs"`} {
		if !strings.Contains(kl, want) {
			t.Errorf("kubelet config lacks %q:\n%s", want, kl)
		}
	}
	var cni struct {
		Plugins []struct {
			Type, Bridge string
			IPMasq       bool `json:"ipMasq"`
			IPAM         struct {
				DataDir string                `json:"dataDir"`
				Ranges  [][]map[string]string `json:"ranges"`
			}
		}
	}
	if err := json.Unmarshal([]byte(cp.cniConfig()), &cni); err != nil {
		t.Fatal(err)
	}
	br := cni.Plugins[0]
	if br.Type != "bridge" || br.Bridge != cp.Bridge() || br.IPMasq || br.IPAM.Ranges[0][0]["subnet"] != "10.244.7.0/24" ||
		!strings.HasPrefix(br.IPAM.DataDir, dir+"/") {
		t.Fatalf("CNI bridge %+v", br)
	}
}

// readTar reads a tar into a map of name to body.
func readTar(t *testing.T, b []byte) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	bodies, headers := map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return bodies, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		bodies[h.Name], headers[h.Name] = body, h
	}
}

func TestOCIImageArchiveIsAValidLayoutAndStable(t *testing.T) {
	img := ociImage{Ref: BusyboxImage, Cmd: []string{"sh"}, Busybox: []byte("not really busybox")}
	var a, b bytes.Buffer
	if err := img.writeArchive(&a); err != nil {
		t.Fatal(err)
	}
	if err := img.writeArchive(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two archives of the same image differ")
	}
	files, _ := readTar(t, a.Bytes())
	blob := func(digest string) []byte {
		t.Helper()
		body, ok := files["blobs/sha256/"+strings.TrimPrefix(digest, "sha256:")]
		sum := sha256.Sum256(body)
		if !ok || "sha256:"+hex.EncodeToString(sum[:]) != digest {
			t.Fatalf("blob %s missing or not matching its digest", digest)
		}
		return body
	}
	var index struct {
		Manifests []struct {
			Digest      string
			Annotations map[string]string
		}
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v %s", err, files["index.json"])
	}
	if n := index.Manifests[0].Annotations["io.containerd.image.name"]; n != "docker.io/corral/busybox:1" {
		t.Fatalf("image name %q", n)
	}
	var manifest struct {
		Config struct{ Digest string }
		Layers []struct{ Digest string }
	}
	if err := json.Unmarshal(blob(index.Manifests[0].Digest), &manifest); err != nil || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	var config struct {
		Rootfs struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(blob(manifest.Config.Digest), &config); err != nil {
		t.Fatal(err)
	}
	if config.Rootfs.DiffIDs[0] != manifest.Layers[0].Digest {
		t.Fatalf("the uncompressed layer's diff id %s is not its digest %s", config.Rootfs.DiffIDs[0], manifest.Layers[0].Digest)
	}
	layer, headers := readTar(t, blob(manifest.Layers[0].Digest))
	if string(layer["bin/busybox"]) != "not really busybox" || headers["bin/sh"].Linkname != "busybox" || headers["tmp/"].Mode != 0o1777 {
		t.Fatalf("layer: %v", headers)
	}
}

// escapeMount is how the kernel writes a path into mountinfo.
func escapeMount(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\\':
			sb.WriteString(`\` + string('0'+c>>6) + string('0'+(c>>3)&7) + string('0'+c&7))
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

func FuzzUnescapeMount(f *testing.F) {
	for _, s := range []string{"/a b", `/x\y`, "/tab\there", "/plain", `\`, `\04`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescapeMount(escapeMount(s)); got != s {
			t.Fatalf("unescape(escape(%q)) = %q", s, got)
		}
		_ = unescapeMount(s) // any input: no panic
	})
}

// TestCleanWorkerLeftoversRemovesWhatAWorkerLeaves: a worker whose
// processes are gone leaves a process in its cgroup, a mount under its
// directory, its bridge, a shim socket, CNI results and a log link; the
// clean-up removes every one.
func TestCleanWorkerLeftoversRemovesWhatAWorkerLeaves(t *testing.T) {
	requireRoot(t)
	host := DefaultWorkerHost()
	if mounts, _ := cgroupMounts(host.CgroupFS); len(mounts) == 0 {
		t.Skip("no cgroup hierarchy mounted")
	}
	base := baseDir(t)
	spec := testWorkerSpec(t, base, fakeToolsDir(t, base))
	spec.SocketDir = filepath.Join(WorkerSocketRoot, WorkerID(spec.ClusterUUID, spec.NodeName)) // where the clean-up looks
	cp, err := NewWorker(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(spec.Dir, "kubelet"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(spec.SocketDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Whatever the checks below say, nothing stays on the host.
	t.Cleanup(func() { _ = CleanWorkerLeftovers(spec.Dir, host, 5*time.Second) })
	if err := makeCgroup(host.CgroupFS, cp.CgroupRoot()); err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(host.CgroupFS, "pids", cp.CgroupRoot(), "kubepods")
	if err := os.MkdirAll(pod, 0o755); err != nil {
		t.Skipf("no pids hierarchy: %v", err)
	}
	sleeper := exec.Command("sleep", "300")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	go sleeper.Wait()
	if err := os.WriteFile(filepath.Join(pod, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(spec.Dir, "kubelet")
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "link", "add", cp.Bridge(), "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("ip link add: %v %s", err, out)
	}
	task := filepath.Join(spec.Dir, "containerd", "state", "io.containerd.runtime.v2.task", criNamespace, "t1")
	logs := filepath.Join(spec.Dir, "pod-logs", "p")
	for _, d := range []string{task, logs, shimSocketDir, cniResultsDir, "/var/log/containers"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	shim := cp.traces().shimSockets()[0]
	link := "/var/log/containers/unit-" + WorkerID(spec.ClusterUUID, spec.NodeName) + ".log"
	cached := filepath.Join(cniResultsDir, "corral-"+WorkerID(spec.ClusterUUID, spec.NodeName)+"-t1-eth0")
	loopback := filepath.Join(cniResultsDir, "cni-loopback-t1-lo")
	for _, f := range []string{shim, cached, loopback} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(logs, "0.log"), link); err != nil {
		t.Fatal(err)
	}

	if err := CleanWorkerLeftovers(spec.Dir, host, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(sleeper.Process.Pid, 0); err == nil {
		waitFor(t, 5*time.Second, "the pod's process to be gone", func() bool { return syscall.Kill(sleeper.Process.Pid, 0) != nil })
	}
	if m, _ := mountsUnder(spec.Dir); len(m) != 0 {
		t.Errorf("still mounted: %v", m)
	}
	left := slices.DeleteFunc([]string{filepath.Join(host.CgroupFS, "pids", cp.CgroupRoot()), "/sys/class/net/" + cp.Bridge(),
		shim, cached, loopback, link, spec.SocketDir}, func(p string) bool {
		_, err := os.Lstat(p)
		return err != nil
	})
	if len(left) != 0 {
		t.Errorf("left: %v", left)
	}
}
