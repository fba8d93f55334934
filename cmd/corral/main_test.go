package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/corral/corral/internal/cli"
	"github.com/corral/corral/internal/localcmd"
)

// testEnv is an environment that reaches no master and no terminal.
func testEnv() (*cli.Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errw bytes.Buffer
	return &cli.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errw,
		Getenv:     func(string) string { return "" },
		IsTerminal: func(any) bool { return false },
		Socket:     "/nonexistent/luxi.sock",
	}, &out, &errw
}

// wholeRoot is the complete tree with the same local commands, built the
// eager way.
func wholeRoot(env *cli.Env) *cobra.Command {
	dirs := localDirs(env)
	env.Console = localcmd.Console(dirs)
	return cli.NewRoot(env, localcmd.ClusterCommands(dirs), localcmd.RootCommands(dirs))
}

// commandPaths lists the words naming every command below root.
func commandPaths(root *cobra.Command) [][]string {
	var paths [][]string
	var walk func(c *cobra.Command, words []string)
	walk = func(c *cobra.Command, words []string) {
		for _, sub := range c.Commands() {
			p := append(slices.Clone(words), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(root, nil)
	return paths
}

// describe writes what an operator can see of c and everything below it:
// texts, aliases, whether it runs, every flag with its type, default and
// usage, and its subcommands.
func describe(w *strings.Builder, c *cobra.Command) {
	fmt.Fprintf(w, "command %q use=%q aliases=%q hidden=%v deprecated=%q runnable=%v available=%v args=%v\n",
		c.CommandPath(), c.Use, c.Aliases, c.Hidden, c.Deprecated, c.Runnable(), c.IsAvailableCommand(), c.Args != nil)
	fmt.Fprintf(w, "  short=%q\n  long=%q\n  example=%q\n", c.Short, c.Long, c.Example)
	flags := func(kind string, fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			fmt.Fprintf(w, "  %s --%s -%s %s default=%q noopt=%q hidden=%v deprecated=%q usage=%q annotations=%v\n",
				kind, f.Name, f.Shorthand, f.Value.Type(), f.DefValue, f.NoOptDefVal, f.Hidden, f.Deprecated, f.Usage, f.Annotations)
		})
	}
	flags("local", c.LocalNonPersistentFlags())
	flags("persistent", c.PersistentFlags())
	for _, sub := range c.Commands() {
		describe(w, sub)
	}
}

// section is the command directly under the root that c is, or is in.
func section(c *cobra.Command) *cobra.Command {
	for c.HasParent() && c.Parent().HasParent() {
		c = c.Parent()
	}
	return c
}

// TestLazyTreeIsTheWholeTree: for every command, the tree built for a
// command line naming it holds that command's whole section exactly as the
// complete tree has it, the other sections as the root lists them, and
// answers help, completion and usage errors byte for byte as the complete
// tree does.
func TestLazyTreeIsTheWholeTree(t *testing.T) {
	env, _, _ := testEnv()
	whole := wholeRoot(env)
	var wholeTop strings.Builder
	for _, c := range whole.Commands() {
		fmt.Fprintf(&wholeTop, "%q %q %q available=%v topic=%v hidden=%v\n",
			c.Name(), c.Aliases, c.Short, c.IsAvailableCommand(), c.IsAdditionalHelpTopicCommand(), c.Hidden)
	}
	paths := commandPaths(whole)
	if len(paths) < 80 {
		t.Fatalf("only %d commands in the whole tree", len(paths))
	}
	for _, p := range paths {
		env, _, _ := testEnv()
		lazy := newRoot(env, p)
		got, _, err := lazy.Find(p)
		want, _, _ := whole.Find(p)
		if err != nil || got.CommandPath() != want.CommandPath() {
			t.Errorf("%v: found %q (%v), want %q", p, got.CommandPath(), err, want.CommandPath())
			continue
		}
		var g, w strings.Builder
		describe(&g, section(got))
		describe(&w, section(want))
		if g.String() != w.String() {
			t.Errorf("%v: the lazy tree's section differs:\n%s", p, lineDiff(g.String(), w.String()))
		}
		var top strings.Builder
		for _, c := range lazy.Commands() {
			fmt.Fprintf(&top, "%q %q %q available=%v topic=%v hidden=%v\n",
				c.Name(), c.Aliases, c.Short, c.IsAvailableCommand(), c.IsAdditionalHelpTopicCommand(), c.Hidden)
		}
		if top.String() != wholeTop.String() {
			t.Errorf("%v: the lazy tree's top level differs:\n%s", p, lineDiff(top.String(), wholeTop.String()))
		}
	}

	// What the command line prints, without reaching a master: help, the
	// help command, completion and usage errors from the flag parser.
	lines := [][]string{
		nil, {"--help"}, {"-h"}, {"--version"}, {"help"}, {"no-such-command"}, {"--no-such-flag"},
		{cobra.ShellCompRequestCmd, ""}, {cobra.ShellCompNoDescRequestCmd, "i"},
		{"--socket", "/x.sock", "instance", "list", "--help"}, {"--state-dir=/x", "dev", "--help"},
		{"--socket", "help", "job", "--help"},
	}
	for _, p := range paths {
		lines = append(lines,
			append(slices.Clone(p), "--help"),
			append([]string{"help"}, p...),
			append(append([]string{cobra.ShellCompRequestCmd}, p...), ""),
			append(append([]string{cobra.ShellCompRequestCmd}, p...), "--"),
			append(slices.Clone(p), "--no-such-flag"))
	}
	for _, args := range lines {
		got := runLine(args, func(env *cli.Env) *cobra.Command { return newRoot(env, args) })
		want := runLine(args, wholeRoot)
		if got != want {
			t.Errorf("corral %s:\n%s", strings.Join(args, " "), lineDiff(got, want))
		}
	}
}

// runLine runs one command line on a fresh tree and returns what it printed
// and its exit status.
func runLine(args []string, build func(*cli.Env) *cobra.Command) string {
	env, out, errw := testEnv()
	code := cli.Execute(context.Background(), build(env), args)
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errw)
}

