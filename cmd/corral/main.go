// Command corral is the Corral command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/cli"
	"github.com/corral/corral/internal/localcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	env := &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	args := os.Args[1:]
	code := cli.Execute(ctx, newRoot(env, args), args)
	stop()
	os.Exit(code)
}

// newRoot builds the command tree, local commands included, as far as args
// needs it: each call is a new process, which would otherwise build every
// command and flag to run one.
func newRoot(env *cli.Env, args []string) *cobra.Command {
	dirs := localDirs(env)
	env.Console = localcmd.Console(dirs)
	env.MachineConsole = localcmd.MachineConsole(dirs)
	return cli.NewRootFor(env, args, localcmd.Extras(dirs))
}

// localDirs gives the local commands the settings env holds once the flags
// are parsed.
func localDirs(env *cli.Env) localcmd.Dirs {
	return localcmd.Dirs{
		StateDir: func() string { return env.StateDir },
		RunDir:   func() string { return env.RunDir },
		Socket:   func() string { return env.Socket },
		Stdout:   env.Stdout,
		Stderr:   env.Stderr,
	}
}
