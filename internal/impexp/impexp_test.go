package impexp

import (
	"bytes"
	"crypto/tls"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
)

func TestParseCompression(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Compression
		ok   bool
	}{
		{"", None, true},
		{"none", None, true},
		{"gzip", Gzip, true},
		{"gzip-fast", GzipFast, true},
		{"gzip-slow", GzipSlow, true},
		{"zstd", Zstd, true},
		{"lzop", "", false},
		{"GZIP", "", false},
		{"gzip ", "", false},
	} {
		got, err := ParseCompression(tc.in)
		if tc.ok {
			if err != nil || got != tc.want {
				t.Errorf("ParseCompression(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseCompression(%q) accepted", tc.in)
			continue
		}
		if ecode.ClassOf(err) != ecode.Inval || !strings.Contains(err.Error(), "gzip-slow") || !strings.Contains(err.Error(), "zstd") {
			t.Errorf("ParseCompression(%q) error %v: want an Inval error listing the valid names", tc.in, err)
		}
	}
}

// TestCompressionsOfTheOpcodes: the stream implements exactly the
// compressions the opcodes accept (the magic's rules are pki's, tested
// there).
func TestCompressionsOfTheOpcodes(t *testing.T) {
	if len(compressions()) != len(opcodes.Compressions) {
		t.Fatalf("impexp implements %v, the opcodes accept %v", compressions(), opcodes.Compressions)
	}
	for _, name := range opcodes.Compressions {
		if c, err := ParseCompression(name); err != nil || string(c) != name {
			t.Errorf("ParseCompression(%q) = %q, %v", name, c, err)
		}
	}
}

func TestConfigChecks(t *testing.T) {
	imp, _ := pairConfigs(t, None)
	expired := newTestCert(t, "old", time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	future := newTestCert(t, "future", time.Now().Add(time.Hour), time.Now().Add(2*time.Hour))
	noSAN := validCert(t, "nosan")
	noSANLeaf := *noSAN.leaf
	noSANLeaf.DNSNames = nil
	for name, mut := range map[string]func(*Config){
		"bad magic":    func(c *Config) { c.Magic = "a b" },
		"short magic":  func(c *Config) { c.Magic = "abc" },
		"compression":  func(c *Config) { c.Compress = "lzop" },
		"no cert":      func(c *Config) { c.Cert.Certificate = nil },
		"no peer":      func(c *Config) { c.Peer = nil },
		"expired peer": func(c *Config) { c.Peer = expired.leaf },
		"future peer":  func(c *Config) { c.Peer = future.leaf },
		"negative":     func(c *Config) { c.Size = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			c := imp
			mut(&c)
			if l, err := Listen(c, "127.0.0.1:0"); err == nil {
				l.Close()
				t.Fatal("Listen accepted the configuration")
			} else if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("Listen: %v, want an Inval error", err)
			}
			if _, err := Send(t.Context(), c, "127.0.0.1:1", bytes.NewReader(nil)); ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("Send: %v, want an Inval error", err)
			}
		})
	}
	c := imp
	c.Peer = &noSANLeaf
	if _, err := Send(t.Context(), c, "127.0.0.1:1", bytes.NewReader(nil)); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("Send to a peer without SAN: %v, want an Inval error", err)
	}
}

