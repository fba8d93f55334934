package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/ecode"
)

func osHead() *cobra.Command {
	return newGroup("os", "Show the OS definitions instances are installed with",
		"  corral os list\n  corral os info debootstrap\n  corral os diagnose\n  corral os modify debootstrap --hidden yes")
}

func (a *app) addOSCommands(c *cobra.Command) {
	c.AddCommand(a.osListCmd(), a.osDiagnoseCmd(), a.osInfoCmd(), a.osModifyCmd())
}

func (a *app) osListCmd() *cobra.Command {
	var o jobOpts
	var noHeaders, all bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the OS names instances can be created with",
		Long: `List the OS definitions valid on every vm_capable node, one name per line,
with a "+variant" suffix for each variant of an OS that has them (OP_OS_DIAGNOSE).
Hidden and blacklisted definitions are left out unless --all; invalid ones
always are (see corral os diagnose).`,
		Example: "  corral os list\n  corral os list --no-headers\n  corral os list --all",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.quiet = true
			// The master leaves hidden and blacklisted OSes out unless
			// their fields are asked for.
			fields := []string{"name", "variants"}
			if all {
				fields = append(fields, "hidden", "blacklisted")
			}
			op := map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": fields, "names": []string{}}
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				rows, _ := res.([]any)
				var names []string
				for _, r := range rows {
					l, _ := r.([]any)
					if len(l) != len(fields) {
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
	cmd.Flags().BoolVar(&all, "all", false, "list hidden and blacklisted OSes too")
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

// osInfoFields are what `os info` asks for, in the order printOSInfo reads.
func osInfoFields() []string {
	return []string{"name", "valid", "hidden", "blacklisted", "trusted", "variants", "parameters", "api_versions"}
}

func (a *app) osInfoCmd() *cobra.Command {
	var o jobOpts
	cmd := &cobra.Command{
		Use:   "info [NAME...]",
		Short: "Show the details of OS definitions",
		Long: `Show, for every OS definition (or the ones named), whether it is valid on all
vm_capable nodes, hidden or blacklisted, whether its installs are trusted,
and, when valid, the API versions, variants and parameters (with their
descriptions) every node offers (OP_OS_DIAGNOSE). Hidden and blacklisted
OSes are included. A name that no node has fails the command (status 3).`,
		Example: "  corral os info\n  corral os info debootstrap",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.quiet = true
			names := args
			if names == nil {
				names = []string{}
			}
			op := map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": osInfoFields(), "names": names}
			return a.runJob(cmd, &o, op, func(w io.Writer, res any) error {
				return printOSInfo(w, args, res)
			})
		},
	}
	addJobFlags(cmd, &o, false)
	return cmd
}

// printOSInfo prints OP_OS_DIAGNOSE rows of osInfoFields as gnt-os info
// does, sorted by name; names asked for but not found are an error.
func printOSInfo(w io.Writer, want []string, res any) error {
	rows, _ := res.([]any)
	var b strings.Builder
	seen := map[string]bool{}
	sorted := make([][]any, 0, len(rows))
	for _, r := range rows {
		l, _ := r.([]any)
		if len(l) != len(osInfoFields()) {
			return fmt.Errorf("unexpected OS row %v", r)
		}
		sorted = append(sorted, l)
	}
	sort.SliceStable(sorted, func(i, j int) bool { return fmt.Sprint(sorted[i][0]) < fmt.Sprint(sorted[j][0]) })
	yes := func(v any) string {
		if v == true {
			return "True"
		}
		return "False"
	}
	for _, l := range sorted {
		name := fmt.Sprint(l[0])
		seen[name] = true
		fmt.Fprintf(&b, "%s:\n", name)
		fmt.Fprintf(&b, "  - valid: %s\n  - hidden: %s\n  - blacklisted: %s\n  - trusted: %s\n", yes(l[1]), yes(l[2]), yes(l[3]), yes(l[4]))
		if l[1] == true {
			b.WriteString("  - API versions:\n")
			vs, _ := l[7].([]any)
			for _, v := range vs {
				fmt.Fprintf(&b, "    - %v\n", v)
			}
			b.WriteString("  - variants:\n")
			vars, _ := l[5].([]any)
			for _, v := range vars {
				fmt.Fprintf(&b, "    - %v\n", v)
			}
			b.WriteString("  - parameters:\n")
			params, _ := l[6].([]any)
			for _, p := range params {
				if pd, ok := p.([]any); ok && len(pd) == 2 {
					fmt.Fprintf(&b, "    - %v: %v\n", pd[0], pd[1])
				} else {
					fmt.Fprintf(&b, "    - %v\n", p)
				}
			}
		}
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	var missing []string
	for _, n := range want {
		if !seen[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return ecode.Errorf(ecode.NoEnt, "OS(es) not found: %s", strings.Join(missing, ", "))
	}
	return nil
}
