package iallocator

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Allocator answers request documents.
type Allocator interface {
	// Name is how operators and job logs name the allocator.
	Name() string
	Run(ctx context.Context, doc *Document) (*Answer, error)
}

// SearchPath is Ganeti's IALLOCATOR_SEARCH_PATH: where allocators named on
// the command line (-I hail) are looked up, in order.
var SearchPath = []string{"/usr/local/lib/ganeti/iallocators", "/usr/lib/ganeti/iallocators"}

// BuiltinName names the built-in allocator where an allocator name is
// expected (the cluster's default_iallocator, -I). Ganeti's "." means the
// cluster default, which is where a Corral cluster without one lands.
const BuiltinName = "corral-builtin"

// RunTimeout bounds an external allocator run (Ganeti's iallocator_runner
// RPC timeout is 15 minutes).
const RunTimeout = 15 * time.Minute

// External is an allocator program speaking the protocol: it gets the
// path of the request document as its argument (after its options) and
// prints the answer on stdout.
type External struct {
	Path string
	// Params are the cluster's default_iallocator_params, passed as
	// --key=value (a nil value: --key).
	Params map[string]*string
}

// Find looks name up in dirs (SearchPath when nil). A name with a slash
// is refused: allocators run from the search path only.
func Find(name string, dirs []string) (*External, error) {
	if dirs == nil {
		dirs = SearchPath
	}
	if name == "" || strings.ContainsRune(name, '/') || name == "." || name == ".." {
		return nil, ecode.Errorf(ecode.Inval, "Invalid iallocator name '%s'", name)
	}
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return &External{Path: p}, nil
		}
	}
	return nil, ecode.Errorf(ecode.Inval, "Iallocator '%s' not found in the iallocator search path (%s)", name, strings.Join(dirs, ", "))
}

// Name is the program's base name.
func (e *External) Name() string { return filepath.Base(e.Path) }

// Run writes the document to a private temporary file, runs the program
// on it and parses what it prints.
func (e *External) Run(ctx context.Context, doc *Document) (*Answer, error) {
	f, err := os.CreateTemp("", "corral-iallocator.")
	if err != nil {
		return nil, ecode.ExecErrorf("writing the iallocator request: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(doc.JSON); err != nil {
		f.Close()
		return nil, ecode.ExecErrorf("writing the iallocator request: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, ecode.ExecErrorf("writing the iallocator request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, RunTimeout)
	defer cancel()
	args := []string{f.Name()}
	for k, v := range e.Params {
		if v == nil {
			args = append(args, "--"+k)
		} else {
			args = append(args, "--"+k+"="+*v)
		}
	}
	args = append(args, doc.Request.extraArgs()...)
	cmd := exec.CommandContext(ctx, e.Path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, ecode.ExecErrorf("iallocator module '%s' failed: %w, output '%s'", e.Name(), err, tail(stderr.String()+stdout.String()))
		}
		return nil, ecode.ExecErrorf("running iallocator module '%s': %w", e.Name(), err)
	}
	return ParseAnswer(doc, stdout.Bytes())
}

// tail keeps the end of a long output for an error message.
func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 2000 {
		return "..." + s[len(s)-2000:]
	}
	return s
}

// Resolve names the allocator to use: name when given, else the cluster's
// default, else the built-in one. "." means the cluster default.
func Resolve(name, clusterDefault string, dirs []string) (Allocator, error) {
	if name == "" || name == "." {
		name = clusterDefault
	}
	if name == "" || name == "." || name == BuiltinName {
		return Builtin{}, nil
	}
	ext, err := Find(name, dirs)
	if err != nil {
		return nil, err
	}
	return ext, nil
}

// Failure turns an unsuccessful answer into Ganeti's error for the mode.
func Failure(a Allocator, doc *Document, ans *Answer) error {
	return ecode.Errorf(ecode.NoRes, "Can't compute %s using iallocator '%s': %s", what(doc.Request), a.Name(), ans.Info)
}

func what(r Request) string {
	switch r.(type) {
	case *Allocate, *MultiAllocate:
		return "nodes"
	case *Relocate:
		return "relocation"
	case *NodeEvacuate:
		return "node evacuation"
	case *ChangeGroup:
		return "group change"
	}
	return fmt.Sprintf("%s request", r.Mode())
}
