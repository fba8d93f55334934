package impexp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

func frame(payloads ...[]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func TestFrameReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want string
		err  error
	}{
		{"empty stream", frame([]byte{}), "", nil},
		{"two frames", frame([]byte("ab"), []byte("cde"), nil), "abcde", nil},
		{"no end frame", frame([]byte("ab")), "ab", io.ErrUnexpectedEOF},
		{"nothing", nil, "", io.ErrUnexpectedEOF},
		{"short header", []byte{0, 0}, "", io.ErrUnexpectedEOF},
		{"short frame", frame([]byte("abc"))[:5], "a", io.ErrUnexpectedEOF},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff, 'a'}, "", errFrame},
	} {
		got, err := io.ReadAll(&frameReader{r: bytes.NewReader(tc.in)})
		if string(got) != tc.want || !errors.Is(err, tc.err) && (err != nil || tc.err != nil) {
			t.Errorf("%s: read %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}

func TestFrameWriterSizes(t *testing.T) {
	// Small writes are batched, large ones framed in place; the reader
	// sees the same bytes either way.
	data := testData(t, 3*copyBufferSize+17)
	var buf bytes.Buffer
	fw := newFrameWriter(&buf)
	for _, n := range []int{1, 100, netBufferSize, copyBufferSize + 5, 3} {
		if _, err := fw.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	if _, err := fw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := fw.end(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(&frameReader{r: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if want := 3*copyBufferSize + 17; len(got) != want {
		t.Fatalf("read %d bytes, want %d", len(got), want)
	}
}

func FuzzFrames(f *testing.F) {
	f.Add(frame([]byte("hello"), nil))
	f.Add(frame([]byte("a"), []byte("b")))
	f.Add([]byte{0, 0, 0})
	f.Add([]byte{0xff, 0, 0, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		// Whatever arrives, the reader returns at most the input and a
		// clean end only after an end frame.
		got, err := io.ReadAll(&frameReader{r: bytes.NewReader(in)})
		if len(got) > len(in) {
			t.Fatalf("read %d bytes from %d", len(got), len(in))
		}
		if err == nil && len(in) < frameHeaderLen {
			t.Fatal("clean end without an end frame")
		}
		// And any payload survives the writer and the reader.
		var buf bytes.Buffer
		fw := newFrameWriter(&buf)
		if _, err := fw.Write(in); err != nil {
			t.Fatal(err)
		}
		if err := fw.end(); err != nil {
			t.Fatal(err)
		}
		back, err := io.ReadAll(&frameReader{r: &buf})
		if err != nil || !bytes.Equal(back, in) {
			t.Fatalf("round trip: %v, %d bytes back of %d", err, len(back), len(in))
		}
	})
}
