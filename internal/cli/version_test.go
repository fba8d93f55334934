package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/corral/corral/internal/layout"
)

// TestVersionFlag: --version answers without a master to talk to.
func TestVersionFlag(t *testing.T) {
	var out, errw strings.Builder
	env := &Env{Stdout: &out, Stderr: &errw, Getenv: func(string) string { return "" }, IsTerminal: func(any) bool { return false }}
	code := Execute(context.Background(), NewRoot(env, nil, nil), []string{"--version"})
	if code != 0 || out.String() != "corral version "+layout.Version+"\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errw.String())
	}
}
