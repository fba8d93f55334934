package rpc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Stream opens a bidirectional byte stream to a stream method (a console,
// for instance): an HTTP/1.1 upgrade to "corral-stream" on an authenticated
// connection. The client's timeout bounds the opening only; the stream lasts
// until Close or until ctx ends.
func (c *Client) Stream(ctx context.Context, node, addr, method string, args any) (io.ReadWriteCloser, error) {
	req, t, cancel, err := c.newRequest(ctx, c.timeout, node, addr, method, "", args)
	if err != nil {
		return nil, err
	}
	defer cancel()
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", StreamProtocol)
	resp, err := t.RoundTrip(req)
	if err != nil {
		return nil, c.transportError(ctx, node, addr, method, err)
	}
	if resp.StatusCode == http.StatusSwitchingProtocols {
		rwc, ok := resp.Body.(io.ReadWriteCloser)
		if !ok || !strings.EqualFold(resp.Header.Get("Upgrade"), StreamProtocol) {
			resp.Body.Close()
			return nil, protocolError("node %s switched to an unexpected protocol %q", node, resp.Header.Get("Upgrade"))
		}
		s := &clientStream{ReadWriteCloser: rwc}
		s.stop = context.AfterFunc(ctx, func() { s.Close() })
		return s, nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, c.transportError(ctx, node, addr, method, err)
	}
	if err := decodeResponse(resp.StatusCode, body, nil); err != nil {
		return nil, err
	}
	return nil, protocolError("node %s answered a stream request with HTTP %d", node, resp.StatusCode)
}

// clientStream closes the upgraded connection once, from Close or from the
// end of the stream's context.
type clientStream struct {
	io.ReadWriteCloser
	stop func() bool
	once sync.Once
	err  error
}

func (s *clientStream) Close() error {
	s.once.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		s.err = s.ReadWriteCloser.Close()
	})
	return s.err
}

// serveStream takes over the connection after the checks in ServeHTTP have
// passed and runs the stream handler on it.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, h StreamHandler, args json.RawMessage, log *slog.Logger) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		writeFailure(w, http.StatusInternalServerError, ecode.New(ecode.RemoteError, ecode.Fault, "connection cannot be upgraded: "+err.Error()))
		return
	}
	defer conn.Close()
	// The server's header and body deadlines must not end a console
	// session that has been idle for a while.
	conn.SetDeadline(time.Time{})
	brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + StreamProtocol + "\r\n\r\n")
	if err := brw.Flush(); err != nil {
		log.Warn("stream upgrade failed", "err", err)
		return
	}
	// The request context ends when the server shuts down; closing the
	// connection then unblocks a handler stuck in Read.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	start := time.Now()
	rw := struct {
		io.Reader
		io.Writer
	}{brw.Reader, conn}
	if err := h(ctx, args, rw); err != nil {
		log.Info("stream ended with error", "err", err, "duration", time.Since(start))
		return
	}
	log.Debug("stream ended", "duration", time.Since(start))
}

// isUpgrade reports whether r asks to switch to the stream protocol.
func isUpgrade(r *http.Request) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), StreamProtocol) {
		return false
	}
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
