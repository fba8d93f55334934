package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/opcodes"
)

// tagCommands returns add-tags, remove-tags and list-tags for objects of
// kind ("cluster", "instance", "node" or "nodegroup"), and search-tags for
// the cluster, as Ganeti's gnt-* tools have them. Cluster commands take no
// object name.
func tagCommands(a *app, kind string) []*cobra.Command {
	named := kind != opcodes.TagCluster
	what := map[string]string{opcodes.TagInstance: "instance", opcodes.TagNode: "node",
		opcodes.TagNodeGroup: "node group", opcodes.TagCluster: "cluster", opcodes.TagNetwork: "network"}[kind]
	group := map[string]string{opcodes.TagInstance: "instance", opcodes.TagNode: "node",
		opcodes.TagNodeGroup: "group", opcodes.TagCluster: "cluster", opcodes.TagNetwork: "network"}[kind]
	// example is a sample object name for the help, with its separator.
	nameUse, example := "", ""
	if named {
		nameUse = "NAME "
		example = map[string]string{opcodes.TagInstance: "web1 ", opcodes.TagNode: "node2 ", opcodes.TagNodeGroup: "default ", opcodes.TagNetwork: "net1 "}[kind]
	}
	// split takes the object name off the arguments.
	split := func(args []string) (string, []string) {
		if named {
			return args[0], args[1:]
		}
		return "", args
	}

	change := func(use, opID, short, empty string) *cobra.Command {
		var o jobOpts
		var from string
		cmd := &cobra.Command{
			Use:   use + " " + nameUse + "TAG...",
			Short: short,
			Long: fmt.Sprintf(`%s (%s). Tags are up to %d characters long and
made of letters, digits and _ . + * / : @ -. --from FILE reads more tags
from FILE, one per line ("-" reads standard input).`,
				short, opID, opcodes.MaxTagLen),
			Example: fmt.Sprintf("  corral %s %s %senv:prod role:web\n  corral %s %s %s--from tags.txt",
				group, use, example, group, use, example),
			Args: func(cmd *cobra.Command, args []string) error {
				if named && len(args) == 0 {
					return usagef("expected the %s name and tags", what)
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, args []string) error {
				name, tags := split(args)
				if from != "" {
					more, err := a.readTags(from)
					if err != nil {
						return err
					}
					tags = append(tags, more...)
				}
				if len(tags) == 0 {
					return ecode.Errorf(ecode.Inval, "%s", empty)
				}
				l := make([]any, len(tags))
				for i, t := range tags {
					l[i] = t
				}
				op := map[string]any{"OP_ID": opID, "kind": kind, "tags": l}
				if named {
					op["name"] = name
				}
				return a.runJob(cmd, &o, op, nil)
			},
		}
		addJobFlags(cmd, &o, false)
		cmd.Flags().StringVar(&from, "from", "", `read tags from FILE, one per line ("-": standard input)`)
		return cmd
	}

	list := &cobra.Command{
		Use:     "list-tags" + strings.TrimSuffix(" "+nameUse, " "),
		Short:   fmt.Sprintf("List the tags of the %s", what),
		Long:    fmt.Sprintf("List the tags of the %s, sorted, one per line.", what),
		Example: strings.TrimRight(fmt.Sprintf("  corral %s list-tags %s", group, example), " "),
		Args: func(cmd *cobra.Command, args []string) error {
			if named {
				return exactArgs(1, "the "+what+" name")(cmd, args)
			}
			return noArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name, _ := split(args)
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				tags, err := c.QueryTags(ctx, kind, name)
				if err != nil {
					return err
				}
				slices.Sort(tags)
				out := cmd.OutOrStdout()
				for _, t := range tags {
					fmt.Fprintln(out, t)
				}
				return nil
			})
		},
	}

	cmds := []*cobra.Command{
		change("add-tags", "OP_TAGS_SET", fmt.Sprintf("Add tags to the %s", what), "No tags to be added"),
		change("remove-tags", "OP_TAGS_DEL", fmt.Sprintf("Remove tags from the %s", what), "No tags to be removed"),
		list,
	}
	if !named {
		cmds = append(cmds, searchTagsCmd(a))
	}
	return cmds
}

// searchTagsCmd is `cluster search-tags`: every object's tags matching a
// regular expression, as "PATH TAG" lines.
func searchTagsCmd(a *app) *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "search-tags PATTERN",
		Short: "Find tags matching a regular expression on every object",
		Long: `Search the tags of the cluster, its instances, nodes and node groups for a
regular expression (OP_TAGS_SEARCH) and print "PATH TAG" for each match, PATH
being /cluster, /instances/NAME, /nodes/NAME or /nodegroup/NAME.`,
		Example: "  corral cluster search-tags '^env:'",
		Args:    exactArgs(1, "a pattern"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.quiet = true
			op := map[string]any{"OP_ID": "OP_TAGS_SEARCH", "pattern": args[0]}
			return a.runJob(cmd, &o, op, printSearchResult)
		},
	}
	return cmd
}

func printSearchResult(w io.Writer, result any) error {
	rows, _ := result.([]any)
	lines := make([]string, 0, len(rows))
	for _, r := range rows {
		pair, _ := r.([]any)
		if len(pair) != 2 {
			return fmt.Errorf("unexpected search result %v", r)
		}
		lines = append(lines, fmt.Sprintf("%v %v", pair[0], pair[1]))
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// readTags reads one tag per line from a file or, for "-", standard input.
// Surrounding blanks are trimmed and blank lines skipped.
func (a *app) readTags(path string) ([]string, error) {
	var r io.Reader
	if path == "-" {
		r = a.env.stdin()
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, ecode.Errorf(ecode.Environ, "Can't read tags from %s: %v", path, err)
		}
		defer f.Close()
		r = f
	}
	var tags []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			tags = append(tags, t)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "Can't read tags from %s: %v", path, err)
	}
	return tags, nil
}
