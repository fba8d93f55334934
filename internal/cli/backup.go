package cli

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/opcodes"
)

func backupHead() *cobra.Command {
	c := newGroup("backup", "Export instances to a node and import them back",
		"  corral backup export -n node2 web1\n  corral backup list\n  corral backup import -n node1 --src-node node2 -t file web1\n  corral backup remove web1")
	c.Long = `Exports keep a copy of an instance on a node, outside the cluster's
configuration: one image per disk and a config.ini (Ganeti's layout) with the
instance's settings, under the node's export directory. An instance can be
recreated from its export, on this cluster or on one that mounts the same
exports. A node keeps one export per instance name; a new export replaces the
old one.`
	return c
}

func (a *app) addBackupCommands(c *cobra.Command) {
	c.AddCommand(a.backupExportCmd(), a.backupImportCmd(), a.backupListCmd(), a.backupRemoveCmd())
	c.AddCommand(a.listFieldsCmd("export", "backup", "exports"))
}

func (a *app) backupExportCmd() *cobra.Command {
	var o jobOpts
	var node, compress string
	var timeout int
	var noShutdown, removeInstance, ignoreRemoveFailures bool
	cmd := &cobra.Command{
		Use:   "export -n NODE [flags] INSTANCE",
		Short: "Export an instance to a node",
		Long: `Export an instance to a node (OP_BACKUP_EXPORT, mode local): its disks are
copied into the node's export directory together with a config.ini describing
the instance. The instance is shut down for the copy (after at most
--shutdown-timeout seconds it is stopped hard) and started again afterwards if
it was running. --noshutdown keeps a running instance running: its node makes a
point-in-time copy of each disk while the guest runs (kvm: a qemu backup job),
exports the copies and removes them afterwards. The image is as consistent as
a power cut at that moment would leave it: only what the guest had written
out is in it. --noshutdown is refused for rbd disks and with --remove-instance.

--remove-instance removes the instance once the export has succeeded, which
turns the export into a move; --ignore-remove-failures lets that removal
succeed even if some disks could not be deleted. --compress compresses the
disk streams (none, gzip, gzip-fast, gzip-slow or zstd).

The command fails (exit status 1) when the final step or any disk failed.`,
		Example: `  corral backup export -n node2 web1
  corral backup export -n node2 --compress zstd --shutdown-timeout 30 web1
  corral backup export -n node2 --noshutdown web1
  corral backup export -n node2 --remove-instance --submit web1`,
		Args: exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usagef("the target node (-n NODE) is required")
			}
			if !slices.Contains(opcodes.Compressions, compress) {
				return paramErr("--compress: unknown compression %q (none, gzip, gzip-fast, gzip-slow or zstd)", compress)
			}
			op := map[string]any{
				"OP_ID":         "OP_BACKUP_EXPORT",
				"instance_name": args[0],
				"mode":          "local",
				"target_node":   node,
				"shutdown":      !noShutdown,
				"compress":      compress,
			}
			if cmd.Flags().Changed("shutdown-timeout") {
				if timeout < 0 {
					return paramErr("--shutdown-timeout must not be negative")
				}
				op["shutdown_timeout"] = timeout
			}
			if removeInstance {
				op["remove_instance"] = true
			}
			if ignoreRemoveFailures {
				op["ignore_remove_failures"] = true
			}
			return a.runJob(cmd, &o, op, printExportResult)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&node, "node", "n", "", "the node that keeps the export (required)")
	f.IntVar(&timeout, "shutdown-timeout", 120, "seconds to wait for a clean shutdown before stopping the instance hard")
	f.BoolVar(&noShutdown, "noshutdown", false, "export without shutting the instance down")
	f.BoolVar(&removeInstance, "remove-instance", false, "remove the instance once it is exported")
	f.BoolVar(&ignoreRemoveFailures, "ignore-remove-failures", false, "with --remove-instance: remove it even if some of its disks cannot be deleted")
	f.StringVar(&compress, "compress", "none", "compression of the disk streams: none, gzip, gzip-fast, gzip-slow or zstd")
	return cmd
}

// printExportResult checks OP_BACKUP_EXPORT's [finalize_ok, [disk_ok...]]
// and fails the command when any part failed, as gnt-backup does.
func printExportResult(_ io.Writer, res any) error {
	l, _ := res.([]any)
	if len(l) != 2 {
		return fmt.Errorf("unexpected export result %v", res)
	}
	disks, _ := l[1].([]any)
	var bad []string
	for i, d := range disks {
		if d != true {
			bad = append(bad, fmt.Sprint(i))
		}
	}
	if l[0] == true && len(bad) == 0 {
		return nil
	}
	msg := "Failure: the export failed:"
	if l[0] != true {
		msg += " the final step (writing config.ini) failed;"
	}
	if len(bad) > 0 {
		msg += fmt.Sprintf(" disk(s) %s could not be exported;", strings.Join(bad, ", "))
	}
	return &exitError{code: ExitError, msg: msg[:len(msg)-1]}
}

