package impexp

// Ganeti's stream.
//
// Ganeti 3.0's import/export daemon moves a disk with socat over OpenSSL:
// the exporter connects, the importer listens, and each side verifies that
// the other presents exactly the certificate it was given (socat's
// verify=1 with that certificate as the only CA file). Inside TLS there is
// nothing but the bytes "M=<magic>" and the disk data, both through the
// compressor as one stream (gzip -1, gzip or none; any other tool the
// cluster lists in compression_tools, run without arguments). There are no
// frames and no acknowledgement: the exporter writes, closes, and its socat
// exits 0; the importer's pipeline succeeds when the decompressor, the
// magic check and the sink succeed.
//
// Corral speaks this stream when the peer's transfer certificate is not a
// Corral one (StreamFor). What it adds on its own side:
//   - as an importer it takes only a stream that ends with TLS close_notify
//     (socat sends one at the end of its input), so a connection cut off
//     at a record boundary is a truncated stream, not a short disk;
//   - as an exporter it reports success only after the importer has closed
//     the connection in turn, within peerCloseTimeout.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/corral/corral/internal/pki"
)

// Stream is a wire format of the disk stream.
type Stream string

const (
	// StreamCorral is Corral's own stream: TLS 1.3, frames, an
	// acknowledgement (frame.go). It needs Corral at both ends.
	StreamCorral Stream = "corral"
	// StreamGaneti is what Ganeti 3.0's socat-based daemon puts on the
	// wire.
	StreamGaneti Stream = "ganeti"
)

// StreamFor chooses the stream for a peer from the certificate it will
// present: Corral's when it is a Corral transfer certificate, else
// Ganeti's. Both ends apply the rule to each other's certificate, so they
// agree.
func StreamFor(peer *x509.Certificate) Stream {
	if pki.IsCorralTransferCert(peer) {
		return StreamCorral
	}
	return StreamGaneti
}

// peerCloseTimeout bounds how long a Ganeti-stream export waits, after
// its last byte, for the importer to close the connection.
const peerCloseTimeout = time.Minute

// ganetiServerTLS is the import side's configuration for a Ganeti
// exporter: serverTLS, pinning the client certificate the same way, with
// TLS 1.2 allowed too, as OpenSSL in socat offers TLS 1.3 and, on older
// systems, 1.2. Go's default suites are all in Ganeti's cipher list (HIGH
// without DES, 3DES, EXPORT and finite-field DH).
func ganetiServerTLS(cfg Config) *tls.Config {
	c := serverTLS(cfg)
	c.MinVersion = tls.VersionTLS12
	return c
}

// ganetiClientTLS is the export side's configuration for a Ganeti
// importer. Ganeti's transfer certificates have no subject alternative
// name, so Go's name check cannot apply; the pinned certificate is
// compared byte for byte instead, which is stricter than a name.
func ganetiClientTLS(cfg Config) *tls.Config {
	pinned := cfg.Peer
	return &tls.Config{
		MinVersion:                  tls.VersionTLS12,
		Certificates:                []tls.Certificate{cfg.Cert},
		InsecureSkipVerify:          true, // replaced by VerifyConnection's pinning
		DynamicRecordSizingDisabled: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			raw := make([][]byte, 0, len(cs.PeerCertificates))
			for _, c := range cs.PeerCertificates {
				raw = append(raw, c.Raw)
			}
			return verifyPeer(pinned, raw, time.Now())
		},
	}
}

// writeGanetiStream writes the magic and r's bytes through the compressor
// straight into TLS, ends the compressed stream, sends close_notify and
// waits for the importer to close.
func writeGanetiStream(cfg Config, conn *tls.Conn, r io.Reader, m *meter) (int64, error) {
	bw := bufio.NewWriterSize(conn, netBufferSize)
	enc, finish, abort, err := newCompressor(cfg.Compress, bw)
	if err != nil {
		return 0, err
	}
	// Hiding the bufio.Writer's ReadFrom keeps the copy in whole buffers:
	// with no compression, each goes to TLS in one write.
	n, err := sendBody(cfg, conn, struct{ io.Writer }{enc}, finish, abort, r, m)
	if err != nil {
		return n, err
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("sending data: %w", peerReason(conn, err))
	}
	if err := conn.CloseWrite(); err != nil {
		return n, fmt.Errorf("ending the stream: %w", peerReason(conn, err))
	}
	return n, waitPeerClose(conn, peerCloseTimeout)
}

