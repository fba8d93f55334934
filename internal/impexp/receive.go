package impexp

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Listener is the import end: bound at Listen, it takes one connection.
type Listener struct {
	cfg       Config
	tls       *tls.Config
	ln        net.Listener
	closeOnce sync.Once
	closeErr  error

	mu       sync.Mutex
	received bool
}

// keepAlive is Ganeti's socat setting: keepidle=60, keepintvl=10,
// keepcnt=5, so a vanished peer ends a transfer within two minutes.
func keepAlive() net.KeepAliveConfig {
	return net.KeepAliveConfig{Enable: true, Idle: 60 * time.Second, Interval: 10 * time.Second, Count: 5}
}

// Listen checks cfg and binds addr (for example "127.0.0.5:0") at once, so
// the port can be published before the exporter starts.
func Listen(cfg Config, addr string) (*Listener, error) {
	cfg, err := cfg.check(defaultImportConnectTimeout, time.Now())
	if err != nil {
		return nil, err
	}
	lc := net.ListenConfig{KeepAliveConfig: keepAlive()}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("import listener on %s: %w", addr, err)
	}
	tcfg := serverTLS(cfg)
	if cfg.Stream == StreamGaneti {
		tcfg = ganetiServerTLS(cfg)
	}
	return &Listener{cfg: cfg, tls: tcfg, ln: ln}, nil
}

// Port is the bound TCP port.
func (l *Listener) Port() int {
	if a, ok := l.ln.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	return 0
}

// Close stops listening; a waiting Receive returns an error. Closing twice
// is harmless.
func (l *Listener) Close() error {
	l.closeOnce.Do(func() {
		l.closeErr = l.ln.Close()
	})
	return l.closeErr
}

// Receive waits up to ConnectTimeout for one connection presenting exactly
// the pinned certificate (others fail their handshake, are logged and do
// not end the wait), then reads the stream: decompress, check
// "M=<magic>", copy the rest into w. It returns the payload bytes written.
// A stream that ends without the sender's end frame (a dropped connection,
// with or without TLS close_notify; a cut-off compressed stream) or, with
// Size set, is shorter or longer than Size is an error; w may then hold a
// prefix of the data. When everything is in w (and, if w has a Sync() error
// method like *os.File, synced), the importer sends the acknowledgement the
// exporter waits for. The listener is closed when Receive returns; a
// Listener receives once.
func (l *Listener) Receive(ctx context.Context, w io.Writer) (int64, error) {
	defer l.Close()
	l.mu.Lock()
	again := l.received
	l.received = true
	l.mu.Unlock()
	if again {
		return 0, errors.New("import listener already used")
	}
	m := newMeter(l.cfg)
	n, err := l.receive(ctx, w, m)
	m.finish()
	log := l.cfg.Logger.With("port", l.Port(), "bytes", n)
	if err != nil {
		log.Warn("import failed", "err", err)
		return n, err
	}
	log.Info("import done")
	return n, nil
}

func (l *Listener) receive(ctx context.Context, w io.Writer, m *meter) (int64, error) {
	conn, err := l.accept(ctx)
	if err != nil {
		return 0, err
	}
	// Closing the TCP connection rather than the TLS one: after an error
	// there is nothing to say cleanly, and a TLS close could wait on a peer
	// that is not reading.
	raw := conn.NetConn()
	defer raw.Close()
	m.connected.Store(true)
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()

	var n int64
	if l.cfg.Stream == StreamGaneti {
		n, err = l.receiveGanetiStream(conn, w, m)
	} else {
		n, err = l.readStream(conn, w, m)
	}
	if err == nil {
		if s, ok := w.(interface{ Sync() error }); ok {
			if serr := s.Sync(); serr != nil {
				err = fmt.Errorf("syncing the received data: %w", serr)
			}
		}
	}
	if err == nil && l.cfg.Stream != StreamGaneti {
		// The acknowledgement: the exporter's success means the data is
		// here. An error instead closes the connection without it. A
		// Ganeti exporter expects none.
		if _, werr := conn.Write([]byte{ackByte}); werr != nil {
			err = fmt.Errorf("sending the acknowledgement: %w", werr)
		} else {
			_ = conn.CloseWrite()
		}
	}
	if err != nil && ctx.Err() != nil {
		return n, fmt.Errorf("import aborted: %w", ctx.Err())
	}
	return n, err
}

