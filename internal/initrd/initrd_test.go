package initrd

import (
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func needCPIO(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio is not installed")
	}
}

var testEntries = []Entry{
	{Name: "etc", Mode: fs.ModeDir | 0o755, MTime: 1700000000},
	{Name: "etc/corral-rescue.json", Mode: 0o600, Data: []byte(`{"rescue_password":"$6$x$y","hashed":true}`), MTime: 1700000000},
	{Name: "etc/three", Mode: 0o644, Data: []byte("abc")}, // data not a multiple of 4
}

// TestCPIOListsAndExtracts checks the archive with GNU cpio: its listing,
// then the files, modes and contents it extracts.
func TestCPIOListsAndExtracts(t *testing.T) {
	needCPIO(t)
	var b bytes.Buffer
	if err := WriteCPIO(&b, testEntries); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 {
		t.Fatalf("archive of %d bytes is not padded", b.Len())
	}
	cmd := exec.Command("cpio", "-t", "--quiet")
	cmd.Stdin = bytes.NewReader(b.Bytes())
	out, err := cmd.CombinedOutput()
	if err != nil || string(out) != "etc\netc/corral-rescue.json\netc/three\n" {
		t.Fatalf("cpio -t: %v\n%s", err, out)
	}
	dir := t.TempDir()
	cmd = exec.Command("cpio", "-i", "-d", "--quiet", "--no-absolute-filenames")
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(b.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v\n%s", err, out)
	}
	for _, e := range testEntries[1:] {
		p := filepath.Join(dir, e.Name)
		data, err := os.ReadFile(p)
		st, serr := os.Stat(p)
		if err != nil || serr != nil || !bytes.Equal(data, e.Data) || st.Mode().Perm() != e.Mode.Perm() {
			t.Fatalf("%s: %q %v %v", e.Name, data, err, st.Mode())
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "etc")); err != nil || !st.IsDir() {
		t.Fatalf("etc: %v", err)
	}
}

func TestWriteCPIORefusesBadEntries(t *testing.T) {
	for _, e := range []Entry{
		{Name: "/etc/x", Mode: 0o600},
		{Name: "etc/../x", Mode: 0o600},
		{Name: "", Mode: 0o600},
		{Name: "TRAILER!!!", Mode: 0o600},
		{Name: "dev/x", Mode: fs.ModeDevice | 0o600},
		{Name: "d", Mode: fs.ModeDir | 0o755, Data: []byte("x")},
	} {
		if err := WriteCPIO(io.Discard, []Entry{e}); err == nil {
			t.Errorf("%+v accepted", e)
		}
	}
}

// TestAppendKeepsBaseAndAddsAnArchive: the base initrd is copied as it
// is, padded with zeros to 4 bytes, and followed by a gzip'd archive cpio
// reads.
func TestAppendKeepsBaseAndAddsAnArchive(t *testing.T) {
	needCPIO(t)
	base := filepath.Join(t.TempDir(), "initrd.img")
	baseData := []byte("0707 not really a base archive, 45 bytes long")
	if err := os.WriteFile(base, baseData, 0o644); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Append(&b, base, testEntries); err != nil {
		t.Fatal(err)
	}
	got := b.Bytes()
	if !bytes.HasPrefix(got, baseData) {
		t.Fatal("the base is not kept")
	}
	padded := (len(baseData) + 3) / 4 * 4
	if !bytes.Equal(got[len(baseData):padded], make([]byte, padded-len(baseData))) {
		t.Fatalf("padding %q", got[len(baseData):padded])
	}
	zr, err := gzip.NewReader(bytes.NewReader(got[padded:]))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cpio", "-t", "--quiet")
	cmd.Stdin = zr
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "etc/corral-rescue.json\n") {
		t.Fatalf("cpio -t: %v\n%s", err, out)
	}
	if err := Append(io.Discard, filepath.Join(t.TempDir(), "none"), testEntries); err == nil {
		t.Fatal("a missing base is accepted")
	}
}
