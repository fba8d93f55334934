// Package osapi implements Ganeti's OS API (versions 10, 15 and 20) on a node:
// it discovers OS definitions in the search path, checks variants and
// parameters, builds the scripts' environment and runs the create, rename,
// import, export and verify scripts with a clean environment and a log file.
//
// Names and formats follow Ganeti exactly, so existing OS definitions
// (debootstrap, image, instance-debootstrap...) install unchanged.
package osapi

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/corral/corral/internal/ecode"
)

// Files of an OS definition directory.
const (
	APIVersionFile = "ganeti_api_version"
	VariantsFile   = "variants.list"
	ParametersFile = "parameters.list"
	VersionFile    = "os_version" // optional; its first line is the OS's version

	ScriptCreate          = "create"
	ScriptCreateUntrusted = "create_untrusted"
	ScriptExport          = "export"
	ScriptImport          = "import"
	ScriptRename          = "rename"
	ScriptVerify          = "verify"
)

// API versions this implementation speaks.
const (
	APIv10 = 10
	APIv15 = 15 // adds variants
	APIv20 = 20 // adds parameters and the verify script
)

// VariantDelimiter separates an OS name from its variant ("debootstrap+buster").
const VariantDelimiter = "+"

// maxDefinitionFile bounds how much of ganeti_api_version, variants.list and
// parameters.list we read: they are a few lines, and a runaway file must not
// exhaust the node daemon's memory.
const maxDefinitionFile = 1 << 20

// OS is one OS definition found on this node.
type OS struct {
	Name        string
	Path        string
	APIVersions []int // as declared in ganeti_api_version
	APIVersion  int   // effective: max of {10,15,20} ∩ APIVersions; 0 when invalid
	Variants    []string
	Parameters  [][2]string // name, description
	Trusted     bool        // false when the definition ships create_untrusted
	Version     string      // first line of os_version, "" when there is none
	Valid       bool
	Error       string // why the definition is invalid
}

// DefaultSearchPath is where nodes look for OS definitions, in order:
// Corral's own directories, then Ganeti's default OS_SEARCH_PATH, where
// packaged definitions such as Debian's ganeti-os-noop install. So
// definitions installed for Ganeti work unchanged, and one installed for
// Corral shadows a Ganeti one of the same name (the first directory wins).
// The node daemon prepends the repository's os/ directory in development
// clusters.
func DefaultSearchPath() []string {
	return []string{
		"/srv/corral/os", "/usr/local/lib/corral/os", "/usr/lib/corral/os", "/usr/share/corral/os",
		"/srv/ganeti/os", "/usr/local/lib/ganeti/os", "/usr/lib/ganeti/os", "/usr/share/ganeti/os",
	}
}

// SplitName splits "name+variant" at the first "+".
func SplitName(full string) (name, variant string) {
	name, variant, _ = strings.Cut(full, VariantDelimiter)
	return name, variant
}

// validName rejects names that would escape the search directory: OS names
// reach us from RPC and become path components.
func validName(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\x00")
}

