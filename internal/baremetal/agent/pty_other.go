//go:build !linux

package agent

import (
	"errors"
	"os"
)

var errNoPTY = errors.New("pseudo-terminals are only supported on Linux")

func openPTY(string) (master, slave *os.File, err error) { return nil, nil, errNoPTY }

func setWindowSize(*os.File, uint32, uint32) error { return errNoPTY }
