package luxi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
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

// replyBuf assembles a success reply in a reused buffer.
type replyBuf struct {
	b   bytes.Buffer
	enc *json.Encoder // writes to b
}

// success encodes result as a success reply followed by ETX, byte for byte
// what json.Marshal of the reply envelope gives (encodeSuccess), without
// encoding the result twice.
func (rb *replyBuf) success(result any) error {
	rb.b.Reset()
	rb.b.WriteString(`{"success":true,"result":`)
	// Encoder escapes HTML as json.Marshal does; it writes nothing on error.
	if err := rb.enc.Encode(result); err != nil {
		return fmt.Errorf("encoding result: %w", err)
	}
	rb.b.Truncate(rb.b.Len() - 1) // Encode's trailing newline
	rb.b.WriteString("}\x03")
	return nil
}

// failureFrame is encodeFailure's reply followed by ETX.
func failureFrame(err error) []byte {
	return append(encodeFailure(err), ETX)
}

// ErrFrameBudget is what an inbox reports when a request would take the
// memory budget for requests being received beyond its limit.
var ErrFrameBudget = errors.New("luxi: request memory budget exhausted")

// inbox cuts a connection's incoming bytes into messages. It holds a
// buffer from pool only while bytes of an unfinished message are pending,
// so an idle connection holds none; it reads straight into that buffer,
// without a copy through a bufio.Reader.
//
// The memory an unfinished message holds (the buffer, and long) is taken
// from budget, shared by all connections, and so is a message assembled
// in long until the caller gives back the cost next returns with it.
// Messages that fit the buffer cost nothing: the budget is never touched
// on the fast path.
type inbox struct {
	pool    *sync.Pool // of *[readBufSize]byte
	max     int        // message size limit
	budget  *frameBudget
	buf     *[readBufSize]byte
	r, w    int    // buf[r:w] is unconsumed
	scanned int    // buf[r:scanned] holds no ETX
	long    []byte // the start of a message longer than the buffer
	// bufTaken tells whether buf is taken from the budget (it is while a
	// message is pending); long's capacity always is.
	bufTaken bool
}

// space returns where the next read should go, borrowing a buffer if none
// is held. It is never empty: next makes room after every read.
func (in *inbox) space() []byte {
	if in.buf == nil {
		in.buf = in.pool.Get().(*[readBufSize]byte)
		in.r, in.w, in.scanned = 0, 0, 0
	}
	return in.buf[in.w:]
}

// commit records that n bytes were read into space.
func (in *inbox) commit(n int) { in.w += n }

// pending reports whether part of a message has arrived.
func (in *inbox) pending() bool { return in.buf != nil || in.long != nil }

// release returns the buffer if it holds nothing pending.
func (in *inbox) release() {
	if in.buf != nil && in.r == in.w {
		in.putBuf()
	}
}

func (in *inbox) putBuf() {
	in.pool.Put(in.buf)
	in.buf = nil
	if in.bufTaken {
		in.budget.give(readBufSize)
		in.bufTaken = false
	}
}

// drop returns the buffer whatever it holds: the connection is done.
func (in *inbox) drop() {
	if in.buf != nil {
		in.putBuf()
	}
	in.budget.give(int64(cap(in.long)))
	in.long = nil
}

// next returns the next complete message (without its ETX, in a fresh
// slice), or ok false if more bytes must be read first. cost is what the
// message holds of the budget: the caller gives it back once done with
// msg. A message longer than max gives ErrFrameTooLarge, one the budget
// cannot hold ErrFrameBudget; after either the stream is unusable.
func (in *inbox) next() (msg []byte, cost int64, ok bool, err error) {
	if in.buf == nil {
		return nil, 0, false, nil
	}
	i := bytes.IndexByte(in.buf[in.scanned:in.w], ETX)
	if i < 0 {
		return nil, 0, false, in.keepPartial()
	}
	end := in.scanned + i
	if len(in.long)+end-in.r > in.max {
		return nil, 0, false, fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, in.max)
	}
	if in.long != nil {
		if err := in.growLong(end - in.r); err != nil {
			return nil, 0, false, err
		}
		msg, cost, in.long = append(in.long, in.buf[in.r:end]...), int64(cap(in.long)), nil
	} else {
		msg = append(make([]byte, 0, end-in.r), in.buf[in.r:end]...)
	}
	in.r, in.scanned = end+1, end+1
	in.release()
	return msg, cost, true, nil
}

