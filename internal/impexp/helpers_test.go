package impexp

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// testCert is one end's identity.
type testCert struct {
	tls  tls.Certificate
	leaf *x509.Certificate
}

// newTestCert makes a self-signed ECDSA certificate shaped like a transfer
// certificate: CN and DNS SAN = name, usable for server and client auth.
func newTestCert(t testing.TB, name string, notBefore, notAfter time.Time) testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		DNSNames:              []string{name},
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return testCert{tls: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf: leaf}
}

func validCert(t testing.TB, name string) testCert {
	now := time.Now()
	return newTestCert(t, name, now.Add(-time.Minute), now.Add(time.Hour))
}

const testMagic = "0123456789abcdef-test.magic_value"

// pairConfigs returns an importer and an exporter configuration that
// trust each other.
func pairConfigs(t testing.TB, c Compression) (imp, exp Config) {
	t.Helper()
	a, b := validCert(t, "node-import"), validCert(t, "node-export")
	imp = Config{Cert: a.tls, Peer: b.leaf, Magic: testMagic, Compress: c, ConnectTimeout: 10 * time.Second, Logger: testLogger(t)}
	exp = Config{Cert: b.tls, Peer: a.leaf, Magic: testMagic, Compress: c, ConnectTimeout: 5 * time.Second, Logger: testLogger(t)}
	return imp, exp
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// testData is n bytes, half random and half repetitive, so compressors
// have something to do and corruption cannot hide.
func testData(t testing.TB, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b[:n/2]); err != nil {
		t.Fatal(err)
	}
	for i := n / 2; i < n; i++ {
		b[i] = byte(i / 4096)
	}
	return b
}

func sum(b []byte) [32]byte { return sha256.Sum256(b) }

type result struct {
	n   int64
	err error
}

// receiveAsync starts Receive and returns its result channel.
func receiveAsync(ctx context.Context, l *Listener, w io.Writer) <-chan result {
	ch := make(chan result, 1)
	go func() {
		n, err := l.Receive(ctx, w)
		ch <- result{n, err}
	}()
	return ch
}

func addr(l *Listener) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port())) }

// lockedBuffer is a writer safe to read after the transfer ends.
type lockedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	return len(p), nil
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]byte(nil), l.b...)
}

// msgHandler forwards log messages to a channel, so a test can wait for
// an event the code logs instead of sleeping.
type msgHandler struct{ ch chan<- string }

func (h msgHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h msgHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h msgHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h msgHandler) WithGroup(string) slog.Handler      { return h }

func wait(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Receive did not return")
		return result{}
	}
}
