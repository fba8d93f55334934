package bmc

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeSerial listens where qemu's serial socket would and echoes each line
// back prefixed with tag, as a shell on the console would answer. Calling
// the returned function powers it off: listener and connections close.
func fakeSerial(t *testing.T, path, tag string) func() {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	off := func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}
	t.Cleanup(off)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					c.Write([]byte(tag + sc.Text() + "\n"))
				}
			}()
		}
	}()
	return off
}

func TestSerialBridgeFollowsPowerCycles(t *testing.T) {
	dir, err := os.MkdirTemp("", "sb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &Machine{Dir: dir, Config: Config{Name: "m1"}}
	b := NewSerialBridge(m)
	b.redialEvery = 20 * time.Millisecond
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- b.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// The client connects while the machine is off, as ipmi_sim does when
	// it starts before the machine.
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ask := func(line, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			c.Write([]byte(line + "\n"))
			got, err := r.ReadString('\n')
			if err == nil {
				if strings.TrimSpace(got) != want {
					t.Fatalf("got %q, want %q", got, want)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no answer %q through the bridge: %v", want, err)
			}
		}
	}
	qemu1 := fakeSerial(t, filepath.Join(dir, serialSock), "first:")
	ask("hello", "first:hello")
	// Power off: the socket goes away with every connection to it.
	qemu1()
	os.Remove(filepath.Join(dir, serialSock))
	fakeSerial(t, filepath.Join(dir, serialSock), "second:")
	// Lines sent while off are lost, as on a real line; once the new
	// machine is up, the same connection reaches it.
	ask("again", "second:again")
}
