package luxi

import (
	"fmt"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// A connection's two timeouts share its read deadline, which the reader
// alone sets and moves lazily: a request that arrives in one read, and a
// call that ends, touch no deadline (a worker only notes when the queue
// ran empty). When the deadline passes, onDeadline decides whether a
// timeout really expired, and otherwise sets the deadline to when one
// next could.

// startTimeouts sets the first deadline: the idle timeout from now.
func (c *conn) startTimeouts() {
	if d := c.s.opts.IdleTimeout; d > 0 {
		now := time.Now()
		c.mu.Lock()
		c.idleSince = now
		c.mu.Unlock()
		c.setDeadline(now.Add(d))
	}
}

// frameBegan notes that a message has begun to arrive and is not yet
// complete, and brings the deadline forward to the frame timeout's.
func (c *conn) frameBegan() {
	d := c.s.opts.FrameTimeout
	if d <= 0 {
		return
	}
	c.frameStart = time.Now()
	if end := c.frameStart.Add(d); c.deadline.IsZero() || end.Before(c.deadline) {
		c.setDeadline(end)
	}
}

// onDeadline runs when the read deadline has passed. A message arriving
// for longer than FrameTimeout gets an error reply (after the replies
// before it) and its connection closes; a connection with no call in
// progress and nothing arriving for IdleTimeout closes; otherwise the
// deadline moves to when either could next happen. It reports whether
// to keep reading.
func (c *conn) onDeadline() bool {
	now := time.Now()
	opts := c.s.opts
	if c.in.pending() && opts.FrameTimeout > 0 {
		if end := c.frameStart.Add(opts.FrameTimeout); now.Before(end) {
			c.setDeadline(end)
			return true
		}
		c.s.log.Warn("LUXI request not completed in time, closing connection", "frame_timeout", opts.FrameTimeout)
		c.enqueue(queued{reply: failureFrame(ecode.New(ecode.LuxiError, ecode.Inval,
			fmt.Sprintf("request not completed within %s", opts.FrameTimeout)))})
		c.gone = false
		return false
	}
	if opts.IdleTimeout <= 0 {
		c.setDeadline(time.Time{})
		return true
	}
	c.mu.Lock()
	busy, since := c.running, c.idleSince
	c.mu.Unlock()
	if busy || c.in.pending() {
		// Not idle: look again an idle timeout from now.
		c.setDeadline(now.Add(opts.IdleTimeout))
		return true
	}
	if end := since.Add(opts.IdleTimeout); now.Before(end) {
		c.setDeadline(end)
		return true
	}
	c.s.log.Debug("LUXI connection idle, closing it", "idle_timeout", opts.IdleTimeout)
	c.gone = true
	return false
}

func (c *conn) setDeadline(t time.Time) {
	c.deadline = t
	_ = c.nc.SetReadDeadline(t)
}
