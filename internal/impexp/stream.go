package impexp

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/corral/corral/internal/seconds"
)

// Errors a transfer can end with; callers test them with errors.Is.
var (
	// ErrMagicMismatch: the stream did not start with M=<magic>.
	ErrMagicMismatch = errors.New("magic value mismatch")
	// ErrTruncated: the stream ended without the sender's clean end, or
	// with fewer bytes than the expected size.
	ErrTruncated = errors.New("truncated stream")
	// ErrTooLong: the stream carried more bytes than the expected size.
	ErrTooLong = errors.New("stream longer than the expected size")
	// ErrNoAck: the importer did not confirm that it stored the data.
	ErrNoAck = errors.New("no acknowledgement from the importer")
	// ErrNoConnection: no acceptable connection arrived in time.
	ErrNoConnection = errors.New("no connection from the peer")
)

// ackByte is what the importer sends once the data is stored.
const ackByte = 'K'

// magicHeader is what leads the payload.
func magicHeader(magic string) []byte { return []byte("M=" + magic) }

// readMagic reads exactly len("M="+magic) bytes from r and compares them.
// A stream that ends cleanly before the header is complete is a mismatch;
// one that breaks off keeps its read error.
func readMagic(r io.Reader, magic string) error {
	want := magicHeader(magic)
	got := make([]byte, len(want))
	n := 0
	for n < len(got) {
		m, err := r.Read(got[n:])
		n += m
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return streamErr(fmt.Errorf("reading the magic value: %w", err))
		}
	}
	if n != len(want) || subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrMagicMismatch
	}
	return nil
}

// newCompressor wraps w in c's encoder. finish writes the encoder's last
// bytes and trailer into w; abort releases the encoder without completing
// the stream, so a failed transfer never looks finished. Neither closes w.
func newCompressor(c Compression, w io.Writer) (enc io.Writer, finish func() error, abort func(), err error) {
	switch c {
	case None:
		return w, func() error { return nil }, func() {}, nil
	case Gzip, GzipFast, GzipSlow:
		level := gzip.BestSpeed
		if c == GzipSlow {
			level = gzip.DefaultCompression
		}
		zw, err := gzip.NewWriterLevel(w, level)
		if err != nil {
			return nil, nil, nil, err
		}
		return zw, zw.Close, func() {}, nil
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(codecConcurrency()))
		if err != nil {
			return nil, nil, nil, err
		}
		return zw, zw.Close, func() { zw.Reset(io.Discard); _ = zw.Close() }, nil
	}
	return nil, nil, nil, fmt.Errorf("unknown compression %q", c)
}

// newDecompressor wraps r in c's decoder; release frees the decoder's
// goroutines and does not touch r.
func newDecompressor(c Compression, r io.Reader) (io.Reader, func(), error) {
	switch c {
	case None:
		return r, func() {}, nil
	case Gzip, GzipFast, GzipSlow:
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, streamErr(fmt.Errorf("gzip header: %w", err))
		}
		return zr, func() { _ = zr.Close() }, nil
	case Zstd:
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(codecConcurrency()))
		if err != nil {
			return nil, nil, err
		}
		return zr, zr.Close, nil
	}
	return nil, nil, fmt.Errorf("unknown compression %q", c)
}

// codecConcurrency leaves a core for TLS and the disk on small nodes.
func codecConcurrency() int { return max(1, min(2, runtime.GOMAXPROCS(0))) }

// streamErr turns the ways a stream can end early (TLS without
// close_notify, a compressed stream cut off) into ErrTruncated.
func streamErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: %w", ErrTruncated, err)
	}
	return err
}

// fillReader makes every Read fill p unless the stream ends, so the
// importer writes whole buffers instead of one TLS record at a time. A read
// error is returned on the call after the data that preceded it.
type fillReader struct {
	r   io.Reader
	err error
}

func (f *fillReader) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	n := 0
	for n < len(p) {
		m, err := f.r.Read(p[n:])
		n += m
		if err != nil {
			f.err = err
			if n > 0 {
				return n, nil
			}
			return 0, err
		}
	}
	return n, nil
}

// countingReader counts payload bytes for progress. It hides r's WriterTo
// on purpose, so io.CopyBuffer uses the one reused buffer.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if err != nil && err != io.EOF {
		err = &readError{err: err}
	}
	return n, err
}

// readError marks a failure of the exporter's reader.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// countingWriter counts payload bytes for progress and marks the
// writer's own errors, so they are not mistaken for stream errors.
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	if err != nil {
		err = &writeError{err: err}
	}
	return n, err
}

// writeError marks a failure of the importer's writer.
type writeError struct{ err error }

func (e *writeError) Error() string { return e.err.Error() }
func (e *writeError) Unwrap() error { return e.err }

// meter reports progress from its own goroutine and once at the end.
type meter struct {
	fn        func(Progress)
	interval  time.Duration
	size      int64
	bytes     atomic.Int64
	connected atomic.Bool
	stop      chan struct{}
	done      chan struct{}
	// samples is touched by the reporting goroutine, then by finish.
	samples []sample
}

type sample struct {
	at    time.Time
	bytes int64
}

// throughputWindow is how far back the throughput looks.
func (m *meter) window() time.Duration { return max(5*time.Second, 3*m.interval) }

func newMeter(cfg Config) *meter {
	m := &meter{fn: cfg.Progress, interval: cfg.ProgressInterval, size: cfg.Size,
		stop: make(chan struct{}), done: make(chan struct{})}
	m.samples = []sample{{at: time.Now()}}
	if m.fn == nil {
		close(m.done)
		return m
	}
	go m.loop()
	return m
}

func (m *meter) loop() {
	defer close(m.done)
	t := time.NewTicker(m.interval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			m.fn(m.snapshot(now, false))
		}
	}
}

// finish stops the ticker and makes the final report.
func (m *meter) finish() {
	close(m.stop)
	<-m.done
	if m.fn != nil {
		m.fn(m.snapshot(time.Now(), true))
	}
}

func (m *meter) snapshot(now time.Time, final bool) Progress {
	b := m.bytes.Load()
	m.samples = append(m.samples, sample{at: now, bytes: b})
	cut := 0
	for cut < len(m.samples)-2 && now.Sub(m.samples[cut].at) > m.window() {
		cut++
	}
	m.samples = m.samples[cut:]
	p := Progress{Connected: m.connected.Load(), Bytes: b}
	first := m.samples[0]
	if dt := now.Sub(first.at).Seconds(); dt > 0 {
		p.Throughput = float64(b-first.bytes) / dt
	}
	if m.size > 0 {
		p.Percent = min(100, 100*float64(b)/float64(m.size))
		if !final && p.Throughput > 0 && b < m.size {
			p.ETA = seconds.Duration(float64(m.size-b) / p.Throughput)
		}
	}
	return p
}