func (a *app) backupImportCmd() *cobra.Command {
	var o jobOpts
	var (
		node, srcNode, srcDir, template, hv, be string
		disks, nets                             []string
		noStart                                 bool
	)
	cmd := &cobra.Command{
		Use:   "import -n NODE -t TEMPLATE [--src-node NODE] [--src-dir DIR] [flags] INSTANCE",
		Short: "Create an instance from an export",
		Long: `Create an instance from an export (OP_INSTANCE_CREATE, mode import): its
disks are filled from the export's images instead of by the OS's create
script, and the OS's import and rename scripts run as needed.

--src-dir names the export: the exported instance's name, looked up in the
nodes' export directories (of a path such as Ganeti's /srv/ganeti/export/web1
only the last element counts); it defaults to the new instance's name. --src-node is the node holding it; without it the master searches the
nodes. The export's config.ini supplies the OS, the disks, the NICs and the
instance's parameters; --disk, --net, -B and -H override them (same syntax as
"corral instance add"). The instance is started afterwards unless --no-start.`,
		Example: `  corral backup import -n node1 -t file --src-node node2 web1
  corral backup import -n node1 -t file --src-node node2 --src-dir web1 -B memory=2G web1-copy
  corral backup import -n node1 -t file --src-node node2 --net 0:link=br1 --no-start web1`,
		Args: exactArgs(1, "the instance name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if node == "" {
				return usagef("the primary node (-n NODE) is required")
			}
			if template == "" {
				return usagef("the disk template (-t diskless|file) is required")
			}
			diskList, err := parseDisks(disks, "")
			if err != nil {
				return err
			}
			// Without --net the export's NICs apply: an empty list, not the
			// single default NIC of instance add.
			nics := []any{}
			if len(nets) > 0 {
				if nics, err = parseNICs(nets, false); err != nil {
					return err
				}
			}
			if srcDir == "" {
				srcDir = args[0]
			}
			op := map[string]any{
				"OP_ID":         "OP_INSTANCE_CREATE",
				"mode":          "import",
				"instance_name": args[0],
				"pnode":         node,
				"src_path":      srcDir,
				"disk_template": template,
				"disks":         diskList,
				"nics":          nics,
				"hvparams":      map[string]any{},
				"beparams":      map[string]any{},
				"start":         !noStart,
			}
			if srcNode != "" {
				op["src_node"] = srcNode
			}
			if err := applyHVBE(op, hv, be); err != nil {
				return err
			}
			return a.runJob(cmd, &o, op, nil)
		},
	}
	addJobFlags(cmd, &o, true)
	f := cmd.Flags()
	f.StringVarP(&node, "node", "n", "", "primary node of the new instance (required)")
	f.StringVar(&srcNode, "src-node", "", "node holding the export (default: searched)")
	f.StringVar(&srcDir, "src-dir", "", "the export: the exported instance's name (default: the instance name)")
	f.StringVarP(&template, "disk-template", "t", "", "disk template: diskless or file (required)")
	f.StringArrayVar(&disks, "disk", nil, "override a disk: N:size=SIZE[,mode=rw|ro] (repeatable)")
	f.StringArrayVar(&nets, "net", nil, "override the NICs: N:mode=bridged|routed,link=..,mac=auto|MAC,ip=.. (repeatable)")
	f.StringVarP(&hv, "hypervisor-parameters", "H", "", "hypervisor and its parameters: HV[:key=value,...]")
	f.StringVarP(&be, "backend-parameters", "B", "", "backend parameters: memory=SIZE,vcpus=N,...")
	f.BoolVar(&noStart, "no-start", false, "do not start the instance after importing it")
	return cmd
}

func (a *app) backupListCmd() *cobra.Command {
	var o jobOpts
	var nodes []string
	var noHeaders bool
	var sep string
	cmd := &cobra.Command{
		Use:     "list [--node NODE]...",
		Aliases: []string{"ls"},
		Short:   "List the exports on the nodes",
		Long: `List the exports the nodes keep (OP_BACKUP_QUERY), one line per node and
export, of every node or of those given with --node. A node that cannot be
asked is reported on stderr.`,
		Example: "  corral backup list\n  corral backup list --node node2 --no-headers",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.quiet = true
			want := make([]any, len(nodes))
			for i, n := range nodes {
				want[i] = n
			}
			op := map[string]any{"OP_ID": "OP_BACKUP_QUERY", "nodes": want, "use_locking": false}
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				return writeExportList(w, cmd.ErrOrStderr(), res, noHeaders, sep)
			})
		},
	}
	addJobFlags(cmd, &o, false)
	f := cmd.Flags()
	f.StringArrayVar(&nodes, "node", nil, "list only this node's exports (repeatable)")
	f.BoolVar(&noHeaders, "no-headers", false, "do not print the header line")
	f.StringVar(&sep, "separator", "", "join the fields with this string instead of aligning them in columns")
	return cmd
}

// writeExportList prints OP_BACKUP_QUERY's {node: [export...] | false} as
// a Node/Export table sorted by node and export.
func writeExportList(w, errw io.Writer, res any, noHeaders bool, sep string) error {
	byNode, ok := res.(map[string]any)
	if !ok && res != nil {
		return fmt.Errorf("unexpected export list %v", res)
	}
	nodes := make([]string, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	lines := [][]string{}
	if !noHeaders {
		lines = append(lines, []string{"Node", "Export"})
	}
	for _, n := range nodes {
		l, ok := byNode[n].([]any)
		if !ok {
			fmt.Fprintf(errw, "Warning: cannot get the exports of node %s\n", n)
			continue
		}
		names := make([]string, len(l))
		for i, e := range l {
			names[i] = fmt.Sprint(e)
		}
		sort.Strings(names)
		for _, e := range names {
			lines = append(lines, []string{n, e})
		}
	}
	return writeLines(w, lines, []bool{false, false}, sep)
}

func (a *app) backupRemoveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove INSTANCE",
		Short: "Remove an instance's exports",
		Long: `Remove the exports of an instance from every node that keeps one
(OP_BACKUP_REMOVE). The instance itself need not exist any more.`,
		Example: "  corral backup remove web1",
		Args:    exactArgs(1, "the instance name"),
	}
	return a.jobCmd(cmd, fixedJob(func(args []string) map[string]any {
		return map[string]any{"OP_ID": "OP_BACKUP_REMOVE", "instance_name": args[0]}
	}))
}