// keepPartial keeps the start of a message until the rest arrives, making
// room in the buffer for it, and takes the memory that holds from the
// budget.
func (in *inbox) keepPartial() error {
	in.scanned = in.w
	if len(in.long)+in.w-in.r > in.max {
		return fmt.Errorf("%w: more than %d bytes", ErrFrameTooLarge, in.max)
	}
	if in.r < in.w && !in.bufTaken {
		if !in.budget.take(readBufSize) {
			return ErrFrameBudget
		}
		in.bufTaken = true
	}
	switch {
	case in.w < len(in.buf):
	case in.r > 0:
		// Make room behind the partial message.
		n := copy(in.buf[:], in.buf[in.r:in.w])
		in.r, in.w, in.scanned = 0, n, n
	default:
		// The buffer holds only part of one message: set it aside.
		if err := in.growLong(in.w); err != nil {
			return err
		}
		in.long = append(in.long, in.buf[:in.w]...)
		in.r, in.w, in.scanned = 0, 0, 0
	}
	return nil
}

// growLong makes room in long for n more bytes, doubling its capacity up
// to max, and takes the growth from the budget.
func (in *inbox) growLong(n int) error {
	need := len(in.long) + n
	if need <= cap(in.long) {
		return nil
	}
	size := max(need, min(2*cap(in.long), in.max))
	if !in.budget.take(int64(size - cap(in.long))) {
		return ErrFrameBudget
	}
	grown := make([]byte, len(in.long), size)
	copy(grown, in.long)
	in.long = grown
	return nil
}

// decodeCall is DecodeRequest on the server's hot path. A request in the
// shape clients send (a plain ASCII method, no escapes in the keys) is
// split in one pass over the bytes, once they are known to be valid JSON,
// instead of being decoded into a map and then each part again. Anything else goes to DecodeRequest,
// which decides and words the errors. The arguments alias msg.
func decodeCall(msg []byte) (string, []json.RawMessage, error) {
	if method, args, ok := splitRequest(msg); ok {
		return method, args, nil
	}
	return DecodeRequest(msg)
}

// splitRequest is decodeCall's fast path; ok false means "ask
// DecodeRequest", never that the request is wrong.
func splitRequest(msg []byte) (method string, args []json.RawMessage, ok bool) {
	if !json.Valid(msg) {
		return "", nil, false
	}
	// From here msg is valid JSON, so the skips below cannot go astray;
	// the bounds checks only guard against a mistake in them.
	i := skipSpace(msg, 0)
	if i >= len(msg) || msg[i] != '{' {
		return "", nil, false
	}
	var rawMethod, rawArgs []byte
	i = skipSpace(msg, i+1)
	for i < len(msg) && msg[i] != '}' {
		if msg[i] != '"' {
			return "", nil, false
		}
		kend := skipString(msg, i)
		key := msg[i+1 : kend-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return "", nil, false
		}
		i = skipSpace(msg, kend)
		if i >= len(msg) || msg[i] != ':' {
			return "", nil, false
		}
		i = skipSpace(msg, i+1)
		vend := skipValue(msg, i)
		val := msg[i:vend]
		// Later duplicates win, as when decoding into a map. Any other
		// key, "version" among them, is ignored.
		switch string(key) {
		case keyMethod:
			rawMethod = val
		case keyArgs:
			rawArgs = val
		}
		i = skipSpace(msg, vend)
		if i < len(msg) && msg[i] == ',' {
			i = skipSpace(msg, i+1)
		}
	}
	if len(rawMethod) < 3 || rawMethod[0] != '"' || len(rawArgs) < 2 || rawArgs[0] != '[' {
		return "", nil, false
	}
	for _, b := range rawMethod[1 : len(rawMethod)-1] {
		// Escapes and non-ASCII (invalid UTF-8 is replaced when decoded)
		// take the slow path.
		if b == '\\' || b < 0x20 || b >= 0x7f {
			return "", nil, false
		}
	}
	args = make([]json.RawMessage, 0, 6) // WaitForJobChange has 5
	j := skipSpace(rawArgs, 1)
	for j < len(rawArgs) && rawArgs[j] != ']' {
		end := skipValue(rawArgs, j)
		args = append(args, rawArgs[j:end:end])
		j = skipSpace(rawArgs, end)
		if j < len(rawArgs) && rawArgs[j] == ',' {
			j = skipSpace(rawArgs, j+1)
		}
	}
	return string(rawMethod[1 : len(rawMethod)-1]), args, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the valid JSON value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	// A number, true, false or null.
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return i
		}
		i++
	}
	return i
}