// Discover lists every visible subdirectory of each search directory as an
// OS. When a name appears in several directories the first one wins, as with
// Ganeti. Invalid definitions are included with Valid=false and Error set, so
// `corral os diagnose` can explain them. Missing search directories are
// skipped; a directory that exists but cannot be read yields an error next to
// whatever the other directories provided. The result is sorted by name.
func Discover(searchPath []string) ([]OS, error) {
	seen := make(map[string]bool)
	var out []OS
	var errs []error
	for _, dir := range searchPath {
		entries, err := os.ReadDir(dir)
		if err != nil {
			// A missing entry, or a file where a directory was expected, is
			// just an unused search directory.
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				errs = append(errs, fmt.Errorf("reading OS search directory %s: %w", dir, err))
			}
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !validName(name) || seen[name] {
				continue
			}
			st, err := os.Stat(filepath.Join(dir, name)) // follows symlinked definitions
			if err != nil || !st.IsDir() {
				continue
			}
			seen[name] = true
			out = append(out, load(name, filepath.Join(dir, name)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// Find loads the OS called name (a "+variant" suffix is ignored) from the
// first search directory that has it. A missing OS is an ecode.NoEnt error.
// An invalid definition is returned together with an ecode.Environ error
// carrying the reason, so callers that only need a usable OS check err alone.
func Find(searchPath []string, name string) (*OS, error) {
	base, _ := SplitName(name)
	if !validName(base) {
		return nil, ecode.Errorf(ecode.Inval, "invalid OS name '%s'", name)
	}
	for _, dir := range searchPath {
		p := filepath.Join(dir, base)
		st, err := os.Stat(p)
		if err != nil || !st.IsDir() {
			continue
		}
		o := load(base, p)
		if !o.Valid {
			return &o, ecode.Errorf(ecode.Environ, "OS '%s' is invalid on this node: %s", base, o.Error)
		}
		return &o, nil
	}
	return nil, ecode.Errorf(ecode.NoEnt, "OS '%s' not found on this node", base)
}

// load reads one definition directory, checking it the way Ganeti does:
// API version file first, then the scripts, then the optional lists.
func load(name, dir string) OS {
	o := OS{Name: name, Path: dir}
	fail := func(format string, args ...any) OS {
		return OS{Name: name, Path: dir, Error: fmt.Sprintf(format, args...)}
	}

	apiPath := filepath.Join(dir, APIVersionFile)
	data, err := readDefinitionFile(apiPath)
	if err != nil {
		return fail("required file '%s' under %s: %v", APIVersionFile, dir, err)
	}
	versions, err := ParseAPIVersions(data)
	if err != nil {
		return fail("file '%s' under %s: %v", APIVersionFile, dir, err)
	}
	o.APIVersions = versions
	o.APIVersion = EffectiveAPIVersion(versions)
	if o.APIVersion == 0 {
		return fail("API version mismatch for %s: found %v, want one of [10 15 20]", dir, versions)
	}
	maxDeclared := slices.Max(versions)

	// create or create_untrusted; the latter marks the OS untrusted.
	hasCreate, err := checkScript(dir, ScriptCreate, false)
	if err != nil {
		return fail("%v", err)
	}
	hasUntrusted, err := checkScript(dir, ScriptCreateUntrusted, false)
	if err != nil {
		return fail("%v", err)
	}
	if !hasCreate && !hasUntrusted {
		return fail("file '%s' under %s is missing (need '%s' or '%s')", ScriptCreate, dir, ScriptCreate, ScriptCreateUntrusted)
	}
	o.Trusted = !hasUntrusted

	required := []string{ScriptExport, ScriptImport, ScriptRename}
	if maxDeclared >= APIv20 {
		required = append(required, ScriptVerify)
	}
	for _, s := range required {
		if _, err := checkScript(dir, s, true); err != nil {
			return fail("%v", err)
		}
	}

	if maxDeclared >= APIv15 {
		data, err := readDefinitionFile(filepath.Join(dir, VariantsFile))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fail("reading '%s' under %s: %v", VariantsFile, dir, err)
		default:
			o.Variants = ParseVariants(data)
		}
	}
	if maxDeclared >= APIv20 {
		data, err := readDefinitionFile(filepath.Join(dir, ParametersFile))
		if err != nil {
			return fail("required file '%s' under %s: %v", ParametersFile, dir, err)
		}
		o.Parameters = ParseParameters(data)
	}
	data, err = readDefinitionFile(filepath.Join(dir, VersionFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fail("reading '%s' under %s: %v", VersionFile, dir, err)
	default:
		o.Version = ParseVersion(data)
	}
	o.Valid = true
	return o
}

// checkScript reports whether dir/name exists, and fails if it is required
// and missing, not a regular file, or lacks the owner's execute bit.
func checkScript(dir, name string, required bool) (bool, error) {
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !required {
			return false, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("file '%s' under %s is missing", name, dir)
		}
		return false, fmt.Errorf("file '%s' under %s: %w", name, dir, err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("file '%s' under %s is not a regular file", name, dir)
	}
	if st.Mode().Perm()&0o100 == 0 {
		return false, fmt.Errorf("file '%s' under %s is not executable", name, dir)
	}
	return true, nil
}

// readDefinitionFile reads a small regular file, refusing anything else.
func readDefinitionFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxDefinitionFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxDefinitionFile {
		return nil, fmt.Errorf("larger than %d bytes", maxDefinitionFile)
	}
	return data, nil
}

// EffectiveAPIVersion is the highest declared version this implementation
// speaks, or 0 when there is none.
func EffectiveAPIVersion(declared []int) int {
	best := 0
	for _, v := range declared {
		if (v == APIv10 || v == APIv15 || v == APIv20) && v > best {
			best = v
		}
	}
	return best
}

// splitLines splits on \n, \r\n and \r, without a trailing empty element.
func splitLines(data []byte) []string {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// ParseAPIVersions parses ganeti_api_version: one integer per line,
// surrounding whitespace allowed. Like Ganeti, a blank or non-numeric line
// makes the whole file invalid.
func ParseAPIVersions(data []byte) ([]int, error) {
	var out []int
	for i, line := range splitLines(data) {
		v, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			return nil, fmt.Errorf("line %d: API version %q is not an integer", i+1, truncate(line, 40))
		}
		out = append(out, v)
	}
	return out, nil
}

// ParseVariants parses variants.list: one variant per line, surrounding
// whitespace stripped, blank lines and lines starting with '#' ignored.
func ParseVariants(data []byte) []string {
	var out []string
	for _, line := range splitLines(data) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// ParseVersion parses os_version: its first line, surrounding whitespace
// stripped; anything after it is ignored, as the OS API says.
func ParseVersion(data []byte) string {
	lines := splitLines(data)
	if len(lines) == 0 {
		return ""
	}
	return strings.TrimSpace(lines[0])
}

// ParseParameters parses parameters.list: each line is a parameter name, a
// run of whitespace and a free-text description. Blank lines are skipped (a
// blank line carries no parameter).
func ParseParameters(data []byte) [][2]string {
	var out [][2]string
	for _, line := range splitLines(data) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, desc := line, ""
		if i := strings.IndexFunc(line, unicode.IsSpace); i >= 0 {
			name, desc = line[:i], strings.TrimSpace(line[i:])
		}
		out = append(out, [2]string{name, desc})
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// CheckVariant applies Ganeti's variant rules and returns the variant the
// scripts will see. Without force: an OS with variants needs one, and it must
// be listed; an OS without variants accepts none. With force nothing is
// rejected. When no variant is given the first listed one is used, and an OS
// without variants always yields "".
func (o *OS) CheckVariant(variant string, force bool) (string, error) {
	if !o.hasVariants() {
		if variant != "" && !force {
			return "", ecode.Errorf(ecode.Inval, "OS '%s' does not support variants ('%s' passed)", o.Name, variant)
		}
		return "", nil
	}
	if variant == "" {
		if !force {
			return "", ecode.Errorf(ecode.Inval, "OS name must include a variant (OS '%s' supports: %s)", o.Name, strings.Join(o.Variants, ", "))
		}
		return o.Variants[0], nil
	}
	if !force && !slices.Contains(o.Variants, variant) {
		return "", ecode.Errorf(ecode.Inval, "unsupported variant '%s' of OS '%s' (supported: %s)", variant, o.Name, strings.Join(o.Variants, ", "))
	}
	return variant, nil
}

func (o *OS) hasVariants() bool { return o.APIVersion >= APIv15 && len(o.Variants) > 0 }

// CheckParams rejects parameter names the OS does not declare in
// parameters.list. OSes older than API 20 have no parameters and, as in
// Ganeti, are not checked.
func (o *OS) CheckParams(params map[string]string) error {
	if o.APIVersion < APIv20 {
		return nil
	}
	var unknown []string
	for name := range params {
		if !o.hasParam(name) {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	return ecode.Errorf(ecode.Inval, "the following parameters are not supported by the OS %s: %s", o.Name, strings.Join(unknown, ", "))
}

func (o *OS) hasParam(name string) bool {
	for _, p := range o.Parameters {
		if p[0] == name {
			return true
		}
	}
	return false
}
