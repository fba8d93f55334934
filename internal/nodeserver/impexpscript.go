package nodeserver

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/impexp"
	"github.com/corral/corral/internal/osapi"
)

// An OS script's disk stream goes through one kernel pipe between the
// script and the transfer: the script's end is its stdin or stdout itself,
// so no goroutine copies the stream in small pieces in between, and the
// pipe holds scriptPipeSize bytes, so that both sides move whole 1 MiB
// blocks.
const scriptPipeSize = 1 << 20

// newScriptPipe makes the pipe; a pipe that cannot grow only costs speed.
func newScriptPipe() (r, w *os.File, err error) {
	r, w, err = os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	// Through the raw descriptor: Fd() would make the file blocking.
	if rc, err := w.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, scriptPipeSize) })
	}
	return r, w, nil
}

// scriptSink feeds the stream to the OS import script's stdin and, while
// the script writes the disk, has the kernel write the disk's data out
// (impexp.DiskWriteback); the stream is acknowledged once the script has
// exited and the disk is synced.
func (s *Server) scriptSink(o *osapi.OS, inst osapi.Instance, disk int) sinkOpener {
	return func(ctx context.Context) (*dataSink, error) {
		if disk < 0 || disk >= len(inst.Disks) {
			return nil, ecode.Errorf(ecode.Inval, "instance %s has no disk %d", inst.Name, disk)
		}
		pr, pw, err := newScriptPipe()
		if err != nil {
			return nil, ecode.ExecErrorf("making the import script's pipe: %w", err)
		}
		sp := &scriptPipe{w: pw, res: make(chan error, 1)}
		if path := inst.Disks[disk].Path; path != "" {
			if sp.disk, err = impexp.StartDiskWriteback(path); err != nil {
				pr.Close()
				pw.Close()
				return nil, ecode.Errorf(ecode.Environ, "opening disk %d of %s for the import: %w", disk, inst.Name, err)
			}
		}
		out := &scriptOutput{}
		go func() {
			log, err := s.osRunner.RunImport(ctx, o, inst, disk, pr)
			// From now on a write fails (EPIPE) instead of waiting for a
			// reader.
			pr.Close()
			out.set(log)
			sp.res <- err
		}()
		return &dataSink{w: sp, recent: out.lines, finish: func(recvErr error) error {
			sp.end(recvErr)
			return sp.err
		}}, nil
	}
}

// scriptPipe is the import script's stdin. Its Sync ends the input, waits
// for the script and syncs the disk, so the sender is acknowledged only
// once the script has stored everything durably.
type scriptPipe struct {
	w    *os.File
	res  chan error
	disk *impexp.DiskWriteback // nil when the disk has no path here

	resOnce   sync.Once
	scriptErr error
	once      sync.Once
	err       error
}

// result waits for the script's exit.
func (p *scriptPipe) result() error {
	p.resOnce.Do(func() { p.scriptErr = <-p.res })
	return p.scriptErr
}

func (p *scriptPipe) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		// The script stopped reading: it exited, and says why.
		if serr := p.result(); serr != nil {
			return n, serr
		}
		return n, errScriptEnded
	}
	return n, err
}

func (p *scriptPipe) Sync() error {
	p.end(nil)
	return p.err
}

// end finishes the import once. After a complete stream (recvErr nil) it
// closes the script's input, waits for the script and syncs the disk.
// After a failed one the transfer's context has already stopped the
// script: its input is closed only once it is gone, so that it never
// reads a clean end of a cut-off stream.
func (p *scriptPipe) end(recvErr error) {
	p.once.Do(func() {
		if recvErr != nil {
			p.err = p.result()
			p.w.Close()
			if p.disk != nil {
				p.disk.Abandon()
			}
			return
		}
		p.w.Close()
		p.err = p.result()
		if p.disk == nil {
			return
		}
		if p.err != nil {
			p.disk.Abandon()
			return
		}
		p.err = p.disk.Finish()
	})
}

// scriptSource streams the OS export script's stdout.
func (s *Server) scriptSource(o *osapi.OS, inst osapi.Instance, disk int) sourceOpener {
	return func(ctx context.Context) (*dataSource, error) {
		pr, pw, err := newScriptPipe()
		if err != nil {
			return nil, ecode.ExecErrorf("making the export script's pipe: %w", err)
		}
		out := &scriptOutput{}
		src := &scriptStream{r: pr, res: make(chan error, 1)}
		go func() {
			log, err := s.osRunner.RunExport(ctx, o, inst, disk, pw)
			// The stream ends (EOF) once the script is done with it.
			pw.Close()
			out.set(log)
			src.res <- err
		}()
		return &dataSource{r: src, recent: out.lines, finish: func(error) error {
			pr.Close() // a script still writing gets EPIPE
			return src.result()
		}}, nil
	}
}

// scriptStream is the export script's stdout. The pipe's end comes only
// once the script has exited: a failed script's error replaces io.EOF, so
// its output is never mistaken for a complete disk.
type scriptStream struct {
	r         *os.File
	res       chan error
	resOnce   sync.Once
	scriptErr error
}

func (s *scriptStream) result() error {
	s.resOnce.Do(func() { s.scriptErr = <-s.res })
	return s.scriptErr
}

func (s *scriptStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if errors.Is(err, io.EOF) {
		if serr := s.result(); serr != nil {
			return n, serr
		}
	}
	return n, err
}
