// Package impexp moves one disk's data between two nodes, or two clusters,
// over a TLS 1.3 stream: Ganeti's import/export daemon done in-process.
//
// The exporter (Send) dials the importer (Listener.Receive). Each end
// presents its own certificate and accepts exactly one certificate from the
// other end, compared byte for byte: no CA, no chain, no hostname. Inside
// TLS the exporter writes, through the chosen compressor, the bytes
// "M=<magic>" followed by the disk data, as Ganeti does; the importer
// decompresses, checks the magic and copies the rest to its writer.
//
// Two additions over Ganeti's one-way socat pipe make a cut-off transfer
// impossible to mistake for a finished one. The compressed bytes travel in
// length-prefixed frames ending with an empty frame (frame.go), because a
// dropped TCP connection can look like a clean TLS end. And the importer
// answers with a single byte 'K' once everything it received is stored;
// the exporter reports success only after reading it.
package impexp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
)

// Compression names a stream compressor (Ganeti's compress values plus
// zstd).
type Compression string

// The compressors. gzip and gzip-fast are the same (level 1), as in Ganeti.
const (
	None     Compression = "none"
	Gzip     Compression = "gzip"
	GzipFast Compression = "gzip-fast"
	GzipSlow Compression = "gzip-slow"
	Zstd     Compression = "zstd"
)

// compressions lists the valid names, in the order errors show them.
func compressions() []Compression { return []Compression{None, Gzip, GzipFast, GzipSlow, Zstd} }

// ParseCompression checks a compression name; the empty string means None.
func ParseCompression(s string) (Compression, error) {
	if s == "" {
		return None, nil
	}
	names := make([]string, 0, 5)
	for _, c := range compressions() {
		if string(c) == s {
			return c, nil
		}
		names = append(names, string(c))
	}
	return "", ecode.Errorf(ecode.Inval, "unknown compression %q, valid ones are: %s", s, strings.Join(names, ", "))
}

// Progress is a snapshot of one transfer.
type Progress struct {
	Connected  bool
	Bytes      int64         // payload bytes moved so far (uncompressed disk data, magic excluded)
	Throughput float64       // bytes/s over a recent window (not since start)
	ETA        time.Duration // 0 when unknown
	Percent    float64       // 0..100, 0 when the size is unknown
}

// Config is one end's transfer settings.
type Config struct {
	Cert     tls.Certificate   // this end's certificate and key
	Peer     *x509.Certificate // the ONLY certificate the other end may present
	Magic    string            // must match ^[-_.a-zA-Z0-9]{5,100}$
	Compress Compression
	// Stream is the wire format, the same at both ends: StreamCorral
	// (also the empty value) between Corral nodes, StreamGaneti with a
	// Ganeti node (StreamFor decides from the peer's certificate).
	Stream Stream
	// Size is the expected payload in bytes, 0 when unknown. It feeds
	// progress; an import with Size > 0 also rejects a stream that is
	// shorter or longer.
	Size int64
	// ConnectTimeout: for an export, each connect attempt (default 20 s);
	// for an import, the wait for the one good connection (default 60 s).
	ConnectTimeout time.Duration
	// ConnectRetries is how many more attempts an export makes after the
	// first one fails to connect, 1 s apart (default 0).
	ConnectRetries int
	// Progress, when set, is called at most once per ProgressInterval and
	// once at the end, never concurrently with itself.
	Progress         func(Progress)
	ProgressInterval time.Duration // default 1 s
	Logger           *slog.Logger  // optional
}

const (
	defaultExportConnectTimeout = 20 * time.Second
	defaultImportConnectTimeout = 60 * time.Second
	defaultProgressInterval     = time.Second
	// retryDelay separates an export's connect attempts (socat's intervall=1).
	retryDelay = time.Second
	// copyBufferSize is the chunk both ends move data in (socat's -b 1 MiB).
	copyBufferSize = 1 << 20
	// netBufferSize batches compressor output into full TLS records.
	netBufferSize = 256 << 10
	// clockSkew is how far a peer's certificate may look not yet valid:
	// clusters' clocks differ a little, and the certificate is minutes old.
	clockSkew = 5 * time.Minute
	// handshakeTimeout bounds one TLS handshake on the import side, so a
	// silent connection cannot hold a slot until the import times out.
	handshakeTimeout = 10 * time.Second
)

// check validates cfg and fills in defaults (defConnect for the side).
func (cfg Config) check(defConnect time.Duration, now time.Time) (Config, error) {
	if !pki.ValidMagic(cfg.Magic) {
		return cfg, ecode.Errorf(ecode.Inval, "invalid magic value (must be 5 to 100 characters of a-z, A-Z, 0-9, '-', '_' and '.')")
	}
	c, err := ParseCompression(string(cfg.Compress))
	if err != nil {
		return cfg, err
	}
	cfg.Compress = c
	switch cfg.Stream {
	case "":
		cfg.Stream = StreamCorral
	case StreamCorral, StreamGaneti:
	default:
		return cfg, ecode.Errorf(ecode.Inval, "unknown stream format %q", cfg.Stream)
	}
	if len(cfg.Cert.Certificate) == 0 || cfg.Cert.PrivateKey == nil {
		return cfg, ecode.Errorf(ecode.Inval, "no certificate and key for this end of the transfer")
	}
	if cfg.Peer == nil || len(cfg.Peer.Raw) == 0 {
		return cfg, ecode.Errorf(ecode.Inval, "no peer certificate for the transfer")
	}
	if err := checkValidity(cfg.Peer, now); err != nil {
		return cfg, ecode.Errorf(ecode.Inval, "peer certificate: %w", err)
	}
	if cfg.Size < 0 {
		return cfg, ecode.Errorf(ecode.Inval, "negative expected size %d", cfg.Size)
	}
	if cfg.ConnectRetries < 0 {
		return cfg, ecode.Errorf(ecode.Inval, "negative connect retries %d", cfg.ConnectRetries)
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = defConnect
	}
	if cfg.ProgressInterval <= 0 {
		cfg.ProgressInterval = defaultProgressInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg, nil
}

// checkValidity rejects a certificate outside its validity window at now,
// allowing clockSkew before NotBefore.
func checkValidity(c *x509.Certificate, now time.Time) error {
	if now.After(c.NotAfter) {
		return fmt.Errorf("certificate expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Add(clockSkew).Before(c.NotBefore) {
		return fmt.Errorf("certificate is not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}
