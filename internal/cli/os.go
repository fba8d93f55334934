package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

func newOSCmd(a *app) *cobra.Command {
	c := newGroup("os", "Show the OS definitions instances are installed with",
		"  corral os list\n  corral os diagnose")
	c.AddCommand(a.osListCmd(), a.osDiagnoseCmd())
	return c
}

func (a *app) osListCmd() *cobra.Command {
	var o jobOpts
	var noHeaders bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the OS names instances can be created with",
		Long: `List the OS definitions valid on every vm_capable node, one name per line,
with a "+variant" suffix for each variant of an OS that has them (OP_OS_DIAGNOSE).
Hidden, blacklisted and invalid definitions are left out; see corral os diagnose.`,
		Example: "  corral os list\n  corral os list --no-headers",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.quiet = true
			op := map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": []string{"name", "variants"}, "names": []string{}}
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				rows, _ := res.([]any)
				var names []string
				for _, r := range rows {
					l, _ := r.([]any)
					if len(l) != 2 {
						return fmt.Errorf("unexpected OS row %v", r)
					}
					names = append(names, osNames(l[0], l[1])...)
				}
				sort.Strings(names)
				lines := [][]string{}
				if !noHeaders {
					lines = append(lines, []string{"Name"})
				}
				for _, n := range names {
					lines = append(lines, []string{n})
				}
				return writeLines(w, lines, []bool{false}, "")
			})
		},
	}
	addJobFlags(cmd, &o, false)
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "do not print the header line")
	return cmd
}

// osNames expands an OS into the names it is installed by.
func osNames(name, variants any) []string {
	n := fmt.Sprint(name)
	vs, _ := variants.([]any)
	if len(vs) == 0 {
		return []string{n}
	}
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		out = append(out, n+"+"+fmt.Sprint(v))
	}
	return out
}

func (a *app) osDiagnoseCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Show the state of every OS definition on every node",
		Long: `Show every OS definition found on the vm_capable, online nodes: valid for the
cluster only when valid on each of them, and per node its path, its state or
error, and its variants.`,
		Example: "  corral os diagnose",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.quiet = true
			op := map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "names": []string{},
				"output_fields": []string{"name", "valid", "variants", "node_status", "hidden", "blacklisted"}}
			return a.runJob(cmd, &o, op, printOSDiagnose)
		},
	}
	addJobFlags(cmd, &o, false)
	return cmd
}

// printOSDiagnose prints OP_OS_DIAGNOSE rows of name, valid, variants,
// node_status, hidden, blacklisted.
func printOSDiagnose(w io.Writer, res any) error {
	rows, _ := res.([]any)
	var b strings.Builder
	for _, r := range rows {
		l, _ := r.([]any)
		if len(l) != 6 {
			return fmt.Errorf("unexpected OS row %v", r)
		}
		status := "invalid"
		if l[1] == true {
			status = "valid"
		}
		fmt.Fprintf(&b, "OS: %v [global status: %s]", l[0], status)
		if l[4] == true {
			b.WriteString(" [hidden]")
		}
		if l[5] == true {
			b.WriteString(" [blacklisted]")
		}
		b.WriteByte('\n')
		if vs, _ := l[2].([]any); len(vs) > 0 {
			fmt.Fprintf(&b, "  Variants: %s\n", joinAny(vs))
		}
		perNode, _ := l[3].(map[string]any)
		nodes := make([]string, 0, len(perNode))
		for n := range perNode {
			nodes = append(nodes, n)
		}
		sort.Strings(nodes)
		for _, n := range nodes {
			defs, _ := perNode[n].([]any)
			if len(defs) == 0 {
				fmt.Fprintf(&b, "  Node: %s, status: not found\n", n)
				continue
			}
			d, _ := defs[0].([]any)
			if len(d) < 4 {
				return fmt.Errorf("unexpected node status %v", defs[0])
			}
			st := "valid"
			if d[1] != true {
				st = fmt.Sprintf("invalid - %v", d[2])
			}
			fmt.Fprintf(&b, "  Node: %s, status: %s (path: %v)\n", n, st, d[0])
			if vs, _ := d[3].([]any); len(vs) > 0 {
				fmt.Fprintf(&b, "    variants: %s\n", joinAny(vs))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func joinAny(l []any) string {
	s := make([]string, len(l))
	for i, v := range l {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ", ")
}
