package impexp

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// An import must be on disk before it is acknowledged. Syncing only at the
// end would write the whole disk after the stream (1 GiB is about 3 s on a
// 330 MB/s disk, on top of the transfer): the kernel keeps far more than a
// disk's worth of dirty pages before it writes them back by itself. The
// writers below have the kernel start writing while the stream goes on, so
// the final sync finds little left to do.

// writebackChunk is how much written data is handed to the disk at a time.
const writebackChunk = 8 << 20

// writebackQueue bounds the chunks waiting for their writeback to start;
// when the disk is slower than the stream, the stream waits.
const writebackQueue = 16

// WritebackFile writes sequentially into a file from its current offset
// and starts the disk write of every writebackChunk as soon as it is
// complete (sync_file_range, in the background). Sync waits for those and
// makes everything durable (fdatasync): Receive calls it before it
// acknowledges a stream.
type WritebackFile struct {
	f       *os.File
	off     int64 // offset of the next write
	flushed int64 // offset up to which writeback was requested
	ranges  chan [2]int64
	done    chan struct{}
	closed  bool
	err     error // the first writeback error
	mu      sync.Mutex
}

// NewWritebackFile writes into f from its current offset. The caller
// closes f after Sync (or instead of it, after a failure).
func NewWritebackFile(f *os.File) (*WritebackFile, error) {
	off, err := f.Seek(0, 1)
	if err != nil {
		return nil, err
	}
	w := &WritebackFile{f: f, off: off, flushed: off, ranges: make(chan [2]int64, writebackQueue), done: make(chan struct{})}
	go w.loop()
	return w, nil
}

func (w *WritebackFile) loop() {
	defer close(w.done)
	fd := int(w.f.Fd())
	for r := range w.ranges {
		if err := unix.SyncFileRange(fd, r[0], r[1], unix.SYNC_FILE_RANGE_WRITE); err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = fmt.Errorf("starting the disk write: %w", err)
			}
			w.mu.Unlock()
		}
	}
}

func (w *WritebackFile) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	for !w.closed && w.off-w.flushed >= writebackChunk {
		w.ranges <- [2]int64{w.flushed, writebackChunk}
		w.flushed += writebackChunk
	}
	return n, err
}

// stop ends the background writeback and waits for it.
func (w *WritebackFile) stop() {
	if !w.closed {
		w.closed = true
		close(w.ranges)
	}
	<-w.done
}

// Abandon ends the background writeback without syncing (a failed
// transfer).
func (w *WritebackFile) Abandon() { w.stop() }

// Sync ends the background writeback and makes the data durable.
func (w *WritebackFile) Sync() error {
	w.stop()
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return err
	}
	return unix.Fdatasync(int(w.f.Fd()))
}

// writebackInterval is how often DiskWriteback starts the writeback of
// what another process wrote.
const writebackInterval = 100 * time.Millisecond

// DiskWriteback follows a file or block device that another process (an
// OS import script) writes: every writebackInterval it has the kernel
// start writing the dirty data, and Finish makes it durable.
type DiskWriteback struct {
	f    *os.File
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// StartDiskWriteback opens path for the writeback.
func StartDiskWriteback(path string) (*DiskWriteback, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	d := &DiskWriteback{f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d, nil
}

func (d *DiskWriteback) loop() {
	defer close(d.done)
	t := time.NewTicker(writebackInterval)
	defer t.Stop()
	fd := int(d.f.Fd())
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			// Errors show at the final sync.
			_ = unix.SyncFileRange(fd, 0, 0, unix.SYNC_FILE_RANGE_WRITE)
		}
	}
}

func (d *DiskWriteback) end() {
	d.once.Do(func() { close(d.stop) })
	<-d.done
}

// Finish stops the writeback and makes what was written durable (fsync:
// a block device has no fdatasync of its own).
func (d *DiskWriteback) Finish() error {
	d.end()
	err := d.f.Sync()
	if cerr := d.f.Close(); err == nil && cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing %s: %w", d.f.Name(), err)
	}
	return nil
}

// Abandon stops the writeback without syncing.
func (d *DiskWriteback) Abandon() {
	d.end()
	_ = d.f.Close()
}
