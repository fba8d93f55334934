package osapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/secret"
)

// Log name prefixes, as Ganeti names its OS logs ("add" for create).
const (
	kindCreate = "add"
	kindRename = "rename"
	kindImport = "import"
	kindExport = "export"
	kindVerify = "verify"
)

const (
	// tailLines is how much of a failed script's log goes into the error.
	tailLines = 20
	// tailWindow bounds how much of the log is read to find those lines.
	tailWindow = 64 << 10
	// tailLineMax keeps one runaway line from bloating the error.
	tailLineMax = 512
	// waitDelay bounds how long Wait waits for pipes a script's leftover
	// children keep open after the script itself has exited.
	waitDelay  = 10 * time.Second
	logDirMode = 0o750
	logMode    = 0o600
)

// Runner runs OS scripts. The zero Timeout means no limit besides ctx.
type Runner struct {
	LogDir  string
	Logger  *slog.Logger
	Timeout time.Duration
}

// scriptRun describes one invocation.
type scriptRun struct {
	kind     string
	script   string
	args     []string
	env      envMap
	logName  []string // name parts between the kind and the timestamp
	stdin    io.Reader
	stdout   io.Writer // nil: into the log with stderr
	secrets  []string  // values redacted from the errors we build
	instance string    // for our own log lines
	// validation marks the verify script, whose rejection is reported
	// with Ganeti's text and the script's output.
	validation bool
}

// RunCreate runs the create script; reinstall sets INSTANCE_REINSTALL=1.
// Secret OS parameters reach this script only.
func (r *Runner) RunCreate(ctx context.Context, o *OS, inst Instance, reinstall bool) (string, error) {
	if err := usable(o); err != nil {
		return "", err
	}
	if !o.Trusted {
		if ok, _ := checkScript(o.Path, ScriptCreate, false); !ok {
			// Untrusted definitions are meant to run inside a helper VM,
			// which this node does not provide; running them on the node
			// would defeat the point.
			return "", ecode.Errorf(ecode.Environ, "OS '%s' is untrusted (it ships only '%s'), and installing it in a helper VM is not supported", o.Name, ScriptCreateUntrusted)
		}
	}
	env := instanceEnv(o, inst)
	if reinstall {
		env["INSTANCE_REINSTALL"] = "1"
	}
	secrets := privateValues(inst)
	for k, v := range inst.OSParamsSecret {
		env[ParamEnvName(k)] = v.Reveal()
		if !v.Empty() {
			secrets = append(secrets, v.Reveal())
		}
	}
	return r.run(ctx, o, scriptRun{
		kind: kindCreate, script: ScriptCreate, env: env,
		logName: []string{inst.OS, inst.Name}, secrets: secrets, instance: inst.Name,
	})
}

// RunRename runs the rename script: INSTANCE_NAME is the new name and
// OLD_INSTANCE_NAME the previous one.
func (r *Runner) RunRename(ctx context.Context, o *OS, inst Instance, oldName string) (string, error) {
	if err := usable(o); err != nil {
		return "", err
	}
	env := instanceEnv(o, inst)
	env["OLD_INSTANCE_NAME"] = oldName
	return r.run(ctx, o, scriptRun{
		kind: kindRename, script: ScriptRename, env: env,
		logName: []string{inst.OS, inst.Name}, secrets: privateValues(inst), instance: inst.Name,
	})
}

// privateValues are the values of the instance's private OS parameters,
// which our errors and log lines must not show.
func privateValues(inst Instance) []string {
	var out []string
	for _, v := range inst.OSParamsPrivate {
		if !v.Empty() {
			out = append(out, v.Reveal())
		}
	}
	return out
}

// RunVerify runs `verify parameters` with the core environment only, after
// rejecting undeclared parameters. private are the instance's private OS
// parameters: the script sees them like the others, but their values are
// kept out of the log lines and errors we write. OSes older than API 20
// have no verify script: nothing runs and the log path is empty. A script
// that rejects the values fails with Ganeti's "OS validation script failed"
// text and the script's last output lines.
func (r *Runner) RunVerify(ctx context.Context, o *OS, variant string, params map[string]string, private map[string]secret.Secret) (string, error) {
	if err := usable(o); err != nil {
		return "", err
	}
	if o.APIVersion < APIv20 {
		return "", nil
	}
	all := make(map[string]string, len(params)+len(private))
	for k, v := range params {
		all[k] = v
	}
	var secrets []string
	for k, v := range private {
		all[k] = v.Reveal()
		if !v.Empty() {
			secrets = append(secrets, v.Reveal())
		}
	}
	if err := o.CheckParams(all); err != nil {
		return "", err
	}
	full := o.Name
	if variant != "" {
		full += VariantDelimiter + variant
	}
	return r.run(ctx, o, scriptRun{
		kind: kindVerify, script: ScriptVerify, args: []string{"parameters"},
		env: coreEnv(o, variant, all, 0), logName: []string{full}, secrets: secrets, validation: true,
	})
}

