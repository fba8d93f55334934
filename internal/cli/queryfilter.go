package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/qlang"
)

// Query filters on the list commands, as Ganeti's tools take them: -F makes
// the one argument a filter in the filter language ('admin_state == "up"
// and not offline'); without -F, a single argument that looks like one is
// taken as a filter too, and names with * or ? are DNS name globs.

// ExitUnknownField is Ganeti's exit status of list-fields asked for a
// field that does not exist.
const ExitUnknownField = 14

// listFilter is the query filter the arguments of a list command make,
// nil when they are plain names (or none) and the classic query serves.
func (o *listOpts) listFilter(args []string, namefield string, numeric bool) (any, error) {
	hasGlob := func(a string) bool { return strings.ContainsAny(a, "*?") }
	if !o.filter && !(len(args) == 1 && looksLikeFilter(args[0])) && (numeric || !slices.ContainsFunc(args, hasGlob)) {
		return nil, nil
	}
	f, err := qlang.MakeFilter(args, o.filter, namefield, numeric)
	if err != nil {
		if e, ok := ecode.As(err); ok {
			return nil, paramErr("%s", e.Msg)
		}
		return nil, err
	}
	return f, nil
}

// looksLikeFilter reports whether an argument has a character only a
// filter has (Ganeti's detection characters).
func looksLikeFilter(s string) bool { return strings.ContainsAny(s, "! \"')(\v\n\r\f/<\t>=\\~") }

// queryFiltered runs a new-style query and returns plain rows (nil where a
// value is unavailable), as the classic queries answer; an unknown field is
// an error, as there.
func queryFiltered(ctx context.Context, c *luxi.Client, resource string, fields []string, filter any) ([][]any, error) {
	res, err := c.Query(ctx, resource, fields, filter)
	if err != nil {
		return nil, err
	}
	var unknown []string
	for _, f := range res.Fields {
		if f.Kind == "unknown" {
			unknown = append(unknown, f.Name)
		}
	}
	if len(unknown) > 0 {
		return nil, ecode.Errorf(ecode.Inval, "Unknown output fields selected: %s", strings.Join(unknown, ", "))
	}
	rows := make([][]any, 0, len(res.Data))
	for _, cells := range res.Data {
		row := make([]any, len(cells))
		for i, c := range cells {
			if st, _ := c[0].(float64); st == 0 {
				row[i] = c[1]
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// filteredRows is the queryRows of a list command over resource: the
// classic query for plain names, a filtered query otherwise.
func (o *listOpts) filteredRows(resource string, classic queryRows) queryRows {
	return func(ctx context.Context, c *luxi.Client, args, fields []string) ([][]any, error) {
		f, err := o.listFilter(args, "name", false)
		if err != nil {
			return nil, err
		}
		if f == nil {
			return classic(ctx, c, args, fields)
		}
		return queryFiltered(ctx, c, resource, fields, f)
	}
}

// fieldKindNames are how list-fields names the kinds, as Ganeti's tools.
var fieldKindNames = map[string]string{"unknown": "Unknown", "text": "Text", "bool": "Boolean", "number": "Number",
	"float": "Floating-point number", "unit": "Storage size", "timestamp": "Timestamp", "other": "Custom"}

// listFieldsCmd is "list-fields [FIELD...]" for a query resource, under
// the command group named group; what names the objects.
func (a *app) listFieldsCmd(resource, group, what string) *cobra.Command {
	var noHeaders bool
	var sep string
	cmd := &cobra.Command{
		Use:     "list-fields [FIELD...]",
		Short:   "List the fields " + what + " can be listed and filtered by",
		Long:    "List the fields of " + what + " (all, or the ones named) with their kind, column title and description.",
		Example: "  corral " + group + " list-fields\n  corral " + group + " list-fields --no-headers --separator '|'",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				res, err := c.QueryFields(ctx, resource, args)
				if err != nil {
					return err
				}
				var lines [][]string
				if !noHeaders {
					lines = append(lines, []string{"Name", "Type", "Title", "Description"})
				}
				var unknown []string
				for _, f := range res.Fields {
					kind := fieldKindNames[f.Kind]
					if kind == "" {
						kind = f.Kind
					}
					if f.Kind == "unknown" {
						unknown = append(unknown, f.Name)
					}
					lines = append(lines, []string{f.Name, kind, f.Title, f.Doc})
				}
				if len(unknown) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "Warning: Queried for unknown fields %s\n", strings.Join(unknown, ", "))
				}
				if err := writeLines(cmd.OutOrStdout(), lines, make([]bool, 4), sep); err != nil {
					return err
				}
				if len(unknown) > 0 {
					return &exitError{code: ExitUnknownField}
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "do not print the header line")
	cmd.Flags().StringVar(&sep, "separator", "", "join the columns with this string instead of aligning them")
	return cmd
}
