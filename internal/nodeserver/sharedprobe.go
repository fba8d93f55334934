package nodeserver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// probePrefix starts every probe file name, so a probe can never name
// anything else in the directory.
const probePrefix = ".corral-probe-"

// sharedDirProbe writes, reads or removes a probe file in the shared
// directory (cluster verify's check that all nodes see the same files).
func (s *Server) sharedDirProbe(ctx context.Context, a nodeapi.SharedDirProbeArgs) (any, error) {
	if !filepath.IsAbs(a.Dir) || filepath.Clean(a.Dir) != a.Dir {
		return nil, ecode.Errorf(ecode.Inval, "shared directory must be a clean absolute path, got %q", a.Dir)
	}
	if !strings.HasPrefix(a.Name, probePrefix) || strings.ContainsAny(a.Name, "/\x00") || len(a.Name) > 100 {
		return nil, ecode.Errorf(ecode.Inval, "invalid probe name %q", a.Name)
	}
	p := filepath.Join(a.Dir, a.Name)
	switch a.Op {
	case nodeapi.ProbeWrite:
		if err := atomicfile.WriteFile(p, []byte(a.Content), 0o600); err != nil {
			return nil, ecode.ExecErrorf("writing a probe in %s: %w", a.Dir, err)
		}
		return nodeapi.SharedDirProbeReply{Found: true, Content: a.Content, Closed: closedAncestor(a.Dir)}, nil
	case nodeapi.ProbeRead:
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nodeapi.SharedDirProbeReply{}, nil
		}
		if err != nil {
			return nil, ecode.ExecErrorf("reading a probe in %s: %w", a.Dir, err)
		}
		return nodeapi.SharedDirProbeReply{Found: true, Content: string(b)}, nil
	case nodeapi.ProbeRemove:
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, ecode.ExecErrorf("removing a probe in %s: %w", a.Dir, err)
		}
		return nil, nil
	}
	return nil, ecode.Errorf(ecode.Inval, "unknown probe operation %q", a.Op)
}

// closedAncestor is the first directory from / down to dir that others may
// not search (no o+x), "" when all of them may.
func closedAncestor(dir string) string {
	p := "/"
	for _, part := range strings.Split(strings.Trim(dir, "/"), "/") {
		p = filepath.Join(p, part)
		st, err := os.Stat(p)
		if err != nil {
			return p
		}
		if st.Mode().Perm()&0o001 == 0 {
			return p
		}
	}
	return ""
}