// readStream reads the magic and the payload and checks the stream's end.
func (l *Listener) readStream(conn *tls.Conn, w io.Writer, m *meter) (int64, error) {
	raw := bufio.NewReaderSize(conn, netBufferSize)
	frames := &frameReader{r: raw}
	dec, release, err := newDecompressor(l.cfg.Compress, frames)
	if err != nil {
		return 0, err
	}
	defer release()
	if err := readMagic(dec, l.cfg.Magic); err != nil {
		return 0, err
	}
	n, err := copyPayload(dec, l.cfg.Size, w, m)
	if err != nil {
		return n, err
	}
	// The decompressor is done: the frames must be at their end frame
	// (data after the compressed stream is refused), and nothing may follow
	// it.
	var b [1]byte
	if k, err := io.ReadFull(frames, b[:]); k > 0 {
		return n, errors.New("unexpected data after the end of the compressed stream")
	} else if !errors.Is(err, io.EOF) {
		return n, streamErr(err)
	}
	if k, _ := io.ReadFull(raw, b[:]); k > 0 {
		return n, errors.New("unexpected data after the end of the stream")
	}
	return n, nil
}

// accept runs handshakes concurrently until one presents the pinned
// certificate, the timeout passes or ctx ends. A bad handshake is logged
// and the wait goes on.
func (l *Listener) accept(ctx context.Context) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, l.cfg.ConnectTimeout, ErrNoConnection)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()

	var (
		mu      sync.Mutex
		done    bool
		pending = map[net.Conn]struct{}{}
		wg      sync.WaitGroup
		won     = make(chan *tls.Conn, 1)
		failed  = make(chan error, 1)
	)
	finish := func() {
		mu.Lock()
		done = true
		for c := range pending {
			c.Close()
		}
		mu.Unlock()
	}
	wg.Go(func() {
		for {
			c, err := l.ln.Accept()
			if err != nil {
				failed <- err
				return
			}
			mu.Lock()
			if done {
				mu.Unlock()
				c.Close()
				return
			}
			pending[c] = struct{}{}
			mu.Unlock()
			wg.Go(func() { l.handshake(ctx, c, &mu, &done, pending, won) })
		}
	})

	var conn *tls.Conn
	var err error
	select {
	case conn = <-won:
	case err = <-failed:
	case <-ctx.Done():
	}
	finish()
	l.Close()
	wg.Wait()
	if conn == nil {
		// A handshake may have won just as the wait ended.
		select {
		case c := <-won:
			c.NetConn().Close()
		default:
		}
	}
	if conn != nil {
		return conn, nil
	}
	if context.Cause(ctx) == ErrNoConnection {
		return nil, fmt.Errorf("%w within %s", ErrNoConnection, l.cfg.ConnectTimeout)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("import aborted: %w", ctx.Err())
	}
	return nil, fmt.Errorf("import listener: %w", err)
}

// handshake runs one server handshake; the first good one is handed over
// through won, later ones are closed.
func (l *Listener) handshake(ctx context.Context, c net.Conn, mu *sync.Mutex, done *bool, pending map[net.Conn]struct{}, won chan<- *tls.Conn) {
	// The Ganeti stream has no end frame: the end of TCP under TLS must
	// be seen to tell a cut-off stream.
	var under net.Conn = c
	if l.cfg.Stream == StreamGaneti {
		under = &eofConn{Conn: c}
	}
	tc := tls.Server(under, l.tls)
	hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	err := tc.HandshakeContext(hctx)
	cancel()
	mu.Lock()
	defer mu.Unlock()
	delete(pending, c)
	if err != nil {
		if !*done {
			l.cfg.Logger.Warn("import: rejected a connection", "remote", c.RemoteAddr().String(), "err", err)
		}
		c.Close()
		return
	}
	if *done {
		c.Close()
		return
	}
	*done = true
	l.cfg.Logger.Info("import: peer connected", "remote", c.RemoteAddr().String())
	won <- tc
}
