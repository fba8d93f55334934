package agent

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/configdrive"
)

// imageChecksum returns the hash to verify an image with and the expected
// digest: os_hash_algo/os_hash_value when given, else the legacy checksum
// whose length names the algorithm (32 hex digits: MD5).
func imageChecksum(info agentapi.ImageInfo) (hash.Hash, []byte, error) {
	algo, value := strings.ToLower(info.OSHashAlgo), info.OSHashValue
	if algo == "" || value == "" {
		value = info.Checksum
		switch len(value) {
		case 32:
			algo = "md5"
		case 40:
			algo = "sha1"
		case 64:
			algo = "sha256"
		case 128:
			algo = "sha512"
		case 0:
			return nil, nil, fmt.Errorf("image %s has no checksum (os_hash_value or checksum)", info.ID)
		default:
			return nil, nil, fmt.Errorf("image %s: checksum is not a hex digest (checksum URLs are not supported)", info.ID)
		}
	}
	want, err := hex.DecodeString(strings.ToLower(value))
	if err != nil {
		return nil, nil, fmt.Errorf("image %s: checksum is not hexadecimal", info.ID)
	}
	var h hash.Hash
	switch algo {
	case "md5":
		h = md5.New()
	case "sha1":
		h = sha1.New()
	case "sha256":
		h = sha256.New()
	case "sha512":
		h = sha512.New()
	default:
		return nil, nil, fmt.Errorf("image %s: hash algorithm %q is not supported", info.ID, algo)
	}
	if len(want) != h.Size() {
		return nil, nil, fmt.Errorf("image %s: %s checksum has %d bytes, want %d", info.ID, algo, len(want), h.Size())
	}
	return h, want, nil
}

// progress counts bytes for the command's status.
type progress struct{ n atomic.Int64 }

func (p *progress) Write(b []byte) (int, error) { p.n.Add(int64(len(b))); return len(b), nil }

// prepareImage downloads the image, checks its checksum and writes it to
// the root disk: raw images are streamed to the disk as they arrive (the
// checksum is checked at the end, and a mismatch wipes the disk's
// metadata); qcow2 images are downloaded to TmpDir, checked, then
// converted onto the disk.
func (m *Machine) prepareImage(ctx context.Context, hc *http.Client, p agentapi.PrepareImageParams, prog *progress) (*agentapi.PrepareImageResult, error) {
	info := p.ImageInfo
	format := strings.ToLower(info.DiskFormat)
	if format == "" {
		format = "raw"
	}
	if format != "raw" && format != "qcow2" {
		return nil, fmt.Errorf("image %s: disk format %q is not supported (raw, qcow2)", info.ID, info.DiskFormat)
	}
	if len(info.URLs) == 0 {
		return nil, fmt.Errorf("image %s has no URL", info.ID)
	}
	h, want, err := imageChecksum(info)
	if err != nil {
		return nil, err
	}
	disk, err := m.rootDisk(info.RootDevice)
	if err != nil {
		return nil, err
	}
	body, err := openImage(ctx, hc, info)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	src := io.TeeReader(io.TeeReader(body, h), prog)

	var written int64
	if format == "raw" {
		written, err = writeRaw(disk, src)
	} else {
		written, err = m.writeQcow2(disk, src, h, want)
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", info.ID, err)
	}
	if got := h.Sum(nil); subtle.ConstantTimeCompare(got, want) != 1 {
		if format == "raw" {
			if werr := eraseMetadata(disk); werr != nil {
				return nil, fmt.Errorf("image %s: checksum mismatch (got %x) and %s could not be wiped: %w", info.ID, got, disk, werr)
			}
		}
		return nil, fmt.Errorf("image %s: checksum mismatch: got %x, want %x", info.ID, got, want)
	}
	summary := fmt.Sprintf("prepare_image: image (%s) written to device %s", info.ID, disk)
	if p.ConfigDrive != "" {
		iso, err := configdrive.Decode(p.ConfigDrive)
		if err != nil {
			return nil, fmt.Errorf("image %s: the config drive: %w", info.ID, err)
		}
		if len(iso) > configdrive.MaxSize {
			return nil, fmt.Errorf("image %s: the config drive has %d bytes, more than %d", info.ID, len(iso), configdrive.MaxSize)
		}
		part, err := writeConfigDrivePartition(disk, iso)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", info.ID, err)
		}
		summary += fmt.Sprintf(", config drive written to partition %d", part)
	}
	return &agentapi.PrepareImageResult{
		Result:       summary,
		Device:       disk,
		BytesWritten: written,
	}, nil
}

// openImage returns the body of the first URL that answers 200.
func openImage(ctx context.Context, hc *http.Client, info agentapi.ImageInfo) (io.ReadCloser, error) {
	var errs []error
	for _, u := range info.URLs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("image URL %d: %w", len(errs), err))
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			errs = append(errs, fmt.Errorf("downloading image %s: %w", info.ID, err))
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			errs = append(errs, fmt.Errorf("downloading image %s: HTTP %s", info.ID, resp.Status))
			continue
		}
		return resp.Body, nil
	}
	return nil, errors.Join(errs...)
}

// writeRaw copies the image to the disk from its start and flushes it.
func writeRaw(disk string, src io.Reader) (int64, error) {
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", disk, err)
	}
	defer f.Close()
	n, err := io.CopyBuffer(f, src, make([]byte, 1<<20))
	if err != nil {
		return n, fmt.Errorf("writing %s: %w", disk, err)
	}
	if err := f.Sync(); err != nil {
		return n, fmt.Errorf("flushing %s: %w", disk, err)
	}
	return n, f.Close()
}

// writeQcow2 downloads the image to a temporary file, checks the checksum
// before anything is written, then writes the virtual disk to the disk.
func (m *Machine) writeQcow2(disk string, src io.Reader, h hash.Hash, want []byte) (int64, error) {
	tmp, err := os.CreateTemp(m.TmpDir, "image-*.qcow2")
	if err != nil {
		return 0, fmt.Errorf("temporary file for the qcow2 image: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	size, err := io.CopyBuffer(tmp, src, make([]byte, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("downloading the qcow2 image: %w", err)
	}
	if subtle.ConstantTimeCompare(h.Sum(nil), want) != 1 {
		return 0, nil // the caller reports the mismatch; nothing was written
	}
	q, err := openQcow2(tmp, size)
	if err != nil {
		return 0, err
	}
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("opening %s: %w", disk, err)
	}
	defer f.Close()
	if end, err := f.Seek(0, io.SeekEnd); err == nil && end > 0 && end < q.Size() {
		return 0, fmt.Errorf("the image's virtual size %d does not fit %s (%d bytes)", q.Size(), disk, end)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, fmt.Errorf("seeking %s: %w", disk, err)
	}
	n, err := io.CopyBuffer(f, io.NewSectionReader(q, 0, q.Size()), make([]byte, 1<<20))
	if err != nil {
		return n, fmt.Errorf("writing %s: %w", disk, err)
	}
	if err := f.Sync(); err != nil {
		return n, fmt.Errorf("flushing %s: %w", disk, err)
	}
	return n, f.Close()
}
