package impexp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Go's TLS reports a peer's bare TCP close at a record boundary as io.EOF,
// exactly like a close_notify, so the end of the TLS stream cannot prove
// that the exporter meant to stop there. The (compressed) stream is
// therefore carried in frames: a 4-byte big-endian length, then that many
// bytes; a frame of length 0 ends the stream. A missing end frame is a
// truncated stream whatever the compression.

// frameHeaderLen is the size of a frame's length prefix.
const frameHeaderLen = 4

// maxFrameLen bounds one frame; the writer never makes frames above the
// copy buffer size, so anything larger is a corrupt stream.
const maxFrameLen = 16 << 20

// errFrame reports a malformed frame header.
var errFrame = errors.New("malformed frame")

// frameWriter collects writes into frames of up to netBufferSize bytes,
// each sent with a single Write (one copy, full TLS records). A large write
// arriving while nothing is buffered is framed in place instead.
type frameWriter struct {
	w   io.Writer
	buf []byte // buf[:frameHeaderLen] is the header of the frame being filled
	n   int    // payload bytes buffered
}

func newFrameWriter(w io.Writer) *frameWriter {
	return &frameWriter{w: w, buf: make([]byte, frameHeaderLen+netBufferSize)}
}

func (f *frameWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		if f.n == 0 && len(p) >= netBufferSize {
			chunk := p[:min(len(p), copyBufferSize)]
			var hdr [frameHeaderLen]byte
			binary.BigEndian.PutUint32(hdr[:], uint32(len(chunk)))
			if _, err := f.w.Write(hdr[:]); err != nil {
				return total - len(p), err
			}
			if _, err := f.w.Write(chunk); err != nil {
				return total - len(p), err
			}
			p = p[len(chunk):]
			continue
		}
		k := copy(f.buf[frameHeaderLen+f.n:], p)
		f.n += k
		p = p[k:]
		if f.n == netBufferSize {
			if err := f.flush(); err != nil {
				return total - len(p), err
			}
		}
	}
	return total, nil
}

// flush sends the buffered frame, if any.
func (f *frameWriter) flush() error {
	if f.n == 0 {
		return nil
	}
	binary.BigEndian.PutUint32(f.buf[:frameHeaderLen], uint32(f.n))
	_, err := f.w.Write(f.buf[:frameHeaderLen+f.n])
	f.n = 0
	return err
}

// end sends what is buffered and the end frame.
func (f *frameWriter) end() error {
	if err := f.flush(); err != nil {
		return err
	}
	var hdr [frameHeaderLen]byte
	_, err := f.w.Write(hdr[:])
	return err
}

// frameReader reads the frames' contents; io.EOF comes only from the end
// frame, a stream that stops before it gives io.ErrUnexpectedEOF.
type frameReader struct {
	r    io.Reader
	left int // bytes left in the current frame
	err  error
	hdr  [frameHeaderLen]byte
}

func (f *frameReader) Read(p []byte) (int, error) {
	for f.left == 0 {
		if f.err != nil {
			return 0, f.err
		}
		if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			f.err = err
			return 0, err
		}
		n := binary.BigEndian.Uint32(f.hdr[:])
		if n > maxFrameLen {
			f.err = fmt.Errorf("%w: length %d", errFrame, n)
			return 0, f.err
		}
		if n == 0 {
			f.err = io.EOF
			return 0, io.EOF
		}
		f.left = int(n)
	}
	if len(p) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= n
	if errors.Is(err, io.EOF) {
		if f.left > 0 {
			err = io.ErrUnexpectedEOF
			f.err = err
		} else {
			err = nil
		}
	} else if err != nil {
		f.err = err
	}
	return n, err
}
