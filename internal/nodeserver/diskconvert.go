package nodeserver

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/storage"
)

// diskConvert copies a stopped instance's disk between the file,
// sharedfile and rbd templates. The target appears whole or not at all:
// rbd images are imported under a temporary name, files are written to a
// temporary name and renamed. The source is kept; a repeat overwrites the
// target again.
func (s *Server) diskConvert(ctx context.Context, a nodeapi.DiskConvertArgs) (any, error) {
	from, err := s.backend(a.FromTemplate, a.SharedFileDir)
	if err != nil {
		return nil, err
	}
	to, err := s.backend(a.ToTemplate, a.SharedFileDir)
	if err != nil {
		return nil, err
	}
	src, dst := diskOf(a.FromTemplate, a.From), diskOf(a.ToTemplate, a.To)
	fileLike := func(t string) bool { return t == storage.TemplateFile || t == storage.TemplateSharedFile }
	switch {
	case fileLike(a.FromTemplate) && a.ToTemplate == storage.TemplateRBD:
		p := from.Path(a.InstanceUUID, src)
		if _, err := os.Stat(p); err != nil {
			return nil, ecode.Errorf(ecode.NoEnt, "disk file %s: %w", p, err)
		}
		if err := to.(*storage.RBD).Import(ctx, a.InstanceUUID, dst, p); err != nil {
			return nil, err
		}
	case a.FromTemplate == storage.TemplateRBD && fileLike(a.ToTemplate):
		err := writeWhole(to.Path(a.InstanceUUID, dst), dst.Index, a.InstanceUUID, func(tmp string) error {
			return from.(*storage.RBD).Export(ctx, a.InstanceUUID, src, tmp)
		})
		if err != nil {
			return nil, err
		}
	case fileLike(a.FromTemplate) && fileLike(a.ToTemplate) && a.FromTemplate != a.ToTemplate:
		p := from.Path(a.InstanceUUID, src)
		err := writeWhole(to.Path(a.InstanceUUID, dst), dst.Index, a.InstanceUUID, func(tmp string) error {
			return copySparse(ctx, p, tmp)
		})
		if err != nil {
			return nil, err
		}
	default:
		return nil, ecode.Errorf(ecode.Inval, "converting disks from %s to %s is not supported", a.FromTemplate, a.ToTemplate)
	}
	s.log.Info("disk converted", "instance", a.InstanceUUID, "disk", a.To.Index, "from", a.FromTemplate, "to", a.ToTemplate)
	return nodeapi.DiskReply{Path: to.Path(a.InstanceUUID, dst)}, nil
}

// writeWhole has fill write a temporary file beside p, then renames it to
// p: a reader never sees a half-written disk.
func writeWhole(p string, index int, instUUID string, fill func(tmp string) error) error {
	if p == "" {
		return ecode.Errorf(ecode.Inval, "invalid disk %d of instance %s", index, instUUID)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return ecode.ExecErrorf("making the instance's storage directory: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".convert")
	_ = os.Remove(tmp)
	if err := fill(tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		_ = os.Remove(tmp)
		return ecode.ExecErrorf("placing the converted disk %s: %w", p, err)
	}
	return nil
}

// copySparse copies the file src to dst (created 0600), leaving holes
// where src has blocks of zeros, so a mostly empty disk stays sparse on
// the target file system.
func copySparse(ctx context.Context, src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return ecode.Errorf(ecode.NoEnt, "disk file %s: %w", src, err)
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return ecode.ExecErrorf("disk file %s: %w", src, err)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return ecode.ExecErrorf("creating %s: %w", dst, err)
	}
	buf := make([]byte, 1<<20)
	var off int64
	for {
		if err := ctx.Err(); err != nil {
			out.Close()
			return err
		}
		n, rerr := io.ReadFull(in, buf)
		if n > 0 && !allZero(buf[:n]) {
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				out.Close()
				return ecode.ExecErrorf("writing %s: %w", dst, err)
			}
		}
		off += int64(n)
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			out.Close()
			return ecode.ExecErrorf("reading %s: %w", src, rerr)
		}
	}
	if err := out.Truncate(st.Size()); err != nil {
		out.Close()
		return ecode.ExecErrorf("sizing %s: %w", dst, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return ecode.ExecErrorf("syncing %s: %w", dst, err)
	}
	return out.Close()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
