package cli

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// statusKey holds the exit status of the last corral command of a script.
type statusKey struct{}

// TestScripts runs the CLI scenarios in testdata/script against a fake
// master. Besides testscript's own commands they have:
//
//	corral ARGS...  run the CLI in-process (CORRAL_SOCKET points at the fake)
//	status N        check the exit status of the last corral command
func TestScripts(t *testing.T) {
	runScripts(t, "testdata/script", (*fakeMaster).addGroups)
}

// runScripts runs the scenarios in dir, each against a fresh fake master
// that prepare completes, with the commands corral and status.
func runScripts(t *testing.T, dir string, prepare func(*fakeMaster)) {
	testscript.Run(t, testscript.Params{
		Dir: dir,
		Setup: func(e *testscript.Env) error {
			f, stop, err := startFake(context.Background())
			if err != nil {
				return err
			}
			e.Defer(stop)
			prepare(f)
			e.Setenv(EnvSocket, f.sock)
			e.Values[statusKey{}] = new(int)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"corral": func(ts *testscript.TestScript, neg bool, args []string) {
				env := &Env{
					Stdout:     ts.Stdout(),
					Stderr:     ts.Stderr(),
					Getenv:     ts.Getenv,
					Now:        func() time.Time { return time.Unix(fakeEpoch, 0) },
					Location:   time.UTC,
					IsTerminal: func(any) bool { return false },
				}
				code := Execute(context.Background(), NewRoot(env, nil, nil), args)
				*ts.Value(statusKey{}).(*int) = code
				switch {
				case code != 0 && !neg:
					ts.Fatalf("corral %q: exit status %d", args, code)
				case code == 0 && neg:
					ts.Fatalf("corral %q: unexpected success", args)
				}
			},
			"status": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: status N")
				}
				want, err := strconv.Atoi(args[0])
				ts.Check(err)
				if got := *ts.Value(statusKey{}).(*int); got != want {
					ts.Fatalf("exit status %d, want %d", got, want)
				}
			},
		},
	})
}
