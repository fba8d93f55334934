// Package cmd_test checks what each binary links. corral-node runs as root
// on every node, corral-rapi is the public HTTP front and every corral
// call pays for what the CLI links at start: none may carry the master's
// code, which a stray import of a constant would pull in whole (and with
// it everything the master imports).
package cmd_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/corral/corral/"

// forbidden lists, per binary, the packages (and their sub-packages) it
// must not link, with the reason.
var forbidden = map[string]map[string]string{
	"./cmd/corral-node": {
		"internal/master":   "corrald itself",
		"internal/cmdlib":   "the logical units",
		"internal/engine":   "the unit engine",
		"internal/jobqueue": "the job queue",
		"internal/query":    "the query language of the master",
		"internal/election": "the master election",
	},
	"./cmd/corral": {
		"internal/master":   "corrald itself",
		"internal/cmdlib":   "the logical units",
		"internal/engine":   "the unit engine",
		"internal/jobqueue": "the job queue",
		"internal/query":    "the query language of the master",
		"internal/election": "the master election",
	},
	"./cmd/corral-rapi": {
		"internal/master":     "corrald itself",
		"internal/cmdlib":     "the logical units",
		"internal/engine":     "the unit engine",
		"internal/jobqueue":   "the job queue",
		"internal/query":      "the query language of the master",
		"internal/election":   "the master election",
		"internal/nodeserver": "the node daemon",
		"internal/hypervisor": "the node's hypervisors",
		"go.etcd.io/etcd":     "the etcd client (corral-rapi talks to corrald over LUXI only)",
	},
}

func TestBinariesLinkOnlyTheirLayer(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to list dependencies: %v", err)
	}
	for bin, banned := range forbidden {
		t.Run(strings.TrimPrefix(bin, "./cmd/"), func(t *testing.T) {
			t.Parallel()
			// The test's working directory is cmd/; list from the module root.
			cmd := exec.Command(goTool, "list", "-deps", bin)
			cmd.Dir = ".."
			out, err := cmd.Output()
			if err != nil {
				var stderr []byte
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					stderr = ee.Stderr
				}
				t.Fatalf("go list -deps %s: %v\n%s", bin, err, stderr)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list -deps %s listed only %v", bin, deps)
			}
			for _, dep := range deps {
				for pkg, why := range banned {
					full := pkg
					if strings.HasPrefix(pkg, "internal/") {
						full = module + pkg
					}
					if dep == full || strings.HasPrefix(dep, full+"/") {
						t.Errorf("%s links %s (%s); find the import that pulls it in with: go list -deps -f '{{.ImportPath}}: {{.Imports}}' %s | grep %s",
							bin, dep, why, bin, pkg)
					}
				}
			}
		})
	}
}
