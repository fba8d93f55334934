// Package cli is the `corral` command line. It speaks LUXI to corrald, in
// the habits of Ganeti's gnt-* tools: commands that change something submit
// a job and follow it, printing its log, unless --submit asks to return at
// once with the job id; lists are aligned tables with -o field selection;
// failures print "Failure: ..." on stderr and exit with a status derived from
// the error's class (ecode.ExitCode).
//
// Other packages add commands through NewRoot's extra arguments, or
// NewRootFor's Extras; they read the resolved paths from the shared *Env
// once flags have been parsed. NewRootFor builds only the part of the tree a
// command line needs (see Section), which is what the corral binary runs.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
)

// Defaults of the global path flags and the environment variables that
// override them.
const (
	DefaultRunDir   = "/run/corral"
	DefaultStateDir = "/var/lib/corral"
	EnvRunDir       = "CORRAL_RUN_DIR"
	EnvSocket       = "CORRAL_SOCKET"
	EnvStateDir     = "CORRAL_STATE_DIR"
)

// Exit statuses not derived from an error class.
const (
	ExitOK    = 0
	ExitError = 1 // generic failure, as Ganeti's tools
	ExitUsage = 2 // bad flags or arguments
)

// Env is what every command needs; tests construct it directly. Socket,
// RunDir and StateDir, when set before NewRoot, act as defaults that the
// environment variables and then the flags override; after flag parsing they
// hold the values in effect, for commands added by other packages.
type Env struct {
	Socket   string // LUXI socket path; default <run-dir>/master/luxi.sock
	RunDir   string
	StateDir string

	// Stdin, Stdout and Stderr default to the process's own streams.
	Stdin          io.Reader
	Stdout, Stderr io.Writer

	// Dial connects to corrald; nil means luxi.Dial(ctx, Socket).
	Dial func(ctx context.Context) (*luxi.Client, error)
	// Console attaches to an instance's serial console; nil means the build
	// has none.
	Console func(ctx context.Context, instance string, stdin io.Reader, stdout io.Writer) error
	// MachineConsole attaches to a bare-metal machine's serial console
	// through its conductor node; nil means the build has none.
	MachineConsole func(ctx context.Context, machine string, stdin io.Reader, stdout io.Writer) error

	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// Now is the clock for relative times (watcher pause); nil means time.Now.
	Now func() time.Time
	// Location is the zone times are printed in; nil means time.Local.
	Location *time.Location
	// IsTerminal reports whether a stream is an interactive terminal: it
	// decides about confirmation prompts and the progress line. nil means a
	// check of the file descriptor behind *os.File streams.
	IsTerminal func(stream any) bool

	// progressAfter and progressEvery pace the progress line; zero means
	// the defaults. Tests shorten them.
	progressAfter, progressEvery time.Duration
	// bmPoll paces `baremetal ... --wait`; zero means bmPoll.
	bmPoll time.Duration
	// coePoll paces `coe ... --wait`; zero means coePoll.
	coePoll time.Duration
}

func (e *Env) getenv(k string) string {
	if e.Getenv != nil {
		return e.Getenv(k)
	}
	return os.Getenv(k)
}

func (e *Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e *Env) loc() *time.Location {
	if e.Location != nil {
		return e.Location
	}
	return time.Local
}