// RunExport runs the export script for one disk; the script's stdout (the
// disk stream) goes to w, its stderr to the log.
func (r *Runner) RunExport(ctx context.Context, o *OS, inst Instance, diskIndex int, w io.Writer) (string, error) {
	return r.runDiskStream(ctx, o, inst, diskIndex, scriptRun{kind: kindExport, script: ScriptExport, stdout: w}, "EXPORT")
}

// RunImport runs the import script for one disk, feeding rd to its stdin.
func (r *Runner) RunImport(ctx context.Context, o *OS, inst Instance, diskIndex int, rd io.Reader) (string, error) {
	return r.runDiskStream(ctx, o, inst, diskIndex, scriptRun{kind: kindImport, script: ScriptImport, stdin: rd}, "IMPORT")
}

// runDiskStream runs an export or import script for one disk, with the
// <prefix>_INDEX, _DISK_PATH, _DEVICE and _DISK_URI variables of the OS API.
func (r *Runner) runDiskStream(ctx context.Context, o *OS, inst Instance, diskIndex int, run scriptRun, prefix string) (string, error) {
	if err := usable(o); err != nil {
		return "", err
	}
	if err := checkDiskIndex(inst, diskIndex); err != nil {
		return "", err
	}
	env := instanceEnv(o, inst)
	d := inst.Disks[diskIndex]
	env[prefix+"_INDEX"] = strconv.Itoa(diskIndex)
	if d.Path != "" {
		env[prefix+"_DISK_PATH"] = d.Path
		env[prefix+"_DEVICE"] = d.Path
	}
	setIf(env, prefix+"_DISK_URI", d.URI)
	run.env = env
	run.logName = []string{inst.OS, inst.Name, "disk" + strconv.Itoa(diskIndex)}
	run.instance = inst.Name
	run.secrets = privateValues(inst)
	return r.run(ctx, o, run)
}

func usable(o *OS) error {
	if o == nil {
		return ecode.Errorf(ecode.Inval, "no OS definition given")
	}
	if !o.Valid {
		return ecode.Errorf(ecode.Environ, "OS '%s' is invalid on this node: %s", o.Name, o.Error)
	}
	return nil
}

func checkDiskIndex(inst Instance, i int) error {
	if i < 0 || i >= len(inst.Disks) {
		return ecode.Errorf(ecode.Inval, "instance %s has no disk %d (it has %d)", inst.Name, i, len(inst.Disks))
	}
	return nil
}

func (r *Runner) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// run executes one script with exactly sr.env, in the OS directory, in its
// own process group so cancellation reaches everything it started.
func (r *Runner) run(ctx context.Context, o *OS, sr scriptRun) (string, error) {
	scriptPath := filepath.Join(o.Path, sr.script)
	if _, err := checkScript(o.Path, sr.script, true); err != nil {
		return "", ecode.Errorf(ecode.Environ, "OS '%s': %v", o.Name, err)
	}
	if err := checkEnv(sr.env); err != nil {
		return "", err
	}
	logFile, logPath, err := r.openLog(sr.kind, sr.logName)
	if err != nil {
		return "", ecode.ExecErrorf("creating the OS script log: %w", err)
	}
	defer logFile.Close()

	runCtx := ctx
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}

	cmd := exec.CommandContext(runCtx, scriptPath, sr.args...)
	cmd.Dir = o.Path
	cmd.Env = sr.env.list()
	cmd.Stdin = sr.stdin
	cmd.Stdout = logFile
	if sr.stdout != nil {
		cmd.Stdout = sr.stdout
	}
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Scripts start debootstrap, dd, mounts...: killing only the shell would
	// leave those running against the instance's disks.
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = waitDelay

	log := r.logger().With("kind", sr.script, "os", o.Name, "log", logPath)
	if sr.instance != "" {
		log = log.With("instance", sr.instance)
	}
	log.Info("running OS script")
	runErr := cmd.Run()
	if runErr == nil {
		log.Info("OS script succeeded")
		return logPath, nil
	}

	tail := lastLines(logPath, tailLines, sr.secrets)
	what := fmt.Sprintf("OS '%s' script '%s'", o.Name, sr.script)
	if sr.instance != "" {
		what += " for instance " + sr.instance
	}
	var err2 error
	switch {
	case ctx.Err() != nil:
		err2 = ecode.ExecErrorf("%s was interrupted: %w; last lines of %s:\n%s", what, ctx.Err(), logPath, tail)
	case runCtx.Err() != nil:
		err2 = ecode.ExecErrorf("%s timed out after %s: %w; last lines of %s:\n%s", what, r.Timeout, runCtx.Err(), logPath, tail)
	default:
		var ee *exec.ExitError
		if errors.As(runErr, &ee) && sr.validation {
			err2 = ecode.ExecErrorf("OS validation script failed (%s), output: %s", exitReason(ee.ProcessState), tail)
		} else if errors.As(runErr, &ee) {
			err2 = ecode.ExecErrorf("%s failed (%s); last lines of %s:\n%s", what, ee.ProcessState, logPath, tail)
		} else {
			err2 = ecode.ExecErrorf("%s failed: %w; last lines of %s:\n%s", what, runErr, logPath, tail)
		}
	}
	log.Warn("OS script failed", "err", redact(runErr.Error(), sr.secrets))
	return logPath, err2
}

