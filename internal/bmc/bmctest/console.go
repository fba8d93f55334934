package bmctest

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a bytes.Buffer that other goroutines may write (a logger,
// a process's output, an SSH session) while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// SerialConsole is a machine's console the test reads and types on (a
// serial socket, the output and input of a Serial-over-LAN session ...):
// everything it prints is kept. Positions are byte offsets in what it
// printed since NewSerialConsole.
type SerialConsole struct {
	w   io.Writer
	out SyncBuffer
}

// NewSerialConsole reads r in the background until it fails (closed or at
// its end) and types on w.
func NewSerialConsole(r io.Reader, w io.Writer) *SerialConsole {
	c := &SerialConsole{w: w}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			c.out.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	return c
}

// Printed is what the console printed between the positions from and to.
func (c *SerialConsole) Printed(from, to int) string {
	s := c.out.String()
	return s[min(from, len(s)):min(to, len(s))]
}

// TryWaitFor waits up to d for want to be printed after position from, and
// returns the position after it, or -1 when it was not.
func (c *SerialConsole) TryWaitFor(from int, want string, d time.Duration) int {
	deadline := time.Now().Add(d)
	for {
		s := c.out.String()
		if i := strings.Index(s[min(from, len(s)):], want); i >= 0 {
			return from + i + len(want)
		}
		if time.Now().After(deadline) {
			return -1
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitFor is TryWaitFor that fails the test, showing the console since
// from, when want was not printed within d.
func (c *SerialConsole) WaitFor(t testing.TB, from int, want string, d time.Duration) int {
	t.Helper()
	end := c.TryWaitFor(from, want, d)
	if end < 0 {
		s := c.out.String()
		t.Fatalf("%q did not appear on the serial console within %s; console since %d:\n%s", want, d, from, s[min(from, len(s)):])
	}
	return end
}

// Send types s on the console.
func (c *SerialConsole) Send(t testing.TB, s string) {
	t.Helper()
	if _, err := c.w.Write([]byte(s)); err != nil {
		t.Fatalf("writing to the serial console: %v", err)
	}
}

// WaitFile polls the file at path (a serial log: a file, with nothing to
// block on) until it holds want, failing the test after d.
func WaitFile(t testing.TB, path, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		data, _ := os.ReadFile(path)
		if bytes.Contains(data, []byte(want)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q did not appear in %s within %s; log:\n%s", want, path, d, data)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
