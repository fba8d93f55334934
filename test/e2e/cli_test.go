package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/corral/corral/internal/devcluster"
)

// TestCLI runs the scenarios in testdata/cli against a fresh dev cluster
// each (fake hypervisor, one extra node), with the real corral binary.
func TestCLI(t *testing.T) {
	requireRoot(t)
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "cli"),
		Setup: func(env *testscript.Env) error {
			dir, err := os.MkdirTemp("", "corral-cli-")
			if err != nil {
				return err
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			st, err := devcluster.Up(ctx, devcluster.Options{StateDir: dir, Nodes: 1, BinDir: binDir,
				OSDir: filepath.Join(repoDir, "os"), Hypervisors: []string{"fake"}})
			env.Defer(func() {
				_ = devcluster.Down(context.Background(), dir, true, func(string, ...any) {})
				_ = os.Remove(dir)
			})
			if err != nil {
				return err
			}
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("CORRAL_STATE_DIR", st.StateDir)
			env.Setenv("CORRAL_RUN_DIR", st.RunDir)
			env.Setenv("CORRAL_SOCKET", st.Socket)
			return nil
		},
	})
}
