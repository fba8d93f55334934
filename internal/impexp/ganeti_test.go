package impexp

import (
	"bytes"
	stdgzip "compress/gzip"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestGanetiStreamCutOffIsTruncated: a Ganeti-stream import of unknown
// size (an OS import script) takes a connection dropped without TLS
// close_notify for a broken stream, not for the end of the disk.
func TestGanetiStreamCutOffIsTruncated(t *testing.T) {
	for _, cut := range []bool{true, false} {
		name := map[bool]string{true: "dropped", false: "close_notify"}[cut]
		t.Run(name, func(t *testing.T) {
			g := newGanetiSide(t, "gnode.example.com")
			me, _ := corralSide(t, "cnode.example.com")
			cfg := Config{Cert: me.tls, Peer: g.cert.leaf, Magic: testMagic, Stream: StreamGaneti,
				ConnectTimeout: 10 * time.Second, Logger: testLogger(t)}
			l, err := Listen(cfg, "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var got lockedBuffer
			ch := receiveAsync(t.Context(), l, &got)
			conn, err := tls.Dial("tcp", addr(l), &tls.Config{Certificates: []tls.Certificate{g.cert.tls}, InsecureSkipVerify: true})
			if err != nil {
				t.Fatal(err)
			}
			data := testData(t, 1<<20)
			if _, err := conn.Write(append([]byte("M="+testMagic), data...)); err != nil {
				t.Fatal(err)
			}
			if cut {
				conn.NetConn().Close()
			} else {
				conn.Close()
			}
			r := wait(t, ch)
			if cut && !errors.Is(r.err, ErrTruncated) {
				t.Fatalf("Receive: %v, want a truncated stream", r.err)
			}
			if !cut && (r.err != nil || sum(got.Bytes()) != sum(data)) {
				t.Fatalf("Receive: %v, %d bytes", r.err, len(got.Bytes()))
			}
		})
	}
}

// TestStreamFor: Corral's transfer certificates get Corral's stream,
// anything else Ganeti's.
func TestStreamFor(t *testing.T) {
	c, _ := corralSide(t, "node1.example.com")
	g := newGanetiSide(t, "node1.example.com")
	if s := StreamFor(c.leaf); s != StreamCorral {
		t.Errorf("Corral certificate: %s", s)
	}
	if s := StreamFor(g.cert.leaf); s != StreamGaneti {
		t.Errorf("Ganeti certificate: %s", s)
	}
}

// FuzzReadGanetiStream feeds arbitrary plaintext to the Ganeti stream's
// reader: it never panics, and whatever it accepts is exactly the data
// after the magic, as an independent decoder sees it.
func FuzzReadGanetiStream(f *testing.F) {
	const magic = "fuzz-magic"
	f.Add([]byte("M="+magic+"hello"), false)
	f.Add([]byte("M=other"), false)
	var z bytes.Buffer
	zw := stdgzip.NewWriter(&z)
	zw.Write([]byte("M=" + magic + "compressed data"))
	zw.Close()
	f.Add(z.Bytes(), true)
	f.Add(z.Bytes()[:z.Len()-3], true)
	f.Fuzz(func(t *testing.T, data []byte, gz bool) {
		c := None
		if gz {
			c = Gzip
		}
		var out bytes.Buffer
		m := newMeter(Config{})
		n, err := readGanetiStream(bytes.NewReader(data), c, magic, 0, &out, m, func() error { return nil })
		m.finish()
		if err != nil {
			return
		}
		plain := data
		if gz {
			zr, zerr := stdgzip.NewReader(bytes.NewReader(data))
			if zerr != nil {
				t.Fatalf("accepted a stream the gzip decoder refuses: %v", zerr)
			}
			if plain, zerr = io.ReadAll(zr); zerr != nil {
				t.Fatalf("accepted a stream the gzip decoder refuses: %v", zerr)
			}
		}
		want := "M=" + magic
		if !bytes.HasPrefix(plain, []byte(want)) {
			t.Fatalf("accepted a stream without the magic: %q", plain)
		}
		if !bytes.Equal(out.Bytes(), plain[len(want):]) || n != int64(out.Len()) {
			t.Fatalf("wrote %q (%d), want %q", out.Bytes(), n, plain[len(want):])
		}
	})
}

var _ net.Conn = (*eofConn)(nil)
