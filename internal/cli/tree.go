package cli

import (
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/layout"
)

// A Section is a command directly under the root ("instance", "job",
// "dev"), built in two steps so that a command line naming one section
// does not pay for building the others: every `corral` call is a new
// process, and building the whole tree with every flag is most of what the
// CLI itself costs at start.
//
// Head makes the command as the root's help and completion list it: its
// name, aliases and short text, no subcommands. Fill adds everything else
// (subcommands, flags, hooks) to the command Head made; nil means Head
// builds the whole command and there is nothing to put off.
type Section struct {
	Head func() *cobra.Command
	Fill func(head *cobra.Command)
}

// Extras are the commands other packages add to the tree.
type Extras struct {
	// Cluster returns the commands to add under "cluster" (init,
	// destroy, ...); it is called only when that section is built.
	Cluster func() []*cobra.Command
	// Root are more sections at the top level (dev).
	Root []Section
}

// NewRoot builds the whole command tree. clusterExtra are added under
// "cluster" (init, destroy), rootExtra at the top level (dev).
func NewRoot(env *Env, clusterExtra, rootExtra []*cobra.Command) *cobra.Command {
	ext := Extras{Cluster: func() []*cobra.Command { return clusterExtra }}
	for _, c := range rootExtra {
		ext.Root = append(ext.Root, Section{Head: func() *cobra.Command { return c }})
	}
	t := newTree(env, ext)
	t.buildAll()
	return t.root
}

// NewRootFor builds the tree as far as the command line args needs it: the
// section args names is built whole, the others only as the root's help
// lists them. Help for the root, "help ..." and shell completion build
// everything. Executing the result with the same args does what NewRoot's
// whole tree would.
func NewRootFor(env *Env, args []string, ext Extras) *cobra.Command {
	t := newTree(env, ext)
	t.buildFor(args)
	return t.root
}

// tree is a root command and the sections under it not built yet.
type tree struct {
	root    *cobra.Command
	pending map[*cobra.Command]func()
}

// newTree makes the root with its global flags and the heads of all
// sections.
func newTree(env *Env, ext Extras) *tree {
	var runDir, socket, stateDir string
	root := &cobra.Command{
		Use:   "corral",
		Short: "Manage a Corral cluster: nodes, instances, jobs",
		Long: `corral is the administration tool of a Corral cluster. It talks to the master
daemon (corrald) over its LUXI socket. Commands that change the cluster submit
a job and follow it until it ends, printing its log; --submit returns at once
with the job id instead.

Exit status: 0 on success, 2 for bad usage or invalid input, 3 for an unknown
object, 4 when it already exists, 5 for a wrong state, 6 for lack of
resources, 7 for an environment problem (such as no master daemon), 1 for any
other failure.` + remoteHelp,
		Example: `  corral cluster info
  corral instance add -t file -o debootstrap --disk 0:size=10G web1
  corral --socket /run/corral/master/luxi.sock job list
  corral --rapi https://master:5080 --rapi-user admin --rapi-password-file pw --rapi-ca ca.pem instance list`,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRunE,
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       layout.Version,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(env.stdin())
	if env.Stdout != nil {
		root.SetOut(env.Stdout)
	}
	if env.Stderr != nil {
		root.SetErr(env.Stderr)
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{msg: err.Error()} })

	pf := root.PersistentFlags()
	pf.StringVar(&runDir, "run-dir", DefaultRunDir, "directory of the daemons' sockets and runtime files (env "+EnvRunDir+")")
	pf.StringVar(&socket, "socket", "", "LUXI socket of the master daemon (env "+EnvSocket+"; default <run-dir>/master/luxi.sock)")
	pf.StringVar(&stateDir, "state-dir", DefaultStateDir, "directory of the persistent state, for commands that need it (env "+EnvStateDir+")")
	rf := addRemoteFlags(pf)

	// The flags are read back through the parsed flag set, where Changed
	// tells a given flag from its default.
	// The presets are taken now, so a tree run twice resolves the same way.
	preset := paths{runDir: env.RunDir, socket: env.Socket, stateDir: env.StateDir}
	presetDial, presetConsole := env.Dial, env.Console
	resolve := func(cmd *cobra.Command) {
		env.resolve(cmd.Flags(), preset)
		env.selectDial(cmd.Flags(), rf, presetDial, presetConsole)
	}
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) { resolve(cmd) }

	t := &tree{root: root, pending: map[*cobra.Command]func(){}}
	for _, s := range append((&app{env: env}).sections(ext.Cluster), ext.Root...) {
		t.add(s, resolve)
	}
	return t
}

