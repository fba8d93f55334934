package harness

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TLSEndpoint is one end's identity for a transfer baseline: a self-signed
// certificate that the other end trusts as its only CA, the way Ganeti
// pins the peer's certificate in the CA file of a transfer.
type TLSEndpoint struct {
	Name     string // subject CN and DNS name, checked by the peer
	Cert     tls.Certificate
	Leaf     *x509.Certificate
	PEMPath  string // certificate and key, for socat's cert=
	CertPath string // certificate alone, for the peer's cafile=
}

// NewTLSEndpoint makes a fresh key and a certificate for name and the
// addresses ips, and writes both PEM files into dir.
func NewTLSEndpoint(dir, name string, ips ...net.IP) (*TLSEndpoint, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the key of %s: %w", name, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		DNSNames:     []string{name},
		IPAddresses:  append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		// OpenSSL takes a self-signed certificate as a trust anchor only
		// when it may sign certificates.
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the certificate of %s: %w", name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	e := &TLSEndpoint{
		Name:     name,
		Cert:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Leaf:     leaf,
		PEMPath:  filepath.Join(dir, name+".pem"),
		CertPath: filepath.Join(dir, name+".crt"),
	}
	if err := os.WriteFile(e.PEMPath, append(certPEM, keyPEM...), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(e.CertPath, certPEM, 0o600); err != nil {
		return nil, err
	}
	return e, nil
}

// Pool is a certificate pool holding only this endpoint's certificate.
func (e *TLSEndpoint) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(e.Leaf)
	return p
}

// socatCiphers and socatBuffer are the settings Ganeti's import-export
// daemon gives socat.
const (
	socatCiphers = "HIGH:-DES:-3DES:-EXPORT:-DH"
	socatBuffer  = "1048576"
)

// Socat is Ganeti's transport: an OPENSSL-LISTEN socat writing a file, an
// OPENSSL socat reading one, each end verifying the other against the
// peer's certificate as its only CA.
type Socat struct {
	Recv, Send *TLSEndpoint
	// Listen is the address the receiver binds (default 127.0.0.1); the
	// sender connects to it.
	Listen string
	// Compressor, "gzip" or "zstd", makes both ends shell pipelines with
	// the tool at fast settings; "" sends the file as it is.
	Compressor string
	// Sync makes the receiver fdatasync the file before it exits, as a
	// durable import must.
	Sync bool
}

// Start starts the receiving socat, writing dst, and returns the timed
// part: the sender reading src, then the wait for the receiver. cleanup
// stops a receiver still running.
func (s Socat) Start(ctx context.Context, src, dst string) (timed func() error, cleanup func(), err error) {
	host := s.Listen
	if host == "" {
		host = "127.0.0.1"
	}
	listen := fmt.Sprintf("OPENSSL-LISTEN:0,bind=%s,reuseaddr,cert=%s,cafile=%s,verify=1,cipher=%s",
		host, s.Recv.PEMPath, s.Send.CertPath, socatCiphers)
	recvCmd := fmt.Sprintf("exec socat -d -d -u -b %s %s STDOUT > %s", socatBuffer, ShellQuote(listen), ShellQuote(dst))
	if s.Compressor != "" {
		recvCmd = fmt.Sprintf("socat -d -d -u -b %s %s STDOUT | %s -d -c > %s",
			socatBuffer, ShellQuote(listen), s.Compressor, ShellQuote(dst))
	}
	if s.Sync {
		recvCmd = strings.TrimPrefix(recvCmd, "exec ") + " && sync -d " + ShellQuote(dst)
	}
	recv := Shell(ctx, recvCmd)
	notices := newNoticeWatcher()
	recv.Stderr = notices
	if err := recv.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting the receiving socat: %w", err)
	}
	var recvErr error
	recvDone := make(chan struct{})
	go func() { recvErr = recv.Wait(); close(recvDone) }()
	cleanup = func() {
		select {
		case <-recvDone:
		default:
			_ = recv.Cancel()
			<-recvDone
		}
	}
	var p int
	select {
	case p = <-notices.port:
	case <-recvDone:
	case <-time.After(10 * time.Second):
	}
	if p == 0 {
		cleanup()
		return nil, nil, fmt.Errorf("the receiving socat did not listen: %v: %s", recvErr, notices)
	}
	connect := fmt.Sprintf("OPENSSL:%s:%d,cert=%s,cafile=%s,verify=1,cn=%s,cipher=%s",
		host, p, s.Send.PEMPath, s.Recv.CertPath, s.Recv.Name, socatCiphers)
	sendCmd := fmt.Sprintf("exec socat -u -b %s STDIN %s < %s", socatBuffer, ShellQuote(connect), ShellQuote(src))
	if s.Compressor != "" {
		sendCmd = fmt.Sprintf("%s -1 -c < %s | socat -u -b %s STDIN %s",
			s.Compressor, ShellQuote(src), socatBuffer, ShellQuote(connect))
	}
	timed = func() error {
		send := Shell(ctx, sendCmd)
		var sendLog bytes.Buffer
		send.Stderr = &sendLog
		if err := send.Run(); err != nil {
			cleanup()
			return fmt.Errorf("sending socat: %w: %s", err, strings.TrimSpace(sendLog.String()))
		}
		<-recvDone
		if recvErr != nil {
			return fmt.Errorf("receiving socat: %w: %s", recvErr, notices)
		}
		return nil
	}
	return timed, cleanup, nil
}

// Shell runs script under bash with pipefail, in its own process group so
// that cancelling ends the whole pipeline.
func Shell(ctx context.Context, script string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "bash", "-o", "errexit", "-o", "pipefail", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// ShellQuote quotes s for bash.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var listenRE = regexp.MustCompile(`listening on .*:(\d+)\s*$`)

// noticeWatcher is the receiving end's stderr: it sends the port of
// socat's -d -d "listening on" notice once and keeps the last lines for
// error messages.
type noticeWatcher struct {
	port  chan int
	mu    sync.Mutex
	sent  bool
	part  []byte
	lines []string
}

func newNoticeWatcher() *noticeWatcher { return &noticeWatcher{port: make(chan int, 1)} }

func (w *noticeWatcher) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.part = append(w.part, b...)
	for {
		i := bytes.IndexByte(w.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(w.part[:i])
		w.part = w.part[i+1:]
		w.lines = append(w.lines, line)
		if len(w.lines) > 30 {
			w.lines = w.lines[1:]
		}
		if m := listenRE.FindStringSubmatch(line); m != nil && !w.sent {
			p, _ := strconv.Atoi(m[1])
			w.port <- p
			w.sent = true
		}
	}
}

func (w *noticeWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(append(w.lines, string(w.part)), " | ")
}
