package impexp

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

// These tests run the other end as Ganeti 3.0's import/export daemon runs
// it: the same socat addresses and options (lib/impexpd), the same shell
// pipeline around it (magic, dd, gzip), under bash -o errexit -o pipefail.

// socatOpenSSLOpts are Ganeti's TCP and OpenSSL options for both roles
// (Debian builds Ganeti with compress=none).
const socatOpenSSLOpts = "keepalive,keepidle=60,keepintvl=10,keepcnt=5,verify=1,cipher=HIGH:-DES:-3DES:-EXPORT:-DH,compress=none"

// ganetiCompressCmd and ganetiDecompressCmd are the pipeline stages
// Ganeti puts around socat for each compression ("" for none).
func ganetiCompressCmd(c Compression) string {
	switch c {
	case Gzip, GzipFast:
		return "gzip -1 -c"
	case GzipSlow:
		return "gzip -c"
	case None:
		return ""
	}
	return string(c)
}

func ganetiDecompressCmd(c Compression) string {
	switch c {
	case Gzip, GzipFast, GzipSlow:
		return "gzip -d -c"
	case None:
		return ""
	}
	return string(c) + " -d"
}

// ganetiSide is a Ganeti node's transfer identity: a certificate as
// Ganeti's GenerateSelfSignedX509Cert makes it (RSA 2048, CN = host name,
// no extension at all), its key and files for socat.
type ganetiSide struct {
	cert     testCert
	certFile string
	keyFile  string
	dir      string
}

