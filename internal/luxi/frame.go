package luxi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
)

// ETX ends every LUXI message. JSON never contains a raw 0x03 (control
// characters are escaped inside strings), so it is a safe delimiter.
const ETX byte = 0x03

// ErrFrameTooLarge is returned by ReadFrame when a message exceeds its limit.
var ErrFrameTooLarge = errors.New("luxi: message too large")

// ReadFrame reads one ETX-terminated message and returns it without the ETX.
// The returned slice is freshly allocated, so r's buffer may be reused or
// released as soon as ReadFrame returns. A stream that ends cleanly before a
// new message gives io.EOF; one that ends inside a message gives
// io.ErrUnexpectedEOF. A message longer than max bytes gives ErrFrameTooLarge
// (the rest of the stream is then unusable).
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	var frame []byte
	for {
		chunk, err := r.ReadSlice(ETX)
		switch {
		case err == nil:
			chunk = chunk[:len(chunk)-1]
			if len(frame)+len(chunk) > max {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, max)
			}
			if frame == nil {
				// Common case: the whole message sat in the buffer.
				return bytes.Clone(chunk), nil
			}
			return append(frame, chunk...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(frame)+len(chunk) > max {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, max)
			}
			frame = append(frame, chunk...)
		case errors.Is(err, io.EOF):
			if len(frame) == 0 && len(chunk) == 0 {
				return nil, io.EOF
			}
			if len(frame)+len(chunk) > max {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, max)
			}
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// WriteFrame writes msg followed by ETX. On a network connection both parts
// go out in one writev, so a reader never sees a message without its end
// marker for long. msg must not contain ETX.
func WriteFrame(w io.Writer, msg []byte) error {
	if bytes.IndexByte(msg, ETX) >= 0 {
		return errors.New("luxi: message contains the ETX delimiter")
	}
	bufs := net.Buffers{msg, []byte{ETX}}
	_, err := bufs.WriteTo(w)
	return err
}
