package bmc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// maxMediaSize bounds a downloaded virtual CD.
const maxMediaSize = 8 << 30

// InsertMedia puts an image in the virtual CD drive: an http(s) URL is
// downloaded into the machine directory, a file:// URL or an absolute path
// is used in place. A running machine sees the new disc at once.
func (m *Machine) InsertMedia(ctx context.Context, image string) error {
	u, err := url.Parse(image)
	if err != nil || image == "" {
		return ecode.Errorf(ecode.Inval, "virtual media image %q is not a URL or an absolute path", image)
	}
	var local string
	switch {
	case u.Scheme == "http" || u.Scheme == "https":
		local = m.path(mediaISO)
		if err := download(ctx, image, local); err != nil {
			return err
		}
	case u.Scheme == "file":
		local = u.Path
	case u.Scheme == "" && filepath.IsAbs(image):
		local = image
	default:
		return ecode.Errorf(ecode.Inval, "virtual media image %q: scheme %q is not http, https or file", image, u.Scheme)
	}
	if st, err := os.Stat(local); err != nil || !st.Mode().IsRegular() {
		return ecode.Errorf(ecode.Inval, "virtual media image %s is not a readable file", local)
	}
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if m.PoweredOn() {
		args := map[string]any{"id": cdDevice, "filename": local, "format": "raw", "read-only-mode": "read-only"}
		if _, err := qmpDo(ctx, m.path(qmpSocket), "blockdev-change-medium", args); err != nil {
			return ecode.ExecErrorf("machine %s: insert virtual media: %w", m.Config.Name, err)
		}
	}
	m.logf("insert media %s", local)
	return m.writeMedia(Media{Image: image, Inserted: true, Path: local})
}

// EjectMedia empties the virtual CD drive.
func (m *Machine) EjectMedia(ctx context.Context) error {
	unlock, err := m.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if m.PoweredOn() {
		if _, err := qmpDo(ctx, m.path(qmpSocket), "eject", map[string]any{"id": cdDevice, "force": true}); err != nil {
			return ecode.ExecErrorf("machine %s: eject virtual media: %w", m.Config.Name, err)
		}
	}
	if err := os.Remove(m.path(mediaISO)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("machine %s: remove downloaded media: %w", m.Config.Name, err)
	}
	m.logf("eject media")
	return m.writeMedia(Media{})
}

// download fetches url into path through a temporary file, so a failed
// download never leaves half an image in the drive.
func download(ctx context.Context, rawURL, path string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return ecode.Errorf(ecode.Inval, "virtual media URL: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ecode.ExecErrorf("download virtual media: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ecode.ExecErrorf("download virtual media %s: HTTP %s", req.URL.Redacted(), resp.Status)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".media-*")
	if err != nil {
		return fmt.Errorf("download virtual media: %w", err)
	}
	defer os.Remove(tmp.Name())
	n, err := io.Copy(tmp, io.LimitReader(resp.Body, maxMediaSize+1))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return ecode.ExecErrorf("download virtual media %s: %w", req.URL.Redacted(), err)
	}
	if n > maxMediaSize {
		return ecode.Errorf(ecode.Inval, "virtual media %s is larger than %d bytes", req.URL.Redacted(), int64(maxMediaSize))
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("download virtual media: %w", err)
	}
	return nil
}