// lineDiff shows the first lines where got and want part.
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return fmt.Sprintf("line %d:\n  got  %q\n  want %q", i+1, gl, wl)
		}
	}
	return "(same lines)"
}

// TestLazyTreeLeavesOtherSectionsOut: a command line builds its own section
// and no other; the root's own flags build none.
func TestLazyTreeLeavesOtherSectionsOut(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		built []string
	}{
		{[]string{"--version"}, nil},
		{[]string{"--socket", "/s", "job", "list"}, []string{"job"}},
		{[]string{"i", "list", "-o", "name"}, []string{"instance"}},
		{[]string{"cluster", "init", "--help"}, []string{"cluster"}},
		{[]string{"dev", "up"}, []string{"dev"}},
	} {
		env, _, _ := testEnv()
		root := newRoot(env, tc.args)
		var built []string
		for _, c := range root.Commands() {
			if c.HasSubCommands() {
				built = append(built, c.Name())
			}
		}
		if !slices.Equal(built, tc.built) {
			t.Errorf("%v built %v, want %v", tc.args, built, tc.built)
		}
	}
}

// BenchmarkRoot: building the tree and running `corral --version` on it,
// the whole tree against the part a command line needs.
func BenchmarkRoot(b *testing.B) {
	for _, args := range [][]string{{"--version"}, {"job", "list", "--help"}, {"instance", "list", "--help"}} {
		for _, tc := range []struct {
			name  string
			build func(*cli.Env) *cobra.Command
		}{
			{"whole", wholeRoot},
			{"lazy", func(env *cli.Env) *cobra.Command { return newRoot(env, args) }},
		} {
			b.Run(tc.name+"/"+strings.Join(args, "_"), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					env, _, _ := testEnv()
					if code := cli.Execute(context.Background(), tc.build(env), args); code != 0 {
						b.Fatalf("exit %d", code)
					}
				}
			})
		}
	}
}
