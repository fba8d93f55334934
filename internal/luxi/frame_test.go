package luxi

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
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
