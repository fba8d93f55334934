// Package atomicfile replaces files durably: a crash leaves the old content
// or the new, never a torn mix. Keys, records and state files use it.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to a temporary file beside path with mode perm,
// fsyncs it, renames it over path and fsyncs the directory.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFrom(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFrom is WriteFile for content produced by write, which streams into
// the temporary file (a large snapshot is never held in memory). If write
// fails, path is left as it was and the error is returned unchanged.
func WriteFrom(path string, perm os.FileMode, write func(w io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if err = write(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
