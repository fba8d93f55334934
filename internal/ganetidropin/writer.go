package ganetidropin

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/corral/corral/internal/atomicfile"
)

// SsconfFileMode is Ganeti's mode for ssconf files (constants.SS_FILE_PERMS):
// everybody reads them, nobody writes them in place.
const SsconfFileMode = 0o444

// SsconfWriter keeps a layout's ssconf files equal to the values it is
// given. Each file it changes is replaced atomically (a reader sees the old
// content or the new, never a mix); files whose content is unchanged are
// left alone. Not safe for concurrent use.
type SsconfWriter struct {
	l Layout
	// written is what each file holds as far as this writer knows (nil
	// until the first Write, which checks every file on disk).
	written map[string]string
}

// NewSsconfWriter returns a writer for l's data directory.
func NewSsconfWriter(l Layout) *SsconfWriter { return &SsconfWriter{l: l} }

// Write brings the files to values (key → content). It stops at the first
// file it cannot write; a later Write tries again.
func (w *SsconfWriter) Write(values map[string]string) error {
	first := w.written == nil
	if first {
		w.written = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		v := values[k]
		if old, ok := w.written[k]; ok && old == v {
			continue
		}
		path := w.l.SsconfPath(k)
		if first {
			// A restarted master finds the files of its previous run:
			// rewrite only those that differ, or have another mode.
			if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == SsconfFileMode {
				if b, err := os.ReadFile(path); err == nil && string(b) == v {
					w.written[k] = v
					continue
				}
			}
		}
		if err := atomicfile.WriteFile(path, []byte(v), SsconfFileMode); err != nil {
			delete(w.written, k)
			return fmt.Errorf("writing ssconf file %s: %w", path, err)
		}
		w.written[k] = v
	}
	return nil
}
