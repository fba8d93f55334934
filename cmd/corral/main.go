// Command corral is the Corral command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral/corral/internal/cli"
	"github.com/corral/corral/internal/localcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	env := &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	dirs := localcmd.Dirs{
		StateDir: func() string { return env.StateDir },
		RunDir:   func() string { return env.RunDir },
		Socket:   func() string { return env.Socket },
		Stdout:   os.Stdout,
		Stderr:   os.Stderr,
	}
	env.Console = localcmd.Console(dirs)
	root := cli.NewRoot(env, localcmd.ClusterCommands(dirs), localcmd.RootCommands(dirs))
	code := cli.Execute(ctx, root, os.Args[1:])
	stop()
	os.Exit(code)
}
