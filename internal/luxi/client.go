package luxi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// clientMaxMessageBytes bounds a reply. Query answers for large clusters can
// be big, so this is far above the server's request limit.
const clientMaxMessageBytes = 256 << 20

// ErrClientClosed is returned by calls on a closed client, or on one whose
// connection was abandoned because an earlier call was cancelled mid-way.
var ErrClientClosed = errors.New("luxi: client connection closed")

// Client is a LUXI connection. It is safe for concurrent use: calls are
// serialised on the one connection. A call whose ctx ends before its reply
// arrives closes the connection (the reply would otherwise be read as the
// answer to the next call); later calls then return ErrClientClosed.
type Client struct {
	mu     sync.Mutex
	nc     net.Conn
	br     *bufio.Reader
	broken error // why the connection can no longer be used

	// callFn, when set, carries every call instead of the socket (see
	// NewCallClient); closeFn is then what Close runs.
	callFn  CallFunc
	closeFn func() error
}

// CallFunc answers one LUXI call with the raw JSON result a server would
// send, or an error (an *ecode.Error for a failure reply).
type CallFunc func(ctx context.Context, method string, args []any) (json.RawMessage, error)

// NewCallClient makes a Client whose calls go through call instead of a
// socket, so every helper method and WaitForJob work unchanged over another
// transport (such as RAPI). Calls are not serialised: call must be safe for
// concurrent use. closer, if not nil, runs once on the first Close; later
// calls then return ErrClientClosed.
func NewCallClient(call CallFunc, closer func() error) *Client {
	return &Client{callFn: call, closeFn: closer}
}

// Dial connects to the LUXI socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("luxi: connecting to %s: %w", path, err)
	}
	return &Client{nc: nc, br: bufio.NewReader(nc)}, nil
}

// Close closes the connection.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := c.broken == nil
	if first {
		c.broken = ErrClientClosed
	}
	if c.callFn != nil {
		if first && c.closeFn != nil {
			return c.closeFn()
		}
		return nil
	}
	return c.nc.Close()
}

// Call sends method with its positional args and decodes the reply's result
// into result (which may be nil to discard it) with encoding/json, so numbers
// inside an `any` arrive as float64. A failure reply is returned as an
// *ecode.Error with the server's kind and class; a reply of another protocol
// version as an *ecode.Error wrapping ErrVersion.
func (c *Client) Call(ctx context.Context, method string, args []any, result any) error {
	raw, err := c.call(ctx, method, args)
	if err != nil {
		return err
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return ecode.New(ecode.LuxiError, ecode.Fault, fmt.Sprintf("luxi: decoding result of %s: %v", method, err))
	}
	return nil
}

func (c *Client) call(ctx context.Context, method string, args []any) (json.RawMessage, error) {
	req, err := encodeRequest(method, args)
	if err != nil {
		return nil, fmt.Errorf("luxi: encoding %s arguments: %w", method, err)
	}
	if c.callFn != nil {
		return c.callVia(ctx, method, args)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.broken != nil {
		return nil, c.broken
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	deadline, hasDeadline := ctx.Deadline() // zero when none: clears any earlier one
	_ = c.nc.SetDeadline(deadline)
	// Cancellation interrupts blocked I/O by moving the deadline to the past.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })

	msg, err := c.exchange(req)
	interrupted := !stop()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("luxi: %s: %w", method, ctx.Err())
		case hasDeadline && errors.Is(err, os.ErrDeadlineExceeded):
			// The socket deadline can fire a moment before ctx notices.
			err = fmt.Errorf("luxi: %s: %w", method, context.DeadlineExceeded)
		}
		// The stream is out of step or gone; never reuse it.
		c.abandon(err)
		return nil, err
	}
	if interrupted {
		// The reply arrived, but the deadline was already moved: the
		// connection cannot be trusted for the next call.
		c.abandon(ctx.Err())
	}
	return decodeResponse(msg)
}

// callVia hands a call to callFn, without holding the lock across it.
func (c *Client) callVia(ctx context.Context, method string, args []any) (json.RawMessage, error) {
	c.mu.Lock()
	broken := c.broken
	c.mu.Unlock()
	if broken != nil {
		return nil, broken
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.callFn(ctx, method, args)
}

// exchange writes a request and reads one reply message.
func (c *Client) exchange(req []byte) ([]byte, error) {
	werr := WriteFrame(c.nc, req)
	msg, rerr := ReadFrame(c.br, clientMaxMessageBytes)
	if werr != nil {
		// A server that refuses the connection (too many connections) may
		// have sent its reason before closing; prefer it to EPIPE.
		if rerr == nil {
			if _, derr := decodeResponse(msg); derr != nil {
				return nil, derr
			}
		}
		return nil, fmt.Errorf("luxi: sending request: %w", werr)
	}
	if rerr != nil {
		return nil, fmt.Errorf("luxi: reading reply: %w", rerr)
	}
	return msg, nil
}

func (c *Client) abandon(why error) {
	if c.broken == nil {
		c.broken = fmt.Errorf("%w (after: %v)", ErrClientClosed, why)
		c.nc.Close()
	}
}