// sections are the built-in top-level commands, in the order they are
// added; cluster gets the extra commands other packages add under it.
func (a *app) sections(clusterExtra func() []*cobra.Command) []Section {
	return []Section{
		{Head: clusterHead, Fill: func(c *cobra.Command) {
			a.addClusterCommands(c)
			if clusterExtra != nil {
				c.AddCommand(clusterExtra()...)
			}
		}},
		{Head: nodeHead, Fill: a.addNodeCommands},
		{Head: instanceHead, Fill: a.addInstanceCommands},
		{Head: jobHead, Fill: a.addJobCommands},
		{Head: filterHead, Fill: a.addFilterCommands},
		{Head: debugHead, Fill: a.addDebugCommands},
		{Head: groupHead, Fill: a.addGroupCommands},
		{Head: networkHead, Fill: a.addNetworkCommands},
		{Head: osHead, Fill: a.addOSCommands},
		{Head: backupHead, Fill: a.addBackupCommands},
		{Head: baremetalHead, Fill: a.addBaremetalCommands},
		{Head: coeHead, Fill: a.addCOECommands},
		{Head: a.versionHead},
	}
}

// add puts a section's head under the root and keeps what completes it for
// later. resolve is chained into the section's own persistent hooks once it
// is complete.
func (t *tree) add(s Section, resolve func(*cobra.Command)) {
	c := s.Head()
	t.root.AddCommand(c)
	if s.Fill == nil {
		chainPreRun(c, resolve)
		return
	}
	// The root's help lists a command that has no action of its own only
	// for its subcommands; until they are there, a stand-in action keeps
	// the head listed as the complete command would be.
	standIn := !c.Runnable()
	if standIn {
		c.RunE = func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("%w: %s", errNotBuilt, cmd.CommandPath())
		}
	}
	t.pending[c] = func() {
		delete(t.pending, c)
		if standIn {
			c.RunE = nil
		}
		s.Fill(c)
		chainPreRun(c, resolve)
	}
}

// errNotBuilt would mean a command ran whose section NewRootFor left out.
var errNotBuilt = errors.New("internal error: command run before it was built")

// buildAll completes every section.
func (t *tree) buildAll() {
	for _, c := range t.root.Commands() {
		if build, ok := t.pending[c]; ok {
			build()
		}
	}
}

// buildFor completes the section args names, found the way cobra will find
// the command to run (the root's flags and their values skipped). When args
// name no section the root's own help or usage shows only the heads, which
// are complete for it; "help ..." and the shell completion request ask
// about any part of the tree, and get all of it.
func (t *tree) buildFor(args []string) {
	found, _, err := t.root.Find(args)
	if err != nil || found == t.root && slices.ContainsFunc(args, wantsWholeTree) {
		t.buildAll()
		return
	}
	for found != t.root && found.Parent() != t.root {
		found = found.Parent()
	}
	if build, ok := t.pending[found]; ok {
		build()
	}
}

// wantsWholeTree tells the words that make cobra look commands up in the
// whole tree by themselves: its help command and its hidden completion
// requests.
func wantsWholeTree(arg string) bool {
	return arg == "help" || arg == cobra.ShellCompRequestCmd || arg == cobra.ShellCompNoDescRequestCmd
}

// paths are the path settings an Env held when the tree was built.
type paths struct{ runDir, socket, stateDir string }

// chainPreRun makes c and every command below it that has its own
// persistent pre-run hook (cobra runs only the nearest one) resolve the
// settings first, so commands added by other packages see them too.
func chainPreRun(c *cobra.Command, resolve func(*cobra.Command)) {
	switch {
	case c.PersistentPreRunE != nil:
		inner := c.PersistentPreRunE
		c.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
			resolve(cmd)
			return inner(cmd, args)
		}
	case c.PersistentPreRun != nil:
		inner := c.PersistentPreRun
		c.PersistentPreRun = func(cmd *cobra.Command, args []string) {
			resolve(cmd)
			inner(cmd, args)
		}
	}
	for _, sub := range c.Commands() {
		chainPreRun(sub, resolve)
	}
}
