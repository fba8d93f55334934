package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buildQcow2 makes a version 3 image of size bytes with 512-byte clusters
// (cluster bits 9) whose listed clusters hold data; others are
// unallocated, and zero lists clusters with the zero flag.
func buildQcow2(size int64, data map[int64][]byte, zero []int64) []byte {
	const cs = 512
	be := binary.BigEndian
	l2Entries := int64(cs / 8)
	nL2 := (size/cs + l2Entries - 1) / l2Entries
	img := make([]byte, cs*2) // header, L1
	h := img[:104]
	be.PutUint32(h, qcow2Magic)
	be.PutUint32(h[4:], 3)
	be.PutUint32(h[20:], 9)
	be.PutUint64(h[24:], uint64(size))
	be.PutUint32(h[36:], uint32(nL2))
	be.PutUint64(h[40:], cs)
	be.PutUint32(h[100:], 104)
	l2Base := int64(len(img))
	img = append(img, make([]byte, nL2*cs)...)
	for i := range nL2 {
		be.PutUint64(img[cs+i*8:], uint64(l2Base+i*cs)|1<<63)
	}
	for vc, d := range data {
		off := int64(len(img))
		img = append(img, make([]byte, cs)...)
		copy(img[off:], d)
		be.PutUint64(img[l2Base+vc*8:], uint64(off)|1<<63)
	}
	for _, vc := range zero {
		be.PutUint64(img[l2Base+vc*8:], 1)
	}
	return img
}

func TestQcow2Reads(t *testing.T) {
	img := buildQcow2(512*200, map[int64][]byte{0: []byte("first"), 70: []byte("seventy"), 199: []byte("last")}, []int64{5})
	q, err := openQcow2(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(io.NewSectionReader(q, 0, q.Size()))
	if err != nil || int64(len(got)) != 512*200 {
		t.Fatalf("%d bytes, %v", len(got), err)
	}
	want := make([]byte, 512*200)
	copy(want, "first")
	copy(want[70*512:], "seventy")
	copy(want[199*512:], "last")
	if !bytes.Equal(got, want) {
		t.Fatal("virtual disk differs")
	}
}

func TestQcow2FromQemuImg(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img is not installed")
	}
	dir := t.TempDir()
	want := make([]byte, 3<<20+4096)
	copy(want[100:], "head")
	copy(want[2<<20:], bytes.Repeat([]byte{1, 2, 3}, 50000))
	os.WriteFile(filepath.Join(dir, "a.raw"), want, 0o600)
	for _, compat := range []string{"0.10", "1.1"} {
		qc := filepath.Join(dir, "a-"+compat+".qcow2")
		if out, err := exec.Command("qemu-img", "convert", "-O", "qcow2", "-o", "compat="+compat, filepath.Join(dir, "a.raw"), qc).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		f, _ := os.Open(qc)
		st, _ := f.Stat()
		q, err := openQcow2(f, st.Size())
		if err != nil {
			t.Fatalf("compat %s: %v", compat, err)
		}
		got, err := io.ReadAll(io.NewSectionReader(q, 0, q.Size()))
		f.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("compat %s: virtual disk differs (%v)", compat, err)
		}
	}
	// Compressed clusters are refused with a clear error.
	qc := filepath.Join(dir, "c.qcow2")
	if out, err := exec.Command("qemu-img", "convert", "-c", "-O", "qcow2", filepath.Join(dir, "a.raw"), qc).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	data, _ := os.ReadFile(qc)
	q, err := openQcow2(bytes.NewReader(data), int64(len(data)))
	if err == nil {
		_, err = io.Copy(io.Discard, io.NewSectionReader(q, 0, q.Size()))
	}
	if !errors.Is(err, errQcow2) {
		t.Fatalf("compressed image: %v", err)
	}
}

func TestQcow2RefusesBadHeaders(t *testing.T) {
	good := buildQcow2(512*10, nil, nil)
	for name, mut := range map[string]func(b []byte){
		"magic":    func(b []byte) { b[0] = 0 },
		"version":  func(b []byte) { binary.BigEndian.PutUint32(b[4:], 4) },
		"backing":  func(b []byte) { binary.BigEndian.PutUint64(b[8:], 1000) },
		"crypt":    func(b []byte) { binary.BigEndian.PutUint32(b[32:], 1) },
		"cluster":  func(b []byte) { binary.BigEndian.PutUint32(b[20:], 30) },
		"l1-short": func(b []byte) { binary.BigEndian.PutUint64(b[24:], 1<<40) },
		"l1-off":   func(b []byte) { binary.BigEndian.PutUint64(b[40:], 1<<40) },
		"extl2":    func(b []byte) { binary.BigEndian.PutUint64(b[72:], 1<<4) },
	} {
		b := bytes.Clone(good)
		mut(b)
		if _, err := openQcow2(bytes.NewReader(b), int64(len(b))); !errors.Is(err, errQcow2) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzQcow2 reads whatever image the fuzzer makes: opening and reading
// must fail cleanly or return exactly the virtual size, never panic.
func FuzzQcow2(f *testing.F) {
	f.Add(buildQcow2(512*4, map[int64][]byte{1: []byte("x")}, []int64{2}))
	f.Add(buildQcow2(512*70, map[int64][]byte{65: []byte("y")}, nil))
	f.Fuzz(func(t *testing.T, img []byte) {
		q, err := openQcow2(bytes.NewReader(img), int64(len(img)))
		if err != nil {
			return
		}
		if q.Size() > 1<<20 {
			// Reading a large virtual disk of zeros proves nothing more.
			_, _ = q.ReadAt(make([]byte, 4096), q.Size()-4096)
			return
		}
		n, err := io.Copy(io.Discard, io.NewSectionReader(q, 0, q.Size()))
		if err == nil && n != q.Size() {
			t.Fatalf("read %d bytes of a %d-byte disk", n, q.Size())
		}
	})
}