func (e *Env) isTerminal(stream any) bool {
	if e.IsTerminal != nil {
		return e.IsTerminal(stream)
	}
	f, ok := stream.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func (e *Env) stdin() io.Reader {
	if e.Stdin != nil {
		return e.Stdin
	}
	return os.Stdin
}

// dial connects to corrald, marking a failure to connect so that it is
// reported as such rather than as a failed operation.
func (e *Env) dial(ctx context.Context) (*luxi.Client, error) {
	var c *luxi.Client
	var err error
	if e.Dial != nil {
		c, err = e.Dial(ctx)
	} else {
		c, err = luxi.Dial(ctx, e.Socket)
	}
	if err != nil {
		return nil, &connectError{socket: e.Socket, err: err}
	}
	return c, nil
}

// withClient runs f with a fresh connection, closed afterwards.
func (e *Env) withClient(ctx context.Context, f func(c *luxi.Client) error) error {
	c, err := e.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// resolve settles the path settings: flag, else environment variable, else
// the value preset in Env, else the built-in default.
func (e *Env) resolve(fs *pflag.FlagSet, preset paths) {
	pick := func(flag, envVar, preset, def string) string {
		if f := fs.Lookup(flag); f != nil && f.Changed {
			return f.Value.String()
		}
		if v := e.getenv(envVar); v != "" {
			return v
		}
		if preset != "" {
			return preset
		}
		return def
	}
	e.RunDir = pick("run-dir", EnvRunDir, preset.runDir, DefaultRunDir)
	e.StateDir = pick("state-dir", EnvStateDir, preset.stateDir, DefaultStateDir)
	e.Socket = pick("socket", EnvSocket, preset.socket, filepath.Join(e.RunDir, "master", "luxi.sock"))
}

// app carries the environment into the command constructors.
type app struct {
	env *Env
}

// Execute runs root with args and returns the process exit status, having
// printed any failure on root's error stream.
func Execute(ctx context.Context, root *cobra.Command, args []string) int {
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	w := root.ErrOrStderr()
	var ue *usageError
	if errors.As(err, &ue) {
		if cmd == nil {
			cmd = root
		}
		fmt.Fprintf(w, "Error: %s\n\n%s", ue.msg, cmd.UsageString())
		return ExitUsage
	}
	msg, code := FormatError(err)
	if msg != "" {
		fmt.Fprintln(w, msg)
	}
	return code
}

// FormatError renders err the way Ganeti's tools do and returns the exit
// status for it, derived from its class.
func FormatError(err error) (string, int) {
	var xe *exitError
	if errors.As(err, &xe) {
		return xe.msg, xe.code
	}
	var ce *connectError
	if errors.As(err, &ce) {
		cause := ce.err
		var oe *net.OpError
		if errors.As(cause, &oe) {
			cause = oe.Err // the path is in the message already
		}
		return fmt.Sprintf("Cannot communicate with the master daemon on %s (%v).\nIs corrald running and listening for connections?",
			ce.socket, cause), ecode.ExitCode(ecode.Environ)
	}
	var ie *interruptedError
	if errors.As(err, &ie) {
		return ie.Error(), ExitError
	}
	if errors.Is(err, context.Canceled) {
		return "Aborted. Jobs already submitted go on running in the background.", ExitError
	}
	e, ok := ecode.As(err)
	if !ok {
		return "Failure: " + err.Error(), ExitError
	}
	code := ecode.ExitCode(e.Class)
	switch e.Kind {
	case ecode.OpPrereqError:
		return fmt.Sprintf("Failure: prerequisites not met for this operation:\nerror type: %s, error details:\n%s", e.Class, e.Msg), code
	case ecode.OpExecError:
		return "Failure: command execution error:\n" + e.Msg, code
	case ecode.JobQueueDrainErr:
		return "Failure: the job queue is marked for drain and doesn't accept new requests", code
	case ecode.JobQueueFull:
		return "Failure: the job queue is full and doesn't accept new job submissions until old jobs are archived", code
	case ecode.ParameterError, ecode.UnitParseError:
		return "Failure: invalid parameter: " + e.Msg, code
	case ecode.OpCodeUnknown:
		return "Failure: unknown opcode: " + e.Msg, code
	}
	kind := string(e.Kind)
	if kind == "" {
		kind = "error"
	}
	return fmt.Sprintf("Failure: %s: %s", kind, e.Msg), code
}

// usageError is a mistake in the command line itself: Execute prints it with
// the command's usage and exits 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// exitError ends a command with a given status after it has printed what it
// had to say (msg may be empty).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d: %s", e.code, e.msg) }

// connectError is a failure to reach corrald.
type connectError struct {
	socket string
	err    error
}

func (e *connectError) Error() string { return fmt.Sprintf("connecting to %s: %v", e.socket, e.err) }
func (e *connectError) Unwrap() error { return e.err }

// interruptedError reports that the user stopped following a job that goes
// on running.
type interruptedError struct{ job int64 }

func (e *interruptedError) Error() string {
	return fmt.Sprintf("Interrupted. Job %d goes on running in the background; follow it with: corral job watch %d", e.job, e.job)
}

// paramErr is an invalid value given on the command line, reported like the
// option parser's own errors (exit status 2).
func paramErr(format string, args ...any) error {
	return ecode.New(ecode.ParameterError, ecode.Inval, fmt.Sprintf(format, args...))
}

// Argument validators that report a usage error.

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("expected %s", what)
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// groupRunE is the action of commands that only group subcommands: an
// unknown or missing subcommand is a usage error.
func groupRunE(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usagef("missing command for %q", cmd.CommandPath())
}

// newGroup makes a command that only holds subcommands.
func newGroup(use, short, example string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use:     use + " COMMAND",
		Aliases: aliases,
		Short:   short,
		Example: example,
		Args:    cobra.ArbitraryArgs,
		RunE:    groupRunE,
	}
}
