package controlplane

import (
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/k8sbin"
)

// The test binary doubles as every component: copied into a tools
// directory under the components' names, it listens where the real one
// would (so that what waits for it can start) and runs until a signal.
func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case Etcd, APIServer, ControllerManager, Scheduler, Kwok:
		fakeComponent(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

func fakeComponent(args []string) {
	flags := map[string]string{}
	for _, a := range args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		flags[k] = v
	}
	var addrs []string
	for _, k := range []string{"listen-client-urls", "listen-peer-urls"} {
		if u := flags[k]; u != "" {
			addrs = append(addrs, strings.TrimPrefix(u, "https://"))
		}
	}
	if p := flags["secure-port"]; p != "" && p != "0" {
		addrs = append(addrs, net.JoinHostPort(flags["bind-address"], p))
	}
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			os.Stderr.WriteString("fake component: " + err.Error() + "\n")
			os.Exit(3)
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
	os.Exit(0)
}

// testUID is a uid no user has, of this test process alone.
func testUID() int { return 61000 + os.Getpid()%1000 }

// baseDir is a directory the test uid can enter, removed at the end.
func baseDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "coe-cp-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// fakeToolsDir makes a tools directory of the test binary's copies.
func fakeToolsDir(t *testing.T, base string) k8sbin.Tools {
	t.Helper()
	dir := filepath.Join(base, "tools")
	if err := os.MkdirAll(filepath.Join(dir, k8sbin.StagesDir), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, string(k8sbin.Etcd))
	copyFile(t, self, first)
	for _, n := range k8sbin.All[1:] {
		if err := os.Link(first, filepath.Join(dir, string(n))); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range k8sbin.KwokStages {
		body := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: " + strings.TrimSuffix(s, ".yaml") + "\n"
		if err := os.WriteFile(filepath.Join(dir, k8sbin.StagesDir, s), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tools, err := k8sbin.Locate(dir, k8sbin.All...)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// freePorts returns n ports nothing listens on right now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

var loopbackBundle = sync.OnceValues(func() (*certs.Bundle, error) {
	return certs.NewBundle(certs.BundleSpec{ClusterName: "unit", APIAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, Nodes: []string{"n1"}})
})

// testSpec is a loopback cluster in base with fresh ports.
func testSpec(t *testing.T, base, uuid string, tools k8sbin.Tools) Spec {
	t.Helper()
	b, err := loopbackBundle()
	if err != nil {
		t.Fatal(err)
	}
	p := freePorts(t, 4)
	return Spec{
		ClusterUUID:    uuid,
		ClusterName:    "name-" + uuid,
		Dir:            filepath.Join(base, uuid),
		UID:            testUID(),
		GID:            testUID(),
		BindAddress:    netip.MustParseAddr("127.0.0.1"),
		APIServerPort:  p[0],
		EtcdClientPort: p[1],
		EtcdPeerPort:   p[2],
		KwokPort:       p[3],
		Certs:          b,
		Tools:          tools,
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("starting processes as another user needs root")
	}
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// procOwner is the uid a process runs as, -1 when it is gone.
func procOwner(pid int) int {
	_, uid, err := readProc(pid)
	if err != nil {
		return -1
	}
	return uid
}

// listening reports whether something accepts connections on port.
func listening(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
