package poolfw

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/uidpool"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]string{"": ModeNone, "none": ModeNone, "nftables": ModeNftables} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"iptables", "NFTABLES", " none"} {
		if _, err := ParseMode(bad); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("ParseMode(%q): %v", bad, err)
		}
	}
}

func TestMerge(t *testing.T) {
	r := func(lo, hi uint32) uidpool.Range { return uidpool.Range{lo, hi} }
	tests := []struct {
		in, want uidpool.Pool
	}{
		{nil, nil},
		{uidpool.Pool{r(5, 5)}, uidpool.Pool{r(5, 5)}},
		{uidpool.Pool{r(3000, 3000), r(2000, 2099)}, uidpool.Pool{r(2000, 2099), r(3000, 3000)}},
		{uidpool.Pool{r(2000, 2099), r(2050, 2200)}, uidpool.Pool{r(2000, 2200)}},
		{uidpool.Pool{r(2000, 2099), r(2100, 2100)}, uidpool.Pool{r(2000, 2100)}},
		{uidpool.Pool{r(2000, 2099), r(2010, 2020)}, uidpool.Pool{r(2000, 2099)}},
		{uidpool.Pool{r(9, 1)}, nil},
		{uidpool.Pool{r(1<<32-2, 1<<32-1), r(0, 1<<32-3)}, uidpool.Pool{r(0, 1<<32-1)}},
	}
	for _, tc := range tests {
		got := Merge(tc.in)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Merge(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzMerge(f *testing.F) {
	f.Add(uint32(2000), uint32(2099), uint32(2050), uint32(3000))
	f.Add(uint32(0), uint32(0), uint32(1), uint32(1))
	f.Add(uint32(1<<32-1), uint32(1<<32-1), uint32(0), uint32(1<<32-1))
	f.Fuzz(func(t *testing.T, a, b, c, d uint32) {
		in := uidpool.Pool{{a, b}, {c, d}}
		out := Merge(in)
		covered := func(p uidpool.Pool, u uint32) bool {
			for _, r := range p {
				if r.Low() <= u && u <= r.High() {
					return true
				}
			}
			return false
		}
		for _, u := range []uint32{a, b, c, d, a + 1, b + 1, c - 1, d - 1} {
			if covered(in, u) != covered(out, u) {
				t.Fatalf("Merge(%v) = %v changes whether %d is covered", in, out, u)
			}
		}
		for i, r := range out {
			if r.Low() > r.High() {
				t.Fatalf("empty range in %v", out)
			}
			if i > 0 && uint64(out[i-1].High())+1 >= uint64(r.Low()) {
				t.Fatalf("ranges not disjoint and apart: %v", out)
			}
		}
	})
}

func TestScript(t *testing.T) {
	got := Script(uidpool.Pool{{3000, 3000}, {2000, 2099}, {2100, 2100}})
	want := `table inet corral {
	chain output {
		type filter hook output priority filter; policy accept;
	}
}
flush chain inet corral output
add rule inet corral output meta skuid { 2000-2100, 3000 } ct state established,related accept
add rule inet corral output meta skuid { 2000-2100, 3000 } counter drop
`
	if got != want {
		t.Errorf("Script =\n%s\nwant\n%s", got, want)
	}
	if s := Script(nil); strings.Contains(s, "add rule") || !strings.Contains(s, "flush chain inet corral output") {
		t.Errorf("Script(nil) =\n%s", s)
	}
}

func TestCheckWithoutNft(t *testing.T) {
	err := Nft{NftBinary: "/nonexistent/nft"}.Check(context.Background())
	if ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), "not installed") {
		t.Fatalf("Check without nft: %v", err)
	}
}

// netns makes a network namespace with lo up, or skips the test when this
// process may not or nft is missing.
func netns(t *testing.T) Nft {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and nftables")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed", bin)
		}
	}
	name := fmt.Sprintf("crlfw%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	n := Nft{Netns: name}
	if err := n.Check(context.Background()); err != nil {
		t.Skipf("nft does not work here: %v", err)
	}
	return n
}

// inNetns runs f on a thread of its own that has entered the namespace; the
// thread is thrown away afterwards, since f may change its fsuid.
func inNetns(t *testing.T, name string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- err
			return
		}
		done <- f()
	}()
	return <-done
}

// sendUDP sends one datagram to a listener in the namespace from a socket
// created under uid (the socket's owner is the creating thread's fsuid).
func sendUDP(uid int) error {
	ln, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := unix.Setfsuid(uid); err != nil {
		return err
	}
	c, err := net.Dial("udp4", ln.LocalAddr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte("x"))
	return err
}

// serveTCP listens under uid and has a root client fetch a greeting: the
// pool uid only answers a connection made to it.
func serveTCP(uid int) error {
	if err := unix.Setfsuid(uid); err != nil {
		return err
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := unix.Setfsuid(0); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		_, err = c.Write([]byte("hello"))
		errc <- err
	}()
	c, err := net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(got) != "hello" {
		return fmt.Errorf("read %q", got)
	}
	return <-errc
}

func TestNftInNetns(t *testing.T) {
	n := netns(t)
	ctx := context.Background()
	if s, err := n.List(ctx); err != nil || s != "" {
		t.Fatalf("List before Ensure = %q, %v", s, err)
	}
	pool := uidpool.Pool{{2000, 2099}, {3000, 3000}}
	for range 2 { // twice: Ensure is idempotent
		if err := n.Ensure(ctx, pool); err != nil {
			t.Fatal(err)
		}
	}
	s, err := n.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Count(s, "meta skuid { 2000-2099, 3000 }"); c != 2 {
		t.Fatalf("chain has %d rules for the pool, want 2:\n%s", c, s)
	}

	for _, tc := range []struct {
		uid     int
		blocked bool
	}{{2000, true}, {2099, true}, {3000, true}, {1999, false}, {2100, false}, {0, false}} {
		err := inNetns(t, n.Netns, func() error { return sendUDP(tc.uid) })
		if tc.blocked && !errors.Is(err, syscall.EPERM) {
			t.Errorf("uid %d sent a datagram: %v, want EPERM", tc.uid, err)
		}
		if !tc.blocked && err != nil {
			t.Errorf("uid %d could not send: %v", tc.uid, err)
		}
	}
	if err := inNetns(t, n.Netns, func() error { return serveTCP(2050) }); err != nil {
		t.Errorf("a pool uid could not answer a connection made to it: %v", err)
	}

	// A smaller pool replaces the rules; an empty one lifts them.
	if err := n.Ensure(ctx, uidpool.Pool{{3000, 3000}}); err != nil {
		t.Fatal(err)
	}
	if err := inNetns(t, n.Netns, func() error { return sendUDP(2000) }); err != nil {
		t.Errorf("uid 2000 still blocked after it left the pool: %v", err)
	}
	if err := inNetns(t, n.Netns, func() error { return sendUDP(3000) }); !errors.Is(err, syscall.EPERM) {
		t.Errorf("uid 3000 not blocked: %v", err)
	}
	if err := n.Ensure(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if s, _ := n.List(ctx); strings.Contains(s, "skuid") {
		t.Fatalf("rules left after an empty pool:\n%s", s)
	}

	for range 2 {
		if err := n.Remove(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := n.List(ctx); err != nil || s != "" {
		t.Fatalf("List after Remove = %q, %v", s, err)
	}
}