func TestVerifyPeer(t *testing.T) {
	now := time.Now()
	c := newTestCert(t, "peer", now, now.Add(time.Hour))
	other := newTestCert(t, "peer", now, now.Add(time.Hour))
	for _, tc := range []struct {
		name string
		raw  [][]byte
		at   time.Time
		ok   bool
	}{
		{"exact", [][]byte{c.leaf.Raw}, now, true},
		{"exact with extra chain", [][]byte{c.leaf.Raw, other.leaf.Raw}, now, true},
		{"other", [][]byte{other.leaf.Raw}, now, false},
		{"pinned second", [][]byte{other.leaf.Raw, c.leaf.Raw}, now, false},
		{"none", nil, now, false},
		{"expired", [][]byte{c.leaf.Raw}, now.Add(2 * time.Hour), false},
		{"slightly early", [][]byte{c.leaf.Raw}, now.Add(-time.Minute), true},
		{"too early", [][]byte{c.leaf.Raw}, now.Add(-time.Hour), false},
	} {
		err := verifyPeer(c.leaf, tc.raw, tc.at)
		if (err == nil) != tc.ok {
			t.Errorf("%s: verifyPeer = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errPeerCert) {
			t.Errorf("%s: error %v does not wrap errPeerCert", tc.name, err)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	data := testData(t, 2<<20+12345)
	for _, c := range compressions() {
		for _, sized := range []bool{false, true} {
			if sized && c != None && c != Zstd {
				continue // the size check does not depend on the compressor
			}
			name := string(c)
			if sized {
				name += "/sized"
			}
			t.Run(name, func(t *testing.T) {
				imp, exp := pairConfigs(t, c)
				var progMu sync.Mutex
				var impLast, expLast Progress
				calls := 0
				imp.Progress = func(p Progress) { progMu.Lock(); impLast = p; calls++; progMu.Unlock() }
				imp.ProgressInterval = 5 * time.Millisecond
				exp.Progress = func(p Progress) { progMu.Lock(); expLast = p; progMu.Unlock() }
				if sized {
					imp.Size = int64(len(data))
					exp.Size = int64(len(data))
				}
				l, err := Listen(imp, "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				ch := receiveAsync(t.Context(), l, &got)
				n, err := Send(t.Context(), exp, addr(l), bytes.NewReader(data))
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				r := wait(t, ch)
				if r.err != nil {
					t.Fatalf("Receive: %v", r.err)
				}
				if n != int64(len(data)) || r.n != n {
					t.Fatalf("sent %d, received %d, want %d", n, r.n, len(data))
				}
				if sum(got.Bytes()) != sum(data) {
					t.Fatal("received data differs from the sent data")
				}
				progMu.Lock()
				defer progMu.Unlock()
				if calls == 0 || !impLast.Connected || impLast.Bytes != n || !expLast.Connected || expLast.Bytes != n {
					t.Fatalf("final progress import %+v export %+v (calls %d)", impLast, expLast, calls)
				}
				if sized && (impLast.Percent != 100 || expLast.Percent != 100) {
					t.Fatalf("final percent import %v export %v, want 100", impLast.Percent, expLast.Percent)
				}
				if !sized && impLast.Percent != 0 {
					t.Fatalf("percent %v with unknown size", impLast.Percent)
				}
			})
		}
	}
}

func TestEmptyPayload(t *testing.T) {
	imp, exp := pairConfigs(t, Zstd)
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	ch := receiveAsync(t.Context(), l, &got)
	if n, err := Send(t.Context(), exp, addr(l), bytes.NewReader(nil)); err != nil || n != 0 {
		t.Fatalf("Send = %d, %v", n, err)
	}
	if r := wait(t, ch); r.err != nil || r.n != 0 || got.Len() != 0 {
		t.Fatalf("Receive = %d, %v (%d bytes)", r.n, r.err, got.Len())
	}
}

// TestWrongServerCert: the exporter pins a certificate the importer does
// not have; it must refuse at once, and the importer never gets data.
func TestWrongServerCert(t *testing.T) {
	imp, exp := pairConfigs(t, None)
	exp.Peer = validCert(t, "node-import").leaf // same name, other key
	exp.ConnectRetries = 3
	imp.ConnectTimeout = 500 * time.Millisecond
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)
	start := time.Now()
	_, err = Send(t.Context(), exp, addr(l), bytes.NewReader(testData(t, 1<<16)))
	if err == nil || !isCertFailure(err) {
		t.Fatalf("Send: %v, want a certificate rejection", err)
	}
	if time.Since(start) >= retryDelay {
		t.Errorf("Send retried after a certificate rejection")
	}
	r := wait(t, ch)
	if !errors.Is(r.err, ErrNoConnection) {
		t.Fatalf("Receive: %v, want ErrNoConnection", r.err)
	}
	if len(got.Bytes()) != 0 {
		t.Fatal("data reached the writer")
	}
}

// TestWrongClientCert: an exporter with another certificate is refused in
// its handshake; the importer keeps waiting and takes the good one.
func TestWrongClientCert(t *testing.T) {
	imp, exp := pairConfigs(t, Gzip)
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)

	bad := exp
	bad.Cert = validCert(t, "node-export").tls
	if _, err := Send(t.Context(), bad, addr(l), strings.NewReader("evil data")); err == nil {
		t.Fatal("Send with the wrong client certificate succeeded")
	}
	expired := exp
	expired.Cert = newTestCert(t, "node-export", time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)).tls
	if _, err := Send(t.Context(), expired, addr(l), strings.NewReader("old data")); err == nil {
		t.Fatal("Send with an expired client certificate succeeded")
	}
	if len(got.Bytes()) != 0 {
		t.Fatal("data of a rejected peer reached the writer")
	}
	data := testData(t, 1<<20)
	if _, err := Send(t.Context(), exp, addr(l), bytes.NewReader(data)); err != nil {
		t.Fatalf("good Send after bad ones: %v", err)
	}
	if r := wait(t, ch); r.err != nil {
		t.Fatalf("Receive: %v", r.err)
	}
	if sum(got.Bytes()) != sum(data) {
		t.Fatal("received data differs")
	}
}

func TestWrongClientCertTimesOut(t *testing.T) {
	imp, exp := pairConfigs(t, None)
	imp.ConnectTimeout = 700 * time.Millisecond
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)
	exp.Cert = validCert(t, "intruder").tls
	if _, err := Send(t.Context(), exp, addr(l), strings.NewReader("M=evil")); err == nil {
		t.Fatal("Send with the wrong client certificate succeeded")
	}
	r := wait(t, ch)
	if !errors.Is(r.err, ErrNoConnection) || len(got.Bytes()) != 0 {
		t.Fatalf("Receive = %v with %d bytes written, want ErrNoConnection and nothing", r.err, len(got.Bytes()))
	}
}

