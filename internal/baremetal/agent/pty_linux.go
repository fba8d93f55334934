package agent

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openPTY opens a new pseudo-terminal pair through /dev/ptmx, without cgo:
// unlock the pair, ask the kernel for its number and open /dev/pts/N.
func openPTY(devDir string) (master, slave *os.File, err error) {
	master, err = os.OpenFile(devDir+"/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("opening %s/ptmx: %w", devDir, err)
	}
	var n uint32
	err = control(master, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlocking the pseudo-terminal: %w", err)
		}
		var err error
		if n, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN); err != nil {
			return fmt.Errorf("pseudo-terminal number: %w", err)
		}
		return nil
	})
	if err != nil {
		master.Close()
		return nil, nil, err
	}
	name := devDir + "/pts/" + strconv.FormatUint(uint64(n), 10)
	slave, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("opening %s: %w", name, err)
	}
	return master, slave, nil
}

// setWindowSize tells the terminal (and so the shell) its size.
func setWindowSize(f *os.File, cols, rows uint32) error {
	if cols == 0 || rows == 0 || cols > 1<<15 || rows > 1<<15 {
		return fmt.Errorf("window size %dx%d out of range", cols, rows)
	}
	ws := &unix.Winsize{Col: uint16(cols), Row: uint16(rows)}
	return control(f, func(fd int) error {
		if err := unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, ws); err != nil {
			return fmt.Errorf("setting the window size: %w", err)
		}
		return nil
	})
}

// control runs fn on f's descriptor without f.Fd(), which would put the
// master in blocking mode and so take its reads out of the poller (no
// deadlines, no interrupting a read by Close).
func control(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("pseudo-terminal: %w", err)
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return fmt.Errorf("pseudo-terminal: %w", err)
	}
	return ferr
}
