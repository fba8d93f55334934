package nodeserver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
)

// The export directory holds one directory per exported instance, named
// after it, with the disk images and config.ini (Ganeti's layout). An
// export being built lives in <name>.new until finalize_export swaps it in.
const (
	exportDirMode    = 0o700
	exportFileMode   = 0o600
	exportConfigFile = "config.ini"
	exportBuildExt   = ".new"
)

var exportFileRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// exportDir is the node's export directory.
type exportDir struct {
	dir  string
	node string // for messages
}

// checkExportName accepts instance names only: the name is a path
// component under the export directory. A name ending in .new would be
// taken for an export being built and never listed, so it is refused
// outright rather than lost.
func checkExportName(name string) error {
	if err := hypervisor.CheckName(name); err != nil {
		return ecode.Errorf(ecode.Inval, "invalid export name %q", name)
	}
	if strings.HasSuffix(name, exportBuildExt) {
		return ecode.Errorf(ecode.Inval, "export name %q: names ending in %s are reserved for exports being built", name, exportBuildExt)
	}
	return nil
}

// checkExportFile accepts plain file names: no separators, no dot files,
// no "..", and not the metadata file, which only finalize_export writes.
func checkExportFile(name string) error {
	if len(name) > 255 || !exportFileRE.MatchString(name) || strings.Contains(name, "..") ||
		strings.HasPrefix(name, ".") || name == exportConfigFile {
		return ecode.Errorf(ecode.Inval, "invalid export file name %q", name)
	}
	return nil
}

// importPath is where an import writes file of the export being built,
// creating the directories.
func (d exportDir) importPath(name, file string) (string, error) {
	if err := checkExportName(name); err != nil {
		return "", err
	}
	if err := checkExportFile(file); err != nil {
		return "", err
	}
	build := filepath.Join(d.dir, name+exportBuildExt)
	if err := os.MkdirAll(d.dir, exportDirMode); err != nil {
		return "", ecode.Errorf(ecode.Environ, "creating %s: %v", d.dir, err)
	}
	if err := os.Mkdir(build, exportDirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", ecode.Errorf(ecode.Environ, "creating %s: %v", build, err)
	}
	return filepath.Join(build, file), nil
}

// exportPath is file of the finished export of name.
func (d exportDir) exportPath(name, file string) (string, error) {
	if err := checkExportName(name); err != nil {
		return "", err
	}
	if err := checkExportFile(file); err != nil {
		return "", err
	}
	return filepath.Join(d.dir, name, file), nil
}

// list names the finished exports: directories with a config.ini, other
// than exports being built and hidden leftovers.
func (d exportDir) list() ([]string, error) {
	entries, err := os.ReadDir(d.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "reading %s: %v", d.dir, err)
	}
	names := []string{}
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() || strings.HasPrefix(n, ".") || strings.HasSuffix(n, exportBuildExt) {
			continue
		}
		if st, err := os.Stat(filepath.Join(d.dir, n, exportConfigFile)); err == nil && st.Mode().IsRegular() {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names, nil
}

func (d exportDir) missing(name string) error {
	return ecode.Errorf(ecode.NoEnt, "no export of instance %s on node %s", name, d.node)
}

// info returns where the export lives and its config.ini.
func (d exportDir) info(name string) (string, string, error) {
	if err := checkExportName(name); err != nil {
		return "", "", err
	}
	p := filepath.Join(d.dir, name)
	data, err := os.ReadFile(filepath.Join(p, exportConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", d.missing(name)
	}
	if err != nil {
		return "", "", ecode.Errorf(ecode.Environ, "reading the export of %s: %v", name, err)
	}
	return p, string(data), nil
}

// remove deletes a finished export; a missing one is an error, as in
// Ganeti.
func (d exportDir) remove(name string) error {
	if err := checkExportName(name); err != nil {
		return err
	}
	p := filepath.Join(d.dir, name)
	if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
		return d.missing(name)
	}
	if err := os.RemoveAll(p); err != nil {
		return ecode.Errorf(ecode.Environ, "removing the export of %s: %v", name, err)
	}
	syncDir(d.dir)
	return nil
}

// finalize writes config.ini into the export being built and makes it the
// export of name. The old export is renamed aside before the new one is
// renamed in, so at every instant one complete export exists (or, before
// the first, none).
func (d exportDir) finalize(name, config string) error {
	if err := checkExportName(name); err != nil {
		return err
	}
	build := filepath.Join(d.dir, name+exportBuildExt)
	if st, err := os.Stat(build); err != nil || !st.IsDir() {
		return ecode.Errorf(ecode.NoEnt, "no export of instance %s is being built on node %s", name, d.node)
	}
	if err := atomicfile.WriteFile(filepath.Join(build, exportConfigFile), []byte(config), exportFileMode); err != nil {
		return ecode.Errorf(ecode.Environ, "writing the export's %s: %v", exportConfigFile, err)
	}
	final := filepath.Join(d.dir, name)
	// Instance names never start with a dot: the aside name cannot be
	// another instance's export.
	old := filepath.Join(d.dir, "."+name+".old")
	if err := os.RemoveAll(old); err != nil {
		return ecode.Errorf(ecode.Environ, "removing a leftover old export of %s: %v", name, err)
	}
	hadOld := true
	if err := os.Rename(final, old); errors.Is(err, fs.ErrNotExist) {
		hadOld = false
	} else if err != nil {
		return ecode.Errorf(ecode.Environ, "moving the old export of %s aside: %v", name, err)
	}
	if err := os.Rename(build, final); err != nil {
		if hadOld {
			os.Rename(old, final) // put the previous export back
		}
		return ecode.Errorf(ecode.Environ, "installing the export of %s: %v", name, err)
	}
	syncDir(d.dir)
	if hadOld {
		if err := os.RemoveAll(old); err != nil {
			return ecode.Errorf(ecode.Environ, "removing the old export of %s: %v", name, err)
		}
	}
	return nil
}

func (s *Server) exportList(ctx context.Context, _ struct{}) (any, error) {
	names, err := s.exports.list()
	if err != nil {
		return nil, err
	}
	return nodeapi.ExportListReply{Names: names}, nil
}

func (s *Server) exportInfo(ctx context.Context, a nodeapi.ExportNameArgs) (any, error) {
	p, cfg, err := s.exports.info(a.Name)
	if err != nil {
		return nil, err
	}
	return nodeapi.ExportInfoReply{Path: p, Config: cfg}, nil
}

func (s *Server) exportRemove(ctx context.Context, a nodeapi.ExportNameArgs) (any, error) {
	if err := s.exports.remove(a.Name); err != nil {
		return nil, err
	}
	s.log.Info("export removed", "instance", a.Name)
	return nil, nil
}

func (s *Server) exportFinalize(ctx context.Context, a nodeapi.ExportFinalizeArgs) (any, error) {
	if err := s.exports.finalize(a.Name, a.Config); err != nil {
		return nil, err
	}
	s.log.Info("export finalized", "instance", a.Name)
	return nil, nil
}