// exitReason words how a script ended as Ganeti's process results do.
func exitReason(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("terminated by signal %d", int(ws.Signal()))
	}
	return fmt.Sprintf("exited with exit code %d", ps.ExitCode())
}

// checkEnv refuses variables exec cannot pass faithfully. Only names appear
// in the error: values may be secret.
func checkEnv(env envMap) error {
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return ecode.Errorf(ecode.Inval, "invalid environment variable name %q for an OS script", k)
		}
		if strings.ContainsRune(v, 0) {
			return ecode.Errorf(ecode.Inval, "value of %s contains a NUL byte", k)
		}
	}
	return nil
}

// openLog creates <LogDir>/<kind>-<parts...>-<timestamp>.log exclusively,
// adding a counter when a run of the same kind started in the same second.
func (r *Runner) openLog(kind string, parts []string) (*os.File, string, error) {
	if r.LogDir == "" {
		return nil, "", errors.New("no log directory configured")
	}
	if err := os.MkdirAll(r.LogDir, logDirMode); err != nil {
		return nil, "", err
	}
	var b strings.Builder
	b.WriteString(kind)
	for _, p := range parts {
		if p != "" {
			b.WriteString("-")
			b.WriteString(fileSafe(p))
		}
	}
	b.WriteString("-")
	b.WriteString(time.Now().Format("2006-01-02_15_04_05"))
	base := b.String()
	for i := 1; ; i++ {
		name := base + ".log"
		if i > 1 {
			name = base + "-" + strconv.Itoa(i) + ".log"
		}
		p := filepath.Join(r.LogDir, name)
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, logMode)
		if err == nil {
			return f, p, nil
		}
		if !errors.Is(err, fs.ErrExist) || i >= 1000 {
			return nil, "", err
		}
	}
}

// fileSafe keeps names from the configuration from escaping the log
// directory or producing awkward file names.
func fileSafe(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '+', c == '-':
			return c
		}
		return '_'
	}, s)
}

// lastLines returns up to n final lines of the file, reading only its tail,
// with every occurrence of a secret value replaced. Secrets may span lines
// (keys), so matching runs over raw bytes, and the read starts early enough
// that a secret cut by the window edge is still matched whole.
func lastLines(path string, n int, secrets []string) string {
	f, err := os.Open(path)
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "(log unreadable: " + err.Error() + ")"
	}
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	off := max(st.Size()-tailWindow, 0)
	readOff := max(off-int64(longest), 0)
	data := make([]byte, st.Size()-readOff)
	if _, err := f.ReadAt(data, readOff); err != nil && !errors.Is(err, io.EOF) {
		return "(log unreadable: " + err.Error() + ")"
	}
	masked := make([]bool, len(data))
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for i := 0; i < len(data); {
			j := bytes.Index(data[i:], []byte(s))
			if j < 0 {
				break
			}
			for k := i + j; k < i+j+len(s); k++ {
				masked[k] = true
			}
			i += j + 1
		}
	}
	start := int(off - readOff)
	if off > 0 {
		// The window starts mid-line: drop the fragment.
		if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
			start += i + 1
		} else {
			start = len(data)
		}
	}
	var b strings.Builder
	for i := start; i < len(data); i++ {
		if !masked[i] {
			b.WriteByte(data[i])
			continue
		}
		if i == start || !masked[i-1] {
			b.WriteString("<redacted>")
		}
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > tailLineMax {
			lines[i] = l[:tailLineMax] + "..."
		}
	}
	return strings.Join(lines, "\n")
}

// redact removes secret values from text we are about to put in an error or
// our own log.
func redact(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "<redacted>")
		}
	}
	return s
}