func newGanetiSide(t testing.TB, cn string) ganetiSide {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:       big.NewInt(now.Unix()),
		Subject:            pkix.Name{CommonName: cn},
		NotBefore:          now.Add(-time.Second),
		NotAfter:           now.Add(time.Hour),
		SignatureAlgorithm: x509.SHA256WithRSA,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	if len(leaf.Extensions) != 0 {
		t.Fatalf("a Ganeti-like certificate has extensions %v", leaf.Extensions)
	}
	dir := t.TempDir()
	g := ganetiSide{cert: testCert{tls: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, leaf: leaf},
		certFile: filepath.Join(dir, "cert"), keyFile: filepath.Join(dir, "key"), dir: dir}
	writePEM(t, g.certFile, "CERTIFICATE", der)
	writePEM(t, g.keyFile, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	return g
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// corralSide is a Corral node's transfer identity, made as nodes make it.
func corralSide(t testing.TB, name string) (testCert, string) {
	t.Helper()
	certPEM, keyPEM, err := pki.NewTransferCert(name, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "corral-cert")
	if err := os.WriteFile(f, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return testCert{tls: c, leaf: c.Leaf}, f
}

func needSocat(t testing.TB) {
	t.Helper()
	for _, p := range []string{"socat", "bash", "dd", "gzip"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed: %v", p, err)
		}
	}
}

// ganetiExportCmd is Ganeti's export pipeline from a file to host:port.
func ganetiExportCmd(g ganetiSide, caFile, magic string, c Compression, src, host string, port int) string {
	parts := []string{fmt.Sprintf("{ echo -E -n M=%s && { LC_ALL=C dd bs=1048576 <&0 2>/dev/null; }; } < %s", magic, src)}
	if cmd := ganetiCompressCmd(c); cmd != "" {
		parts = append(parts, cmd)
	}
	parts = append(parts, fmt.Sprintf("socat -ls -d -d -b1048576 -u stdin OPENSSL:%s:%d,connect-timeout=20,retry=10,intervall=1,%s,key=%s,cert=%s,cafile=%s,pf=ipv4,openssl-commonname=%s 2>%s",
		host, port, socatOpenSSLOpts, g.keyFile, g.certFile, caFile, pki.GanetiTransferName, filepath.Join(g.dir, "socat.log")))
	return strings.Join(parts, " | ")
}

// ganetiImportCmd is Ganeti's import pipeline listening on any port and
// writing into dst.
func ganetiImportCmd(g ganetiSide, caFile, magic string, c Compression, dst string) string {
	parts := []string{fmt.Sprintf("socat -ls -d -d -b1048576 -u OPENSSL-LISTEN:0,reuseaddr,forever,intervall=0.01,%s,key=%s,cert=%s,cafile=%s,pf=ipv4 stdout 2>%s",
		socatOpenSSLOpts, g.keyFile, g.certFile, caFile, filepath.Join(g.dir, "socat.log"))}
	if cmd := ganetiDecompressCmd(c); cmd != "" {
		parts = append(parts, cmd)
	}
	m := "M=" + magic
	parts = append(parts, fmt.Sprintf(`{ read -n %d magic && if test "$magic" != %s; then echo 'Magic value mismatch' >&2; exit 1; fi; { LC_ALL=C dd bs=1048576 <&0 2>/dev/null; }; } > %s`, len(m), m, dst))
	return strings.Join(parts, " | ")
}

func runBash(t testing.TB, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-o", "errexit", "-o", "pipefail", "-c", script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Its own process group, so that stopping it reaches socat and the
	// pipeline's other commands.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPipeline(cmd) })
	return cmd
}

// stopPipeline kills a pipeline runBash started, if it still runs.
func stopPipeline(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}
}

var listeningRE = regexp.MustCompile(`listening on AF=\d+ \S+:(\d+)`)

// socatPort waits for socat's "listening on" notice, as Ganeti's daemon
// learns its port.
func socatPort(t testing.TB, log string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(log)
		if m := listeningRE.FindSubmatch(b); m != nil {
			p, _ := strconv.Atoi(string(m[1]))
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("socat did not listen:\n%s", readFile(log))
	return 0
}

func readFile(p string) string { b, _ := os.ReadFile(p); return string(b) }

var ganetiCompressions = []Compression{None, Gzip, GzipFast, GzipSlow}

// TestGanetiExporterToCorral: a Ganeti exporter's socat sends to a Corral
// import in the Ganeti stream, for every compression Ganeti has by
// default; the bytes arrive intact and the import ends cleanly.
func TestGanetiExporterToCorral(t *testing.T) {
	needSocat(t)
	for _, c := range ganetiCompressions {
		t.Run(string(c), func(t *testing.T) {
			g := newGanetiSide(t, "gnode.example.com")
			me, meFile := corralSide(t, "cnode.example.com")
			data := testData(t, 3<<20+12345)
			src := filepath.Join(t.TempDir(), "disk")
			if err := os.WriteFile(src, data, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := Config{Cert: me.tls, Peer: g.cert.leaf, Magic: testMagic, Compress: c, Stream: StreamFor(g.cert.leaf),
				Size: int64(len(data)), ConnectTimeout: 20 * time.Second, Logger: testLogger(t)}
			if cfg.Stream != StreamGaneti {
				t.Fatalf("StreamFor(Ganeti certificate) = %s", cfg.Stream)
			}
			l, err := Listen(cfg, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var got lockedBuffer
			ch := receiveAsync(t.Context(), l, &got)
			cmd := runBash(t, ganetiExportCmd(g, meFile, testMagic, c, src, "127.0.0.1", l.Port()))
			if err := cmd.Wait(); err != nil {
				t.Fatalf("Ganeti's export pipeline: %v\n%s\n%s", err, cmd.Stderr, readFile(filepath.Join(g.dir, "socat.log")))
			}
			r := wait(t, ch)
			if r.err != nil {
				t.Fatalf("Receive: %v", r.err)
			}
			if r.n != int64(len(data)) || sum(got.Bytes()) != sum(data) {
				t.Fatalf("received %d bytes, want %d intact", r.n, len(data))
			}
		})
	}
}

// TestCorralToGanetiImporter: a Corral export sends to a Ganeti import
// daemon's socat and pipeline, which checks the magic and stores the
// bytes; Send succeeds only after the importer has ended.
func TestCorralToGanetiImporter(t *testing.T) {
	needSocat(t)
	for _, c := range ganetiCompressions {
		t.Run(string(c), func(t *testing.T) {
			g := newGanetiSide(t, "gnode.example.com")
			me, meFile := corralSide(t, "cnode.example.com")
			dst := filepath.Join(t.TempDir(), "received")
			cmd := runBash(t, ganetiImportCmd(g, meFile, testMagic, c, dst))
			port := socatPort(t, filepath.Join(g.dir, "socat.log"))
			data := testData(t, 3<<20+777)
			cfg := Config{Cert: me.tls, Peer: g.cert.leaf, Magic: testMagic, Compress: c, Stream: StreamGaneti,
				Size: int64(len(data)), Logger: testLogger(t)}
			n, err := Send(t.Context(), cfg, fmt.Sprintf("127.0.0.1:%d", port), bytes.NewReader(data))
			if err != nil {
				t.Fatalf("Send: %v\n%s", err, readFile(filepath.Join(g.dir, "socat.log")))
			}
			if n != int64(len(data)) {
				t.Fatalf("sent %d of %d bytes", n, len(data))
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("Ganeti's import pipeline: %v\n%s\n%s", err, cmd.Stderr, readFile(filepath.Join(g.dir, "socat.log")))
			}
			if got, _ := os.ReadFile(dst); sum(got) != sum(data) {
				t.Fatalf("the importer stored %d bytes, not the %d sent", len(got), len(data))
			}
		})
	}
}

// TestGanetiImporterRefusesWrongMagic: Ganeti's importer checks the magic
// and exits 1; the Corral exporter then fails too.
func TestGanetiImporterRefusesWrongMagic(t *testing.T) {
	needSocat(t)
	g := newGanetiSide(t, "gnode.example.com")
	me, meFile := corralSide(t, "cnode.example.com")
	cmd := runBash(t, ganetiImportCmd(g, meFile, "the-expected-magic", None, filepath.Join(t.TempDir(), "x")))
	port := socatPort(t, filepath.Join(g.dir, "socat.log"))
	cfg := Config{Cert: me.tls, Peer: g.cert.leaf, Magic: "another-magic", Compress: None, Stream: StreamGaneti, Logger: testLogger(t)}
	_, serr := Send(t.Context(), cfg, fmt.Sprintf("127.0.0.1:%d", port), bytes.NewReader(testData(t, 8<<20)))
	werr := cmd.Wait()
	if werr == nil || !strings.Contains(fmt.Sprint(cmd.Stderr), "Magic value mismatch") {
		t.Fatalf("Ganeti's importer: %v %s, want a magic mismatch", werr, cmd.Stderr)
	}
	if serr == nil {
		t.Fatal("Send succeeded into an importer that refused the stream")
	}
}

// TestGanetiCertificatesArePinned: each side refuses a peer presenting
// another certificate than the one it was given, in both roles.
func TestGanetiCertificatesArePinned(t *testing.T) {
	needSocat(t)
	t.Run("corral import unexpected exporter", func(t *testing.T) {
		g, other := newGanetiSide(t, "gnode.example.com"), newGanetiSide(t, "gnode.example.com")
		me, meFile := corralSide(t, "cnode.example.com")
		cfg := Config{Cert: me.tls, Peer: other.cert.leaf, Magic: testMagic, Stream: StreamGaneti,
			ConnectTimeout: 3 * time.Second, Logger: testLogger(t)}
		l, err := Listen(cfg, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var got lockedBuffer
		ch := receiveAsync(t.Context(), l, &got)
		src := filepath.Join(t.TempDir(), "disk")
		if err := os.WriteFile(src, testData(t, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := runBash(t, strings.Replace(ganetiExportCmd(g, meFile, testMagic, None, src, "127.0.0.1", l.Port()), "retry=10", "retry=0", 1))
		if err := cmd.Wait(); err == nil {
			t.Error("socat sent with a certificate the importer does not pin")
		}
		r := wait(t, ch)
		if !errors.Is(r.err, ErrNoConnection) || len(got.Bytes()) != 0 {
			t.Fatalf("Receive: %v with %d bytes, want no connection and nothing", r.err, len(got.Bytes()))
		}
	})
	t.Run("corral export unexpected importer", func(t *testing.T) {
		g, other := newGanetiSide(t, "gnode.example.com"), newGanetiSide(t, "gnode.example.com")
		me, meFile := corralSide(t, "cnode.example.com")
		dst := filepath.Join(t.TempDir(), "received")
		cmd := runBash(t, ganetiImportCmd(g, meFile, testMagic, None, dst))
		port := socatPort(t, filepath.Join(g.dir, "socat.log"))
		cfg := Config{Cert: me.tls, Peer: other.cert.leaf, Magic: testMagic, Stream: StreamGaneti, Logger: testLogger(t)}
		_, err := Send(t.Context(), cfg, fmt.Sprintf("127.0.0.1:%d", port), bytes.NewReader(testData(t, 1<<20)))
		if err == nil || !isCertFailure(err) {
			t.Fatalf("Send: %v, want a refused certificate", err)
		}
		stopPipeline(cmd)
		if b, _ := os.ReadFile(dst); len(b) != 0 {
			t.Fatalf("the importer stored %d bytes", len(b))
		}
	})
	t.Run("ganeti export certificate without the name", func(t *testing.T) {
		// Ganeti 3.0's exporter checks the name ganeti.example.com: a
		// certificate without it is refused, which is why Corral's
		// transfer certificates carry it.
		g := newGanetiSide(t, "gnode.example.com")
		bare := newGanetiSide(t, "cnode.example.com")
		cfg := Config{Cert: bare.cert.tls, Peer: g.cert.leaf, Magic: testMagic, Stream: StreamGaneti,
			ConnectTimeout: 3 * time.Second, Logger: testLogger(t)}
		l, err := Listen(cfg, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ch := receiveAsync(t.Context(), l, &lockedBuffer{})
		src := filepath.Join(t.TempDir(), "disk")
		if err := os.WriteFile(src, testData(t, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := runBash(t, strings.Replace(ganetiExportCmd(g, bare.certFile, testMagic, None, src, "127.0.0.1", l.Port()), "retry=10", "retry=0", 1))
		if err := cmd.Wait(); err == nil {
			t.Fatal("Ganeti's exporter accepted a certificate without its name")
		}
		if log := readFile(filepath.Join(g.dir, "socat.log")); !strings.Contains(log, "commonName does not match") {
			t.Errorf("socat's refusal is not the name check:\n%s", log)
		}
		wait(t, ch)
	})
}
