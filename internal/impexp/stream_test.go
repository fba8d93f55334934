package impexp

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawExport connects like Send but lets the test write the stream itself.
func rawExport(t *testing.T, exp Config, a string) (*tls.Conn, net.Conn) {
	t.Helper()
	tcfg, err := clientTLS(exp)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	conn := tls.Client(raw, tcfg)
	if err := conn.HandshakeContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	return conn, raw
}

// framed is what Send writes inside TLS for data under c, with or
// without the end frame.
func framed(t *testing.T, c Compression, data []byte, withEnd bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	enc, finish, _, err := newCompressor(c, fw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(append(magicHeader(testMagic), data...)); err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if withEnd {
		err = fw.end()
	} else {
		err = fw.flush()
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestTruncated: streams that stop early must never count as complete,
// whether the TCP connection just closes or TLS ends cleanly.
func TestTruncated(t *testing.T) {
	data := testData(t, 1<<20)
	for _, tc := range []struct {
		name       string
		c          Compression
		half       bool // cut the framed stream in the middle, else drop only the end frame
		cleanClose bool // send close_notify after the partial stream
	}{
		{"none, half, TCP closed", None, true, false},
		{"none, half, clean close", None, true, true},
		{"none, no end frame, TCP closed", None, false, false},
		{"none, no end frame, clean close", None, false, true},
		{"gzip, half, TCP closed", Gzip, true, false},
		{"zstd, half, TCP closed", Zstd, true, false},
		{"gzip, half, clean close", Gzip, true, true},
		{"zstd, no end frame, clean close", Zstd, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imp, exp := pairConfigs(t, tc.c)
			l, err := Listen(imp, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var got lockedBuffer
			ch := receiveAsync(t.Context(), l, &got)
			conn, raw := rawExport(t, exp, addr(l))
			stream := framed(t, tc.c, data, false)
			if tc.half {
				stream = stream[:len(stream)/2]
			}
			if _, err := conn.Write(stream); err != nil {
				t.Fatal(err)
			}
			if tc.cleanClose {
				if err := conn.CloseWrite(); err != nil {
					t.Fatal(err)
				}
				var b [1]byte
				if _, err := conn.Read(b[:]); err == nil && b[0] == ackByte {
					t.Error("the importer acknowledged a cut stream")
				}
			}
			raw.Close()
			r := wait(t, ch)
			if !errors.Is(r.err, ErrTruncated) || !strings.Contains(r.err.Error(), "truncated stream") {
				t.Fatalf("Receive: %v, want a truncated stream error", r.err)
			}
			if g := got.Bytes(); !bytes.HasPrefix(data, g) || (tc.half && len(g) >= len(data)) {
				t.Fatalf("writer got %d bytes, want a prefix of the %d sent", len(g), len(data))
			}
		})
	}
}

// TestFramedRawStream checks the helper against Receive: the complete
// framed stream is accepted.
func TestFramedRawStream(t *testing.T) {
	data := testData(t, 300<<10)
	imp, exp := pairConfigs(t, Gzip)
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)
	conn, raw := rawExport(t, exp, addr(l))
	defer raw.Close()
	if _, err := conn.Write(framed(t, Gzip, data, true)); err != nil {
		t.Fatal(err)
	}
	if err := conn.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := waitAck(conn); err != nil {
		t.Fatal(err)
	}
	if r := wait(t, ch); r.err != nil || sum(got.Bytes()) != sum(data) {
		t.Fatalf("Receive: %v", r.err)
	}
}

// TestExportReaderFails: a read error on the exporter's side must not reach
// the importer as a clean end, even uncompressed and without a size.
func TestExportReaderFails(t *testing.T) {
	imp, exp := pairConfigs(t, None)
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)
	diskErr := errors.New("disk read error")
	r := io.MultiReader(bytes.NewReader(testData(t, 1<<20)), errReader{diskErr})
	if _, err := Send(t.Context(), exp, addr(l), r); !errors.Is(err, diskErr) {
		t.Fatalf("Send: %v, want the reader's error", err)
	}
	if res := wait(t, ch); !errors.Is(res.err, ErrTruncated) {
		t.Fatalf("Receive: %v, want ErrTruncated", res.err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestSizeMismatch(t *testing.T) {
	data := testData(t, 1<<20)
	for _, tc := range []struct {
		name  string
		size  int64
		want  error
		wrote int
	}{
		{"short", int64(len(data)) + 100, ErrTruncated, len(data)},
		{"long", int64(len(data)) - 100, ErrTooLong, len(data) - 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imp, exp := pairConfigs(t, Zstd)
			imp.Size = tc.size
			l, err := Listen(imp, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var got lockedBuffer
			ch := receiveAsync(t.Context(), l, &got)
			_, serr := Send(t.Context(), exp, addr(l), bytes.NewReader(data))
			r := wait(t, ch)
			if !errors.Is(r.err, tc.want) {
				t.Fatalf("Receive: %v, want %v", r.err, tc.want)
			}
			if !errors.Is(serr, ErrNoAck) {
				t.Fatalf("Send: %v, want ErrNoAck", serr)
			}
			if g := got.Bytes(); len(g) != tc.wrote || !bytes.HasPrefix(data, g) {
				t.Fatalf("writer got %d bytes, want the first %d", len(g), tc.wrote)
			}
		})
	}
}

type failWriter struct {
	left int
	err  error
}

func (f *failWriter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		n := f.left
		f.left = 0
		return n, f.err
	}
	f.left -= len(p)
	return len(p), nil
}

// TestImportWriterFails: the exporter must not report success for data
// the importer could not store.
func TestImportWriterFails(t *testing.T) {
	imp, exp := pairConfigs(t, Gzip)
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	full := errors.New("no space left on device")
	ch := receiveAsync(t.Context(), l, &failWriter{left: 1 << 20, err: full})
	_, serr := Send(t.Context(), exp, addr(l), bytes.NewReader(testData(t, 2<<20)))
	if serr == nil {
		t.Fatal("Send succeeded although the importer failed to write")
	}
	if r := wait(t, ch); !errors.Is(r.err, full) {
		t.Fatalf("Receive: %v, want the writer's error", r.err)
	}
}

type syncWriter struct {
	bytes.Buffer
	mu      sync.Mutex
	synced  bool
	syncErr error
}

func (s *syncWriter) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = true
	return s.syncErr
}

func TestSyncBeforeAck(t *testing.T) {
	data := testData(t, 256<<10)
	for _, fail := range []bool{false, true} {
		imp, exp := pairConfigs(t, None)
		l, err := Listen(imp, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		w := &syncWriter{}
		if fail {
			w.syncErr = errors.New("fsync failed")
		}
		ch := receiveAsync(t.Context(), l, w)
		_, serr := Send(t.Context(), exp, addr(l), bytes.NewReader(data))
		if fail {
			if !errors.Is(serr, ErrNoAck) {
				t.Fatalf("Send after a failed sync: %v, want ErrNoAck", serr)
			}
		} else {
			if serr != nil {
				t.Fatal(serr)
			}
			// Send has the acknowledgement, so the sync came before it.
			w.mu.Lock()
			synced := w.synced
			w.mu.Unlock()
			if !synced {
				t.Fatal("Send returned before the importer synced")
			}
		}
		r := wait(t, ch)
		if (r.err != nil) != fail {
			t.Fatalf("Receive (sync fails %v): %v", fail, r.err)
		}
	}
}

func TestReceiveCancelWhileWaiting(t *testing.T) {
	imp, _ := pairConfigs(t, None)
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ch := receiveAsync(ctx, l, io.Discard)
	cancel()
	if r := wait(t, ch); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Receive: %v, want context.Canceled", r.err)
	}
	if _, err := net.Dial("tcp", addr(l)); err == nil {
		t.Fatal("the listener is still open after Receive returned")
	}
}

func TestReceiveTimeout(t *testing.T) {
	imp, _ := pairConfigs(t, None)
	imp.ConnectTimeout = 100 * time.Millisecond
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Receive(t.Context(), io.Discard); !errors.Is(err, ErrNoConnection) {
		t.Fatalf("Receive: %v, want ErrNoConnection", err)
	}
	if _, err := l.Receive(t.Context(), io.Discard); err == nil {
		t.Fatal("a second Receive on the same listener succeeded")
	}
}

// endless is an export source that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i)
	}
	return len(p), nil
}

