// Package initrd writes Linux initramfs archives: cpio in the "newc"
// format, gzip-compressed, which the kernel unpacks over the root file
// system one after the other when several are concatenated. corral-node
// appends one holding a few files to a prebuilt initrd (the agent ramdisk
// of a rescued VM instance) instead of unpacking and repacking it.
package initrd

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// Entry is one directory or regular file of an archive. Name is relative
// ("etc/x.json"), Mode holds the permission bits and fs.ModeDir for a
// directory; owner and group are root.
type Entry struct {
	Name string
	Mode fs.FileMode
	Data []byte
	// MTime is the modification time in seconds since the epoch.
	MTime int64
}

// Linux's newc header is 110 bytes: a magic and 13 fields of 8 hex digits.
const (
	newcMagic = "070701"
	trailer   = "TRAILER!!!"
	// maxName is below the kernel's limit for a name in an initramfs.
	maxName = 4096
	// s_IFDIR and s_IFREG are the file types of a cpio mode.
	sIFDIR = 0o040000
	sIFREG = 0o100000
)

// WriteCPIO writes entries as an uncompressed newc archive with its
// trailer. Directories must come before what they hold.
func WriteCPIO(w io.Writer, entries []Entry) error {
	bw := bufio.NewWriter(w)
	var off int64
	// bufio keeps the first write error; Flush returns it.
	put := func(ino int, mode uint32, nlink int, mtime int64, name string, data []byte) {
		hdr := fmt.Sprintf("%s%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			newcMagic, ino, mode, 0, 0, nlink, uint32(mtime), len(data), 0, 0, 0, 0, len(name)+1, 0)
		n, _ := bw.WriteString(hdr)
		m, _ := bw.WriteString(name + "\x00")
		off += int64(n + m)
		off += pad(bw, off)
		k, _ := bw.Write(data)
		off += int64(k)
		off += pad(bw, off)
	}
	for i, e := range entries {
		if err := checkName(e.Name); err != nil {
			return err
		}
		mode, nlink := uint32(e.Mode.Perm())|sIFREG, 1
		if e.Mode.IsDir() {
			if len(e.Data) > 0 {
				return fmt.Errorf("initrd: directory %s has data", e.Name)
			}
			mode, nlink = uint32(e.Mode.Perm())|sIFDIR, 2
		} else if !e.Mode.IsRegular() {
			return fmt.Errorf("initrd: %s: only directories and regular files", e.Name)
		}
		if int64(len(e.Data)) > 0xffffffff {
			return fmt.Errorf("initrd: %s is too large", e.Name)
		}
		put(i+1, mode, nlink, e.MTime, e.Name, e.Data)
	}
	put(0, 0, 1, 0, trailer, nil)
	return bw.Flush()
}

// pad writes zeros up to the next multiple of 4 and returns how many.
func pad(w *bufio.Writer, off int64) int64 {
	n := (4 - off%4) % 4
	for i := int64(0); i < n; i++ {
		w.WriteByte(0)
	}
	return n
}

func checkName(name string) error {
	if name == "" || len(name) > maxName || strings.HasPrefix(name, "/") || name == trailer ||
		strings.ContainsRune(name, 0) {
		return fmt.Errorf("initrd: bad entry name %q", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("initrd: bad entry name %q", name)
		}
	}
	return nil
}

// WriteGzipCPIO writes entries as a gzip-compressed newc archive.
func WriteGzipCPIO(w io.Writer, entries []Entry) error {
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return err
	}
	if err := WriteCPIO(zw, entries); err != nil {
		return err
	}
	return zw.Close()
}

// Append copies the initrd at base to w, pads it with zeros to a multiple
// of 4 bytes (the kernel skips zeros between archives), then writes
// entries as one more gzip-compressed archive.
func Append(w io.Writer, base string, entries []Entry) error {
	f, err := os.Open(base)
	if err != nil {
		return fmt.Errorf("initrd: %w", err)
	}
	defer f.Close()
	n, err := io.Copy(w, f)
	if err != nil {
		return fmt.Errorf("initrd: copying %s: %w", base, err)
	}
	if r := n % 4; r != 0 {
		if _, err := w.Write(make([]byte, 4-r)); err != nil {
			return fmt.Errorf("initrd: %w", err)
		}
	}
	return WriteGzipCPIO(w, entries)
}
