package rpc

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// dyingListener hands out connections; once armed, the first connection
// that reads more of a request resets itself (as a node daemon killed
// between accepting a request and answering it), and only that one.
type dyingListener struct {
	net.Listener
	armed atomic.Bool
	once  sync.Once
	reset atomic.Int32
}

func (l *dyingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &dyingConn{Conn: c, l: l}, nil
}

type dyingConn struct {
	net.Conn
	l *dyingListener
}

func (c *dyingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.l.armed.Load() {
		killed := false
		c.l.once.Do(func() { killed = true })
		if killed {
			c.l.reset.Add(1)
			if tc, ok := c.Conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with a reset, not a goodbye
			}
			c.Conn.Close()
			return 0, net.ErrClosed
		}
	}
	return n, err
}

// TestCallRetriedOnDeadPooledConnection: a call sent on a pooled
// connection whose peer dies before answering is sent again on a new
// connection instead of failing, because every node call may be repeated.
func TestCallRetriedOnDeadPooledConnection(t *testing.T) {
	ca := newTestCA(t, "alpha")
	s := newNodeServer(t, ca, "node1", t.TempDir())
	calls := countingEcho(s)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &dyingListener{Listener: inner}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	c := newMasterClient(t, ca, epochOf(3))
	addr := inner.Addr().String()

	if err := c.Call(context.Background(), "node1", addr, "echo", "", echoArgs{"one"}, nil); err != nil {
		t.Fatal(err)
	}
	// The next request goes out on the pooled connection, which dies.
	ln.armed.Store(true)
	var r echoReply
	if err := c.Call(context.Background(), "node1", addr, "echo", "", echoArgs{"two"}, &r); err != nil {
		t.Fatalf("call on a connection that died: %v", err)
	}
	if ln.reset.Load() != 1 || r.Word != "two" || calls.Load() != 2 {
		t.Fatalf("resets %d, reply %+v, handler ran %d times", ln.reset.Load(), r, calls.Load())
	}
}