// waitPeerClose reads until the importer ends the connection. Its end
// (close_notify, a TCP close or reset) means it has read the whole stream:
// socat leaves only once its input is at its end. A TLS alert means it
// refused the stream; data or silence are errors too.
func waitPeerClose(conn *tls.Conn, timeout time.Duration) error {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	var b [1]byte
	k, err := conn.Read(b[:])
	switch {
	case k > 0:
		return errors.New("the importer sent data on a one-way stream")
	case err == nil:
		return errors.New("the importer did not end the connection")
	case errors.Is(err, io.EOF), isReset(err):
		return nil
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return fmt.Errorf("the importer refused the stream: %w", err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the importer did not close the connection within %s after the end of the stream", timeout)
	}
	return fmt.Errorf("waiting for the importer to close: %w", err)
}

// isReset tells a TCP reset: socat may close with unread bytes (our
// close_notify) still queued, which the kernel turns into a reset.
func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// readGanetiStream reads what a Ganeti exporter sends: decompress, check
// the magic, copy the rest to w (exactly size bytes when size > 0). ended
// reports, once the stream is at its end, whether the peer ended it on
// purpose (TLS close_notify) rather than by dropping the connection.
func readGanetiStream(body io.Reader, c Compression, magic string, size int64, w io.Writer, m *meter, ended func() error) (int64, error) {
	dec, release, err := newDecompressor(c, body)
	if err != nil {
		return 0, err
	}
	defer release()
	if err := readMagic(dec, magic); err != nil {
		return 0, err
	}
	n, err := copyPayload(dec, size, w, m)
	if err != nil {
		return n, err
	}
	// The decompressor stopped at the end of its stream (gzip reads every
	// member to the end of the input); nothing may follow it.
	var b [1]byte
	if c != None {
		if k, err := io.ReadFull(body, b[:]); k > 0 {
			return n, errors.New("unexpected data after the end of the compressed stream")
		} else if !errors.Is(err, io.EOF) {
			return n, streamErr(err)
		}
	}
	return n, ended()
}

// copyPayload copies dec's bytes into w: everything up to dec's end, or
// with size > 0 exactly size bytes, refusing a stream shorter or longer.
func copyPayload(dec io.Reader, size int64, w io.Writer, m *meter) (int64, error) {
	var src io.Reader = dec
	if size > 0 {
		src = io.LimitReader(dec, size)
	}
	cw := countingWriter{w: w, n: &m.bytes}
	buf := make([]byte, copyBufferSize)
	n, err := io.CopyBuffer(cw, &fillReader{r: src}, buf)
	if err != nil {
		var we *writeError
		if errors.As(err, &we) {
			return n, fmt.Errorf("writing the received data: %w", we.err)
		}
		return n, streamErr(err)
	}
	if size > 0 {
		if n < size {
			return n, fmt.Errorf("%w: received %d of %d bytes", ErrTruncated, n, size)
		}
		var b [1]byte
		k, err := io.ReadFull(dec, b[:])
		if k > 0 {
			return n, fmt.Errorf("%w (%d bytes)", ErrTooLong, size)
		}
		if !errors.Is(err, io.EOF) {
			return n, streamErr(err)
		}
	}
	return n, nil
}

// eofConn notes whether the TCP connection under TLS reached its end. Go's
// TLS reports a close_notify and a bare TCP close at a record boundary
// both as io.EOF; only the second reads the TCP stream to its end (after
// close_notify the TLS layer stops reading), so this tells them apart.
type eofConn struct {
	net.Conn
	eof atomic.Bool
}

func (c *eofConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if errors.Is(err, io.EOF) {
		c.eof.Store(true)
	}
	return n, err
}

// endedOnPurpose is readGanetiStream's end check for a connection.
func (c *eofConn) endedOnPurpose() error {
	if c.eof.Load() {
		return fmt.Errorf("%w: the connection ended without TLS close_notify", ErrTruncated)
	}
	return nil
}

// receiveGanetiStream reads one Ganeti stream from an accepted connection.
func (l *Listener) receiveGanetiStream(conn *tls.Conn, w io.Writer, m *meter) (int64, error) {
	ended := func() error { return nil }
	if ec, ok := conn.NetConn().(*eofConn); ok {
		ended = ec.endedOnPurpose
	}
	body := bufio.NewReaderSize(conn, netBufferSize)
	return readGanetiStream(body, l.cfg.Compress, l.cfg.Magic, l.cfg.Size, w, m, ended)
}
