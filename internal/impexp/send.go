package impexp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Send connects to the importer at addr (retrying per cfg), verifies that
// it presents exactly cfg.Peer, and streams "M=<magic>" and then r's bytes
// through the compressor. It then ends the compressed stream and the TLS
// write side (close_notify) and waits for the importer's one-byte
// acknowledgement: without it the transfer failed, whatever was written.
// It returns the payload bytes read from r. Cancelling ctx closes the
// connection at once; a Read of r that blocks is not interrupted (the
// caller ends its source, for example by stopping the OS script).
func Send(ctx context.Context, cfg Config, addr string, r io.Reader) (int64, error) {
	cfg, err := cfg.check(defaultExportConnectTimeout, time.Now())
	if err != nil {
		return 0, err
	}
	var tcfg *tls.Config
	if cfg.Stream == StreamGaneti {
		tcfg = ganetiClientTLS(cfg)
	} else if tcfg, err = clientTLS(cfg); err != nil {
		return 0, err
	}
	m := newMeter(cfg)
	n, err := send(ctx, cfg, tcfg, addr, r, m)
	m.finish()
	log := cfg.Logger.With("addr", addr, "bytes", n)
	if err != nil {
		log.Warn("export failed", "err", err)
		return n, err
	}
	log.Info("export done")
	return n, nil
}

func send(ctx context.Context, cfg Config, tcfg *tls.Config, addr string, r io.Reader, m *meter) (int64, error) {
	conn, err := dial(ctx, cfg, tcfg, addr)
	if err != nil {
		return 0, err
	}
	// Every way out closes the TCP connection under TLS, never the TLS
	// connection: its Close would send close_notify, which tells the
	// importer the stream ended on purpose. Only writeStream's clean end
	// sends it.
	raw := conn.NetConn()
	defer raw.Close()
	m.connected.Store(true)
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()

	var n int64
	if cfg.Stream == StreamGaneti {
		n, err = writeGanetiStream(cfg, conn, r, m)
	} else {
		n, err = writeStream(cfg, conn, r, m)
		if err == nil {
			err = waitAck(conn)
		}
	}
	if err != nil && ctx.Err() != nil {
		return n, fmt.Errorf("export aborted: %w", ctx.Err())
	}
	return n, err
}

// dial makes up to 1+ConnectRetries attempts, each bounded by
// ConnectTimeout (TCP connect and TLS handshake). A rejected certificate
// ends the attempts: it will not change.
func dial(ctx context.Context, cfg Config, tcfg *tls.Config, addr string) (*tls.Conn, error) {
	d := &net.Dialer{KeepAliveConfig: keepAlive()}
	var last error
	for attempt := 0; attempt <= cfg.ConnectRetries; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(retryDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("export aborted: %w", ctx.Err())
			case <-t.C:
			}
		}
		actx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
		raw, err := d.DialContext(actx, "tcp", addr)
		if err == nil {
			conn := tls.Client(raw, tcfg)
			err = conn.HandshakeContext(actx)
			if err == nil {
				cancel()
				return conn, nil
			}
			raw.Close()
			if isCertFailure(err) {
				cancel()
				return nil, fmt.Errorf("export to %s: importer certificate rejected: %w", addr, err)
			}
		}
		cancel()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("export aborted: %w", ctx.Err())
		}
		last = err
		cfg.Logger.Info("export: connect attempt failed", "addr", addr, "attempt", attempt+1, "of", cfg.ConnectRetries+1, "err", err)
	}
	return nil, fmt.Errorf("export to %s: %d connect attempt(s) failed: %w", addr, cfg.ConnectRetries+1, last)
}

// sendBody writes the magic and r's bytes to enc, the compressor newCompressor
// made (finish and abort are its own), and ends the compressed stream. Both
// streams send their bodies so; each ends its transport its own way.
func sendBody(cfg Config, conn *tls.Conn, enc io.Writer, finish func() error, abort func(), r io.Reader, m *meter) (int64, error) {
	if _, err := enc.Write(magicHeader(cfg.Magic)); err != nil {
		abort()
		return 0, fmt.Errorf("sending the magic value: %w", peerReason(conn, err))
	}
	buf := make([]byte, copyBufferSize)
	n, err := io.CopyBuffer(enc, countingReader{r: r, n: &m.bytes}, buf)
	if err != nil {
		abort()
		var re *readError
		if errors.As(err, &re) {
			return n, fmt.Errorf("reading the data to send: %w", re.err)
		}
		return n, fmt.Errorf("sending data: %w", peerReason(conn, err))
	}
	if err := finish(); err != nil {
		return n, fmt.Errorf("ending the compressed stream: %w", peerReason(conn, err))
	}
	return n, nil
}

// writeStream writes the magic and r's bytes through the compressor and
// ends the stream cleanly.
func writeStream(cfg Config, conn *tls.Conn, r io.Reader, m *meter) (int64, error) {
	fw := newFrameWriter(conn)
	enc, finish, abort, err := newCompressor(cfg.Compress, fw)
	if err != nil {
		return 0, err
	}
	n, err := sendBody(cfg, conn, enc, finish, abort, r, m)
	if err != nil {
		return n, err
	}
	// The end frame is what tells the importer the stream is complete.
	if err := fw.end(); err != nil {
		return n, fmt.Errorf("sending data: %w", peerReason(conn, err))
	}
	// close_notify tells the importer the stream ended here on purpose.
	if err := conn.CloseWrite(); err != nil {
		return n, fmt.Errorf("ending the stream: %w", peerReason(conn, err))
	}
	return n, nil
}

// peerReason looks, after a failed write, for the TLS alert the importer
// sent before it closed (a refused certificate shows up this way with TLS
// 1.3, where the client's handshake ends before the server has checked its
// certificate). It returns the alert when there is one, else werr.
func peerReason(conn *tls.Conn, werr error) error {
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	var b [1]byte
	_, err := conn.Read(b[:])
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return fmt.Errorf("the importer refused the connection: %w", err)
	}
	return werr
}

// waitAck reads the importer's acknowledgement.
func waitAck(conn *tls.Conn) error {
	var b [1]byte
	k, err := io.ReadFull(conn, b[:])
	if k == 1 && b[0] == ackByte {
		return nil
	}
	if k == 1 {
		return fmt.Errorf("%w: unexpected reply byte %#x", ErrNoAck, b[0])
	}
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: the importer closed the connection (it failed to store the data)", ErrNoAck)
	}
	return fmt.Errorf("%w: %w", ErrNoAck, err)
}
