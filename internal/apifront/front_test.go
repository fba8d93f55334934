package apifront

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
)

// TestFrontServesEachAPIOnItsListener: two APIs, each on its own port with
// its own certificate; a renewed certificate is served without a restart,
// Reload reaches the APIs that have one, and ending the context stops
// both listeners.
func TestFrontServesEachAPIOnItsListener(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM())
	var reloads atomic.Int64
	var services []*Service
	for _, name := range []string{"one", "two"} {
		l := Listen{Bind: "127.0.0.1", CertFile: filepath.Join(dir, name+".crt"), KeyFile: filepath.Join(dir, name+".key")}
		writePair(t, ca, name, l.CertFile, l.KeyFile)
		s := &Service{Name: name, Listen: l, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "api "+name)
		})}
		if name == "one" {
			s.Reload = func() error { reloads.Add(1); return nil }
		}
		services = append(services, s)
	}
	f, err := Open(slog.New(slog.DiscardHandler), services...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Serve(ctx) }()

	get := func(name, serverName string) (string, error) {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName}}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get("https://" + f.Addr(name) + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for _, name := range []string{"one", "two"} {
		if body, err := get(name, name); err != nil || body != "api "+name {
			t.Errorf("%s: %q, %v", name, body, err)
		}
	}
	if f.Addr("one") == f.Addr("two") {
		t.Errorf("both APIs on %s", f.Addr("one"))
	}
	// Renew one's certificate under another name: the next handshake
	// presents it.
	writePair(t, ca, "renewed", services[0].Listen.CertFile, services[0].Listen.KeyFile)
	later := time.Now().Add(time.Minute)
	for _, p := range []string{services[0].Listen.CertFile, services[0].Listen.KeyFile} {
		if err := os.Chtimes(p, later, later); err != nil {
			t.Fatal(err)
		}
	}
	if body, err := get("one", "renewed"); err != nil || body != "api one" {
		t.Errorf("after renewal: %q, %v", body, err)
	}
	f.Reload()
	if n := reloads.Load(); n != 1 {
		t.Errorf("%d reloads, want 1", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	for _, name := range []string{"one", "two"} {
		if _, err := net.DialTimeout("tcp", f.Addr(name), time.Second); err == nil {
			t.Errorf("%s still accepts connections after shutdown", name)
		}
	}
}

// TestFrontOpenFails: a missing key pair or a taken port fails Open, with
// the API named, and leaves no listener behind.
func TestFrontOpenFails(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	good := Listen{Bind: "127.0.0.1", CertFile: filepath.Join(dir, "a.crt"), KeyFile: filepath.Join(dir, "a.key")}
	writePair(t, ca, "a", good.CertFile, good.KeyFile)
	log := slog.New(slog.DiscardHandler)
	missing := good
	missing.CertFile = filepath.Join(dir, "none.crt")
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := good
	first.Port = free.Addr().(*net.TCPAddr).Port
	free.Close()
	if _, err := Open(log, &Service{Name: "first", Listen: first}, &Service{Name: "nokey", Listen: missing}); err == nil || !strings.Contains(err.Error(), "nokey") {
		t.Errorf("missing certificate: %v", err)
	}
	// The first API's listener was closed again.
	again, err := net.Listen("tcp", first.Addr())
	if err != nil {
		t.Errorf("the first API's port is still taken: %v", err)
	} else {
		again.Close()
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := good
	busy.Port = taken.Addr().(*net.TCPAddr).Port
	if _, err := Open(log, &Service{Name: "busy", Listen: busy}); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Errorf("taken port: %v", err)
	}
}