// signalWriter closes ch once it has seen at least after bytes.
type signalWriter struct {
	after int
	seen  int
	once  sync.Once
	ch    chan struct{}
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.seen += len(p)
	if s.seen >= s.after {
		s.once.Do(func() { close(s.ch) })
	}
	return len(p), nil
}

func TestCancelMidStream(t *testing.T) {
	for _, side := range []string{"export", "import"} {
		t.Run(side, func(t *testing.T) {
			imp, exp := pairConfigs(t, None)
			l, err := Listen(imp, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ictx, icancel := context.WithCancel(t.Context())
			defer icancel()
			ectx, ecancel := context.WithCancel(t.Context())
			defer ecancel()
			w := &signalWriter{after: 1 << 20, ch: make(chan struct{})}
			ch := receiveAsync(ictx, l, w)
			sent := make(chan result, 1)
			go func() {
				n, err := Send(ectx, exp, addr(l), endless{})
				sent <- result{n, err}
			}()
			<-w.ch
			if side == "export" {
				ecancel()
			} else {
				icancel()
			}
			s, r := wait(t, sent), wait(t, ch)
			if s.err == nil || r.err == nil {
				t.Fatalf("Send %v, Receive %v: both must fail", s.err, r.err)
			}
			if side == "export" && (!errors.Is(s.err, context.Canceled) || !errors.Is(r.err, ErrTruncated)) {
				t.Fatalf("Send %v, Receive %v: want context.Canceled and ErrTruncated", s.err, r.err)
			}
			if side == "import" && !errors.Is(r.err, context.Canceled) {
				t.Fatalf("Receive %v: want context.Canceled", r.err)
			}
		})
	}
}

// TestConnectRetries: the exporter starts before the importer listens.
func TestConnectRetries(t *testing.T) {
	imp, exp := pairConfigs(t, Zstd)
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := probe.Addr().String()
	probe.Close()

	failures := make(chan string, 16)
	exp.Logger = slog.New(msgHandler{ch: failures})
	exp.ConnectRetries = 20
	data := testData(t, 512<<10)
	sent := make(chan result, 1)
	go func() {
		n, err := Send(t.Context(), exp, a, bytes.NewReader(data))
		sent <- result{n, err}
	}()
	for msg := range failures {
		if msg == "export: connect attempt failed" {
			break
		}
	}
	l, err := Listen(imp, a)
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)
	if s := wait(t, sent); s.err != nil {
		t.Fatalf("Send: %v", s.err)
	}
	if r := wait(t, ch); r.err != nil || sum(got.Bytes()) != sum(data) {
		t.Fatalf("Receive: %v", r.err)
	}

	// Without retries the first refused connection is the end.
	exp.ConnectRetries = 0
	exp.Logger = nil
	if _, err := Send(t.Context(), exp, a, bytes.NewReader(data)); err == nil || !strings.Contains(err.Error(), "1 connect attempt") {
		t.Fatalf("Send to a closed port: %v", err)
	}
}