func TestWrongMagic(t *testing.T) {
	for _, c := range []Compression{None, Zstd} {
		t.Run(string(c), func(t *testing.T) {
			imp, exp := pairConfigs(t, c)
			exp.Magic = "another-magic"
			l, err := Listen(imp, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var got lockedBuffer
			ch := receiveAsync(t.Context(), l, &got)
			_, serr := Send(t.Context(), exp, addr(l), bytes.NewReader(testData(t, 1<<20)))
			r := wait(t, ch)
			if !errors.Is(r.err, ErrMagicMismatch) || !strings.Contains(r.err.Error(), "magic value mismatch") {
				t.Fatalf("Receive: %v, want a magic value mismatch", r.err)
			}
			if serr == nil {
				t.Fatal("Send succeeded although the importer refused the stream")
			}
			if len(got.Bytes()) != 0 {
				t.Fatal("data reached the writer")
			}
		})
	}
}

// TestTransferCertInterop runs a transfer with the certificates nodes
// really use (pki.NewTransferCert: RSA, CN repeated as a DNS SAN).
func TestTransferCertInterop(t *testing.T) {
	load := func(name string) testCert {
		certPEM, keyPEM, err := pki.NewTransferCert(name, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return testCert{tls: c, leaf: c.Leaf}
	}
	a, b := load("node1.example.com"), load("192.0.2.7")
	imp := Config{Cert: a.tls, Peer: b.leaf, Magic: testMagic, Compress: Zstd, Logger: testLogger(t)}
	exp := Config{Cert: b.tls, Peer: a.leaf, Magic: testMagic, Compress: Zstd, Logger: testLogger(t)}
	l, err := Listen(imp, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var got lockedBuffer
	ch := receiveAsync(t.Context(), l, &got)
	data := testData(t, 256<<10)
	if _, err := Send(t.Context(), exp, addr(l), bytes.NewReader(data)); err != nil {
		t.Fatalf("Send: %v", err)
	}
	if r := wait(t, ch); r.err != nil || sum(got.Bytes()) != sum(data) {
		t.Fatalf("Receive: %v", r.err)
	}
}
