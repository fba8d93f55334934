package bootstrap

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/ecode"
)

// CheckTraversable refuses a state or run directory that the daemons'
// users cannot reach. corrald, corral-rapi and etcd members run as
// corral-master, corral-rapi and corral-etcd, and each must pass through
// every directory from / down to dir to reach its own directory below it.
// None of them owns those directories, so each needs the execute bit for
// others. A directory from `mktemp -d` is 0700: the daemons would fail to
// start, and a caller waiting for them would only see a timeout. The
// modes are the operator's to change, so this says what to do instead of
// changing them.
func CheckTraversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", abs, err)
	}
	for d := real; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("checking %s: %w", d, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return ecode.Errorf(ecode.Environ,
				"directory %s has mode %04o: the daemons run as %s, %s and %s and cannot pass through it to reach %s; "+
					"run 'chmod o+x %s' or choose a directory others may traverse",
				d, fi.Mode().Perm(), MasterUser, RAPIUser, EtcdUser, abs, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