func TestMeter(t *testing.T) {
	t0 := time.Now()
	m := &meter{interval: time.Second, size: 100, samples: []sample{{at: t0}}}
	m.connected.Store(true)
	m.bytes.Store(50)
	p := m.snapshot(t0.Add(time.Second), false)
	if p.Throughput != 50 || p.Percent != 50 || p.ETA != time.Second || !p.Connected {
		t.Fatalf("after 1 s: %+v", p)
	}
	// Ten seconds later with little progress: the old fast second has
	// left the window, so the rate is the recent one.
	m.bytes.Store(60)
	m.snapshot(t0.Add(9*time.Second), false)
	m.bytes.Store(70)
	p = m.snapshot(t0.Add(11*time.Second), false)
	if want := 10.0 / 2; p.Throughput != want {
		t.Fatalf("throughput %v, want the recent rate %v", p.Throughput, want)
	}
	m.bytes.Store(100)
	p = m.snapshot(t0.Add(12*time.Second), true)
	if p.Percent != 100 || p.ETA != 0 {
		t.Fatalf("final: %+v", p)
	}
	u := &meter{interval: time.Second, samples: []sample{{at: t0}}}
	u.bytes.Store(10)
	if p := u.snapshot(t0.Add(time.Second), false); p.Percent != 0 || p.ETA != 0 {
		t.Fatalf("unknown size: %+v", p)
	}
}

func FuzzReadMagic(f *testing.F) {
	f.Add([]byte("M="+testMagic+"data"), testMagic)
	f.Add([]byte("M="+testMagic), testMagic)
	f.Add([]byte("M=abcde"), "abcdf")
	f.Add([]byte("M=abc"), "abcde")
	f.Add([]byte(""), "abcde")
	f.Add([]byte("X="+testMagic), testMagic)
	f.Fuzz(func(t *testing.T, data []byte, magic string) {
		r := bytes.NewReader(data)
		err := readMagic(r, magic)
		want := "M=" + magic
		if ok := bytes.HasPrefix(data, []byte(want)); ok != (err == nil) {
			t.Fatalf("readMagic(%q, %q) = %v", data, magic, err)
		}
		if err != nil && !errors.Is(err, ErrMagicMismatch) {
			t.Fatalf("error %v is not a mismatch", err)
		}
		if err == nil && r.Len() != len(data)-len(want) {
			t.Fatalf("consumed %d bytes, want exactly %d", len(data)-r.Len(), len(want))
		}
	})
}
