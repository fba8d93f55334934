package fake

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

var _ hypervisor.DiskSnapshotter = (*Hypervisor)(nil)

// SnapshotDisk copies the disk file into target. A fake instance has no
// guest, so nothing writes its disk while it "runs": a plain copy is the
// disk as it was when the call began, which is what a point-in-time copy
// promises. (Only the node's own calls, such as an import into the disk,
// could write it, and those are not run on a running instance.)
func (h *Hypervisor) SnapshotDisk(ctx context.Context, name string, index int, target string) error {
	var path string
	err := h.update(func(st *stateDoc) (bool, error) {
		r, ok := st.Instances[name]
		if !ok {
			return false, hypervisor.NotRunning(name)
		}
		for _, d := range r.Spec.Disks {
			if d.Index == index {
				path = d.Path
			}
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if path == "" {
		return ecode.Errorf(ecode.Inval, "instance %s has no disk %d with a file", name, index)
	}
	if err := copyInto(ctx, path, target); err != nil {
		return ecode.ExecErrorf("snapshot of disk %d of %s: %w", index, name, err)
	}
	return nil
}

// copyInto overwrites the existing file target with src's content.
func copyInto(ctx context.Context, src, target string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, ctxReader{ctx, in}); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", target, err)
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
