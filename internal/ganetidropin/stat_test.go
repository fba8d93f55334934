package ganetidropin

import (
	"os"
	"syscall"
)

func statIno(fi os.FileInfo) uint64 { return fi.Sys().(*syscall.Stat_t).Ino }
