package apifront

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corral/corral/internal/luxi"
)

// candidate is a real luxi.Server answering QueryClusterInfo with its own
// name, as one master candidate's socket.
type candidate struct {
	name string
	path string
	stop func()
}

func startCandidate(t *testing.T, dir, name string) *candidate {
	t.Helper()
	c := &candidate{name: name, path: filepath.Join(dir, name)}
	h := luxi.HandlerFunc(func(_ context.Context, method string, _ []json.RawMessage) (any, error) {
		return map[string]any{"name": name}, nil
	})
	s := luxi.NewServer(h, luxi.ServerOptions{Path: c.path})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	select {
	case <-s.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	c.stop = func() {
		cancel()
		<-done
		c.stop = func() {}
	}
	t.Cleanup(func() { c.stop() })
	return c
}

func clusterName(t *testing.T, p *LuxiPool) string {
	t.Helper()
	var info map[string]any
	err := p.Do(context.Background(), func(c *luxi.Client) (err error) {
		info, err = c.QueryClusterInfo(context.Background())
		return err
	})
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	name, _ := info["name"].(string)
	return name
}

// TestLuxiPoolFollowsFailover: the pool stays on the first candidate while
// it runs, moves to the next one that answers when it is gone (its idle
// connections dropped), and reports every socket when none answers.
func TestLuxiPoolFollowsFailover(t *testing.T) {
	// t.TempDir() embeds the test name and can exceed the socket path limit.
	dir, err := os.MkdirTemp("", "apifront")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a, b := startCandidate(t, dir, "a"), startCandidate(t, dir, "b")
	var dials atomic.Int64
	var logged syncBuffer
	p := NewLuxiPool([]string{a.path, b.path}, PoolOptions{Dial: func(ctx context.Context, path string) (*luxi.Client, error) {
		dials.Add(1)
		return luxi.Dial(ctx, path)
	}, Log: slog.New(slog.NewTextHandler(&logged, nil))})
	defer p.Close()
	for range 3 {
		if got := clusterName(t, p); got != "a" {
			t.Fatalf("answered by %q, want the first candidate", got)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d dials for 3 sequential calls, want 1", d)
	}
	a.stop()
	if got := clusterName(t, p); got != "b" {
		t.Fatalf("after the first candidate stopped: answered by %q, want b", got)
	}
	if p.Socket() != b.path {
		t.Errorf("current socket %s, want %s", p.Socket(), b.path)
	}
	if n := p.IdleConns(); n != 1 {
		t.Errorf("%d idle connections, want the one to b", n)
	}
	if msg := logged.String(); !strings.Contains(msg, "moving to the next master candidate") || !strings.Contains(msg, "to="+b.path) {
		t.Errorf("the move was not logged with its target: %q", msg)
	}
	// The first candidate back: the pool stays where it is (b relays too).
	a2 := startCandidate(t, dir, "a")
	_ = a2
	if got := clusterName(t, p); got != "b" {
		t.Errorf("answered by %q, want b still", got)
	}
	b.stop()
	a2.stop()
	err = p.Do(context.Background(), func(c *luxi.Client) error {
		_, err := c.QueryClusterInfo(context.Background())
		return err
	})
	var down *BackendDownError
	if !errors.As(err, &down) {
		t.Fatalf("every candidate down: %v, want a BackendDownError", err)
	}
	for _, path := range []string{a.path, b.path} {
		if !strings.Contains(err.Error(), path) {
			t.Errorf("error %q does not name %s", err, path)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLuxiPoolWithoutSockets(t *testing.T) {
	p := NewLuxiPool(nil, PoolOptions{})
	err := p.Do(context.Background(), func(*luxi.Client) error { return nil })
	var down *BackendDownError
	if !errors.As(err, &down) {
		t.Fatalf("no sockets: %v, want a BackendDownError", err)
	}
}
