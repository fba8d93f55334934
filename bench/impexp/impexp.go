package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/corral/corral/internal/impexp"
)

// impexpCases are Corral's own transport, one case per compression, plus
// the uncompressed transfer as an import really runs it: the importer
// writes the file back while it arrives and syncs it before
// acknowledging.
func impexpCases(e *env) []namedCase {
	return []namedCase{
		{name: "impexp", run: e.impexp(impexp.None, false)},
		{name: "impexp+gzip", run: e.impexp(impexp.Gzip, false)},
		{name: "impexp+zstd", run: e.impexp(impexp.Zstd, false)},
		{name: "impexp+fsync", run: e.impexp(impexp.None, true)},
		// Ganeti's stream (no frames, no acknowledgement), as Corral
		// speaks it with a Ganeti node.
		{name: "impexp-ganeti", run: e.impexpStream(impexp.None, false, impexp.StreamGaneti)},
		{name: "impexp-ganeti+gzip", run: e.impexpStream(impexp.Gzip, false, impexp.StreamGaneti)},
	}
}

// noSync hides *os.File's Sync from the importer, which syncs a writer
// that has one: the other cases leave their copy in the page cache too.
type noSync struct{ w io.Writer }

func (n noSync) Write(p []byte) (int, error) { return n.w.Write(p) }

func (e *env) impexp(c impexp.Compression, sync bool) transfer {
	return e.impexpStream(c, sync, impexp.StreamCorral)
}

func (e *env) impexpStream(c impexp.Compression, sync bool, stream impexp.Stream) transfer {
	return func(ctx context.Context, src, dst string) (func() error, func(), error) {
		fi, err := os.Stat(src)
		if err != nil {
			return nil, nil, err
		}
		base := impexp.Config{Magic: "corral-bench.disk0", Compress: c, Size: fi.Size(), Stream: stream}
		rcfg, scfg := base, base
		rcfg.Cert, rcfg.Peer = e.recv.Cert, e.send.Leaf
		scfg.Cert, scfg.Peer = e.send.Cert, e.recv.Leaf
		l, err := impexp.Listen(rcfg, "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		cleanup := func() { l.Close() }
		timed := func() error {
			out, err := os.Create(dst)
			if err != nil {
				return err
			}
			in, err := os.Open(src)
			if err != nil {
				out.Close()
				return err
			}
			defer in.Close()
			var w io.Writer = noSync{out}
			if sync {
				// As the node daemon writes an import: written back
				// while it arrives, synced before the acknowledgement.
				wb, err := impexp.NewWritebackFile(out)
				if err != nil {
					out.Close()
					return err
				}
				defer wb.Abandon()
				w = wb
			}
			recvErr := make(chan error, 1)
			go func() {
				_, err := l.Receive(ctx, w)
				recvErr <- errors.Join(err, out.Close())
			}()
			_, sendErr := impexp.Send(ctx, scfg, fmt.Sprintf("127.0.0.1:%d", l.Port()), in)
			if sendErr != nil {
				l.Close()
				sendErr = fmt.Errorf("send: %w", sendErr)
			}
			if err := <-recvErr; err != nil {
				return errors.Join(sendErr, fmt.Errorf("receive: %w", err))
			}
			return sendErr
		}
		return timed, cleanup, nil
	}
}
