package kvm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"
)

// defaultQMPTimeout bounds a QMP exchange when the caller's context has no
// deadline: qemu answers its monitor from the main loop, so a silent monitor
// means a stuck process, not a slow guest.
const defaultQMPTimeout = 10 * time.Second

// qmpMessage is anything qemu sends on the monitor: the greeting, a command's
// return or error, or an asynchronous event.
type qmpMessage struct {
	Greeting *json.RawMessage `json:"QMP,omitempty"`
	Return   *json.RawMessage `json:"return,omitempty"`
	Error    *QMPError        `json:"error,omitempty"`
	Event    string           `json:"event,omitempty"`
	ID       *json.RawMessage `json:"id,omitempty"`
}

// QMPError is an error reply from qemu.
type QMPError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *QMPError) Error() string { return "qmp: " + e.Class + ": " + e.Desc }

// errQMPClosed reports that qemu closed the monitor, which it does right
// after answering "quit" and whenever it exits.
var errQMPClosed = errors.New("qmp: connection closed")

// maxQMPLine bounds one message so a misbehaving peer cannot make us buffer
// without end; real replies we use are a few hundred bytes.
const maxQMPLine = 1 << 20

// parseQMPMessage decodes one line of the monitor protocol.
func parseQMPMessage(line []byte) (qmpMessage, error) {
	var m qmpMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return m, fmt.Errorf("qmp: bad message: %w", err)
	}
	n := 0
	for _, set := range []bool{m.Greeting != nil, m.Return != nil, m.Error != nil, m.Event != ""} {
		if set {
			n++
		}
	}
	if n != 1 {
		return m, fmt.Errorf("qmp: message is not exactly one of greeting, return, error or event")
	}
	return m, nil
}

// qmpClient is one negotiated monitor connection. qemu serves one client at a
// time, so connections are kept short: dial, run a command or two, close.
type qmpClient struct {
	conn   net.Conn
	r      *bufio.Reader
	nextID int
	// pendingFD is the SCM_RIGHTS message sent with the next command.
	pendingFD []byte
	unix      *net.UnixConn
}

// dialQMP connects to the monitor socket, reads the greeting and leaves
// capabilities negotiation mode.
func dialQMP(ctx context.Context, path string) (*qmpClient, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: %w", err)
	}
	c := &qmpClient{conn: conn, r: bufio.NewReaderSize(conn, 64<<10)}
	stop := c.bind(ctx)
	defer stop()
	m, err := c.read()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp greeting: %w", err)
	}
	if m.Greeting == nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: expected greeting, got %+v", m)
	}
	if _, err := c.call("qmp_capabilities", nil); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *qmpClient) Close() error { return c.conn.Close() }

// Execute runs one command and returns its "return" value.
func (c *qmpClient) Execute(ctx context.Context, cmd string, args any) (json.RawMessage, error) {
	stop := c.bind(ctx)
	defer stop()
	return c.call(cmd, args)
}

// bind applies ctx's deadline (or the default) to the connection and closes
// the connection's pending I/O if ctx is cancelled.
func (c *qmpClient) bind(ctx context.Context) func() {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(defaultQMPTimeout)
	}
	_ = c.conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	return func() { stop() }
}

// ExecuteWithFD runs one command with a file descriptor passed alongside
// (SCM_RIGHTS), as add-fd and getfd take one.
func (c *qmpClient) ExecuteWithFD(ctx context.Context, cmd string, args any, fd int) (json.RawMessage, error) {
	stop := c.bind(ctx)
	defer stop()
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("qmp %s: passing a descriptor needs a unix socket", cmd)
	}
	c.pendingFD = syscall.UnixRights(fd)
	c.unix = uc
	defer func() { c.pendingFD, c.unix = nil, nil }()
	return c.call(cmd, args)
}

func (c *qmpClient) call(cmd string, args any) (json.RawMessage, error) {
	c.nextID++
	id := c.nextID
	req := map[string]any{"execute": cmd, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	if c.pendingFD != nil {
		_, _, err = c.unix.WriteMsgUnix(append(data, '\n'), c.pendingFD, nil)
	} else {
		_, err = c.conn.Write(append(data, '\n'))
	}
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	want := strconv.Itoa(id)
	for {
		m, err := c.read()
		if err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		if m.Event != "" || m.ID == nil || string(*m.ID) != want {
			continue // events and stale replies are not ours
		}
		if m.Error != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, m.Error)
		}
		if m.Return == nil {
			return nil, fmt.Errorf("qmp %s: reply without return", cmd)
		}
		return *m.Return, nil
	}
}

func (c *qmpClient) read() (qmpMessage, error) {
	var line []byte
	for {
		chunk, isPrefix, err := c.r.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return qmpMessage{}, errQMPClosed
			}
			return qmpMessage{}, err
		}
		line = append(line, chunk...)
		if len(line) > maxQMPLine {
			return qmpMessage{}, fmt.Errorf("qmp: message longer than %d bytes", maxQMPLine)
		}
		if !isPrefix {
			break
		}
	}
	return parseQMPMessage(line)
}

// qmpStatus is the reply to query-status.
type qmpStatus struct {
	Status  string `json:"status"`
	Running bool   `json:"running"`
}

// qmpDo dials the monitor, runs one command and closes.
func qmpDo(ctx context.Context, sock, cmd string, args any) (json.RawMessage, error) {
	c, err := dialQMP(ctx, sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Execute(ctx, cmd, args)
}

// queryStatus asks qemu for its run state.
func queryStatus(ctx context.Context, sock string) (qmpStatus, error) {
	raw, err := qmpDo(ctx, sock, "query-status", nil)
	if err != nil {
		return qmpStatus{}, err
	}
	var st qmpStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("qmp query-status: %w", err)
	}
	return st, nil
}

// quit asks qemu to exit at once. qemu may close the connection before its
// reply arrives; that counts as success.
func quit(ctx context.Context, sock string) error {
	_, err := qmpDo(ctx, sock, "quit", nil)
	if errors.Is(err, errQMPClosed) {
		return nil
	}
	return err
}
