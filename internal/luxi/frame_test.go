package luxi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestReadFrame(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name    string
		in      string
		bufSize int
		max     int
		want    []string
		wantErr error // after the frames in want
	}{
		{name: "one", in: "{}\x03", max: 10, want: []string{"{}"}, wantErr: io.EOF},
		{name: "two back to back", in: "a\x03b\x03", max: 10, want: []string{"a", "b"}, wantErr: io.EOF},
		{name: "empty frame", in: "\x03", max: 10, want: []string{""}, wantErr: io.EOF},
		{name: "empty stream", in: "", max: 10, wantErr: io.EOF},
		{name: "truncated", in: "a\x03bc", max: 10, want: []string{"a"}, wantErr: io.ErrUnexpectedEOF},
		{name: "exactly max", in: "abcd\x03", max: 4, want: []string{"abcd"}, wantErr: io.EOF},
		{name: "over max", in: "abcde\x03", max: 4, wantErr: ErrFrameTooLarge},
		{name: "over max without end", in: "abcde", max: 4, wantErr: ErrFrameTooLarge},
		{name: "spans buffer", in: long + "\x03" + long + "\x03", bufSize: 16, max: 200, want: []string{long, long}, wantErr: io.EOF},
		{name: "spans buffer over max", in: long + "\x03", bufSize: 16, max: 50, wantErr: ErrFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			size := tt.bufSize
			if size == 0 {
				size = 4096
			}
			r := bufio.NewReaderSize(strings.NewReader(tt.in), size)
			for i, want := range tt.want {
				got, err := ReadFrame(r, tt.max)
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if string(got) != want {
					t.Fatalf("frame %d = %q, want %q", i, got, want)
				}
			}
			_, err := ReadFrame(r, tt.max)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("final error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// The returned frame must not alias the reader's buffer, which the server
// hands back to a pool.
func TestReadFrameCopies(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("abc\x03def\x03"))
	first, err := ReadFrame(r, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFrame(r, 10); err != nil {
		t.Fatal(err)
	}
	r.Reset(strings.NewReader("zzzzzzzz\x03"))
	if _, err := ReadFrame(r, 10); err != nil {
		t.Fatal(err)
	}
	if string(first) != "abc" {
		t.Fatalf("first frame changed to %q", first)
	}
}

func TestWriteFrame(t *testing.T) {
	var b bytes.Buffer
	if err := WriteFrame(&b, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "{\"a\":1}\x03"; got != want {
		t.Fatalf("wrote %q, want %q", got, want)
	}
	b.Reset()
	if err := WriteFrame(&b, []byte("a\x03b")); err == nil {
		t.Fatal("a message containing ETX was written")
	}
	if b.Len() != 0 {
		t.Fatalf("wrote %q for a rejected message", b.String())
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte("{}\x03"), 16)
	f.Add([]byte("a\x03b\x03c"), 1)
	f.Add([]byte(""), 0)
	f.Add([]byte("\x03\x03\x03"), 5)
	f.Add(bytes.Repeat([]byte("y"), 40), 30)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		r := bufio.NewReaderSize(bytes.NewReader(in), 16)
		var rebuilt []byte
		for {
			frame, err := ReadFrame(r, max)
			if err != nil {
				if errors.Is(err, io.EOF) && !bytes.Equal(rebuilt, in) {
					t.Fatalf("clean EOF after %q of %q", rebuilt, in)
				}
				if !bytes.HasPrefix(in, rebuilt) {
					t.Fatalf("frames %q are not a prefix of %q", rebuilt, in)
				}
				return
			}
			if len(frame) > max {
				t.Fatalf("frame of %d bytes exceeds max %d", len(frame), max)
			}
			if bytes.IndexByte(frame, ETX) >= 0 {
				t.Fatalf("frame %q contains ETX", frame)
			}
			rebuilt = append(append(rebuilt, frame...), ETX)
		}
	})
}

// feedInbox cuts in into messages the way the server does, handing the
// inbox chunk bytes per read. end is "eof" (clean), "partial" (the stream
// stopped inside a message) or "too large".
func feedInbox(in []byte, chunk, max int) (msgs []string, end string) {
	pool := &sync.Pool{New: func() any { return new([readBufSize]byte) }}
	box := inbox{pool: pool, max: max}
	defer box.drop()
	for {
		msg, _, ok, err := box.next()
		if err != nil {
			return msgs, "too large"
		}
		if ok {
			msgs = append(msgs, string(msg))
			continue
		}
		if len(in) == 0 {
			if box.pending() {
				return msgs, "partial"
			}
			return msgs, "eof"
		}
		sp := box.space()
		n := copy(sp[:min(chunk, len(sp))], in)
		box.commit(n)
		in = in[n:]
	}
}

func TestInbox(t *testing.T) {
	big := strings.Repeat("b", readBufSize+100)
	huge := strings.Repeat("h", 3*readBufSize)
	tests := []struct {
		name  string
		in    string
		chunk int
		max   int
		want  []string
		end   string
	}{
		{name: "one", in: "{}\x03", chunk: 100, max: 10, want: []string{"{}"}, end: "eof"},
		{name: "byte at a time", in: "ab\x03cd\x03", chunk: 1, max: 10, want: []string{"ab", "cd"}, end: "eof"},
		{name: "empty frame", in: "\x03\x03", chunk: 5, max: 10, want: []string{"", ""}, end: "eof"},
		{name: "nothing", in: "", chunk: 5, max: 10, end: "eof"},
		{name: "stops inside", in: "a\x03bc", chunk: 2, max: 10, want: []string{"a"}, end: "partial"},
		{name: "exactly max", in: "abcd\x03", chunk: 3, max: 4, want: []string{"abcd"}, end: "eof"},
		{name: "over max", in: "abcde\x03", chunk: 100, max: 4, end: "too large"},
		{name: "over max, no end yet", in: "ok\x03abcdefgh", chunk: 100, max: 4, want: []string{"ok"}, end: "too large"},
		{name: "longer than the buffer", in: big + "\x03x\x03", chunk: 5000, max: 1 << 20, want: []string{big, "x"}, end: "eof"},
		{name: "several buffers long", in: "a\x03" + huge + "\x03", chunk: readBufSize, max: 1 << 20, want: []string{"a", huge}, end: "eof"},
		{name: "long over max", in: huge + "\x03", chunk: readBufSize, max: 2 * readBufSize, end: "too large"},
		{name: "message straddles the buffer end", in: strings.Repeat("c", readBufSize-2) + "\x03" + "defg\x03", chunk: readBufSize,
			max: 1 << 20, want: []string{strings.Repeat("c", readBufSize-2), "defg"}, end: "eof"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs, end := feedInbox([]byte(tt.in), tt.chunk, tt.max)
			if end != tt.end {
				t.Errorf("ended %q, want %q", end, tt.end)
			}
			if len(msgs) != len(tt.want) {
				t.Fatalf("got %d messages, want %d", len(msgs), len(tt.want))
			}
			for i := range msgs {
				if msgs[i] != tt.want[i] {
					t.Errorf("message %d: %d bytes %.20q, want %d bytes %.20q", i, len(msgs[i]), msgs[i], len(tt.want[i]), tt.want[i])
				}
			}
		})
	}
}

// The inbox gives its buffer back whenever no message is pending.
func TestInboxReleasesBuffer(t *testing.T) {
	box := inbox{pool: &sync.Pool{New: func() any { return new([readBufSize]byte) }}, max: 100}
	n := copy(box.space(), "a\x03b")
	box.commit(n)
	if _, _, ok, _ := box.next(); !ok || box.buf == nil {
		t.Fatalf("after the first message: ok=%v, buffer held %v (want held: %q pending)", ok, box.buf != nil, "b")
	}
	box.commit(copy(box.space(), "\x03"))
	if msg, _, ok, _ := box.next(); !ok || string(msg) != "b" {
		t.Fatalf("second message %q %v", msg, ok)
	}
	if box.buf != nil || box.pending() {
		t.Fatal("buffer still held with nothing pending")
	}
	// A read that found nothing gives the buffer back too.
	box.space()
	box.release()
	if box.buf != nil {
		t.Fatal("empty buffer not released")
	}
}

// The inbox must cut the stream exactly as ReadFrame does, however the
// bytes arrive.
func FuzzInbox(f *testing.F) {
	f.Add([]byte("{}\x03"), 1, 16)
	f.Add([]byte("a\x03b\x03c"), 2, 1)
	f.Add([]byte(""), 1, 0)
	f.Add([]byte("\x03\x03\x03"), 3, 5)
	f.Add(bytes.Repeat([]byte("y"), 40), 7, 30)
	f.Add(append(bytes.Repeat([]byte("z"), readBufSize+3), ETX), readBufSize-1, 1<<20)
	f.Fuzz(func(t *testing.T, in []byte, chunk, max int) {
		if max < 0 || max > 1<<20 || chunk <= 0 {
			return
		}
		msgs, end := feedInbox(in, chunk, max)
		r := bufio.NewReader(bytes.NewReader(in))
		for i := 0; ; i++ {
			frame, err := ReadFrame(r, max)
			if err != nil {
				want := map[error]string{io.EOF: "eof", io.ErrUnexpectedEOF: "partial"}[err]
				if errors.Is(err, ErrFrameTooLarge) {
					want = "too large"
				}
				if i != len(msgs) || end != want {
					t.Fatalf("inbox gave %d messages then %q; ReadFrame %d then %v", len(msgs), end, i, err)
				}
				return
			}
			if i >= len(msgs) || msgs[i] != string(frame) {
				t.Fatalf("message %d differs from ReadFrame's %q (inbox: %d messages, %q)", i, frame, len(msgs), end)
			}
		}
	})
}

func TestSplitRequest(t *testing.T) {
	tests := []struct {
		name string
		in   string
		fast bool // taken by the fast path
	}{
		{"typical", `{"method":"WaitForJobChange","args":[12,["status"],["running"],3,29.5],"version":3010000}`, true},
		{"spaces everywhere", " {\n\"args\" : [ 1 , [ \"a\" , {\"b\" : [ ]} ] , null ] ,\t\"method\" : \"X\" } ", true},
		{"no version", `{"method":"X","args":[]}`, true},
		{"null version", `{"method":"X","args":[true],"version":null}`, true},
		{"strings with brackets", `{"method":"X","args":["]}\"[{",{"k\"}":"}"}]}`, true},
		{"extra keys", `{"x":{"method":"no"},"method":"X","args":[-1.5e3],"y":[]}`, true},
		{"later key wins", `{"method":"A","args":[1],"method":"B","args":[2]}`, true},
		{"escaped method", `{"method":"\u0058","args":[]}`, false},
		{"escaped key", `{"m\u0065thod":"X","args":[]}`, false},
		{"non-ASCII method", `{"method":"é","args":[]}`, false},
		{"Ganeti 3.0 version", `{"method":"X","args":[],"version":3000000}`, true},
		{"other version", `{"method":"X","args":[],"version":2160000}`, true},
		{"version as float", `{"method":"X","args":[],"version":3010000.0}`, true},
		{"version as string", `{"method":"X","args":[],"version":"2.16"}`, true},
		{"empty method", `{"method":"","args":[]}`, false},
		{"args not a list", `{"method":"X","args":{}}`, false},
		{"no args", `{"method":"X"}`, false},
		{"invalid JSON", `{"method":"X","args":[}`, false},
		{"not an object", `["method","X"]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, fast := splitRequest([]byte(tt.in))
			if fast != tt.fast {
				t.Errorf("fast path taken: %v, want %v", fast, tt.fast)
			}
			checkDecodeCall(t, []byte(tt.in))
		})
	}
}

// checkDecodeCall requires decodeCall to answer exactly as DecodeRequest.
func checkDecodeCall(t *testing.T, in []byte) {
	t.Helper()
	m1, a1, err1 := decodeCall(in)
	m2, a2, err2 := DecodeRequest(in)
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("%q: decodeCall error %v, DecodeRequest %v", in, err1, err2)
	}
	if m1 != m2 || len(a1) != len(a2) {
		t.Fatalf("%q: decodeCall %q %q, DecodeRequest %q %q", in, m1, a1, m2, a2)
	}
	for i := range a1 {
		if !bytes.Equal(a1[i], a2[i]) {
			t.Fatalf("%q: arg %d is %q, DecodeRequest %q", in, i, a1[i], a2[i])
		}
	}
}

func FuzzDecodeCall(f *testing.F) {
	f.Add([]byte(`{"method":"WaitForJobChange","args":[12,["status"],["running"],3,29.5],"version":3010000}`))
	f.Add([]byte(`{"method":"X","args":["]}\"[{",{"k\"}":"}"}],"version":null}`))
	f.Add([]byte(`{"m\u0065thod":"X","args":[]}`))
	f.Add([]byte(`{"method":"A","args":[1],"method":"B"}`))
	f.Add([]byte(` {"args" : [ 1 , [ "a" ] ] , "method" : "X" } `))
	f.Add([]byte(`{"method":"X","args":[],"version":3010000}x`))
	f.Fuzz(checkDecodeCall)
}
