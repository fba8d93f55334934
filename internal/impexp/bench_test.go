package impexp

import (
	"bytes"
	"crypto/rand"
	"io"
	"log/slog"
	"testing"
)

// BenchmarkSend moves 64 MiB of random (incompressible) data over loopback
// per compression, both ends in this process.
func BenchmarkSend(b *testing.B) {
	data := make([]byte, 64<<20)
	if _, err := rand.Read(data); err != nil {
		b.Fatal(err)
	}
	for _, c := range compressions() {
		b.Run(string(c), func(b *testing.B) {
			imp, exp := pairConfigs(b, c)
			imp.Logger = slog.New(slog.DiscardHandler)
			exp.Logger = imp.Logger
			imp.Size = int64(len(data))
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				l, err := Listen(imp, "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				ch := receiveAsync(b.Context(), l, io.Discard)
				if _, err := Send(b.Context(), exp, addr(l), bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
				if r := <-ch; r.err != nil {
					b.Fatal(r.err)
				}
			}
		})
	}
}
