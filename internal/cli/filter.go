package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/qlang"
)

// corral filter: the job queue's filter rules, as gnt-filter.

func filterHead() *cobra.Command {
	return newGroup("filter", "Manage the job queue's filter rules (accept, pause, reject, rate-limit jobs)",
		"  corral filter add --action PAUSE --predicates '[[\"opcode\", [\"=\", \"OP_ID\", \"OP_INSTANCE_MIGRATE\"]]]'\n"+
			"  corral filter list\n  corral filter delete 5ad3c1f0-...")
}

func (a *app) addFilterCommands(c *cobra.Command) {
	c.AddCommand(a.filterAddCmd(), a.filterReplaceCmd(), a.filterDeleteCmd(), a.filterListCmd(), a.filterInfoCmd(),
		a.listFieldsCmd("filter", "filter", "job filter rules"))
}

func defaultFilterFields() []string {
	return []string{"uuid", "watermark", "priority", "predicates", "action", "reason_trail"}
}

func filterField(name string) fieldDef {
	switch name {
	case "uuid":
		return fieldDef{"UUID", kindText}
	case "watermark":
		return fieldDef{"Watermark", kindNumber}
	case "priority":
		return fieldDef{"Priority", kindNumber}
	case "predicates":
		return fieldDef{"Predicates", kindOther}
	case "action":
		return fieldDef{"Action", kindOther}
	case "reason_trail":
		return fieldDef{"ReasonTrail", kindOther}
	}
	return fieldDef{name, kindGuess}
}

// filterRuleFlags are what add and replace take, as gnt-filter's.
type filterRuleFlags struct {
	priority   int
	predicates string
	action     string
	reason     string
}

func (r *filterRuleFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.IntVar(&r.priority, "priority", 0, "priority of the rule: rules are evaluated from 0 up (then oldest first)")
	f.StringVar(&r.predicates, "predicates", "[]", `JSON list of predicates, all of which a job must match: ["jobid", FILTER], ["opcode", FILTER] or ["reason", FILTER], FILTER in the query language's list form, e.g. [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]`)
	f.StringVar(&r.action, "action", "CONTINUE", `what happens to the jobs the rule applies to: ACCEPT (run), PAUSE (stay queued), REJECT (canceled), CONTINUE (decided by later rules) or "RATE_LIMIT n" (at most n run at once)`)
	f.StringVar(&r.reason, "reason", "", "why the rule is added, kept in its reason trail")
}

var rateLimitArg = regexp.MustCompile(`^RATE_LIMIT\s+(\d+)`)

// parts returns the predicates, action and reason trail to send.
func (r *filterRuleFlags) parts() ([]any, any, []any, error) {
	var preds []any
	if err := json.Unmarshal([]byte(r.predicates), &preds); err != nil {
		return nil, nil, nil, paramErr("--predicates must be a JSON list: %v", err)
	}
	var action any = r.action
	if m := rateLimitArg.FindStringSubmatch(r.action); m != nil {
		n, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, nil, nil, paramErr("invalid RATE_LIMIT %q", m[1])
		}
		action = []any{"RATE_LIMIT", n}
	}
	reason := []any{}
	if r.reason != "" {
		reason = append(reason, []any{"gnt:user", r.reason, time.Now().UnixNano()})
	}
	return preds, action, reason, nil
}

func (a *app) filterAddCmd() *cobra.Command {
	var r filterRuleFlags
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add a filter rule; prints its uuid",
		Long: `Add a job filter rule. The queue applies the rules to jobs that have not
started: the first rule (lowest priority number, then oldest) whose predicates
all match the job and whose action is not CONTINUE decides what happens to it.
A jobid predicate may compare the job id with "watermark", the highest job id
when the rule was added: [">", "id", "watermark"] matches only later jobs.`,
		Example: "  corral filter add --action REJECT --predicates '[[\"reason\", [\"=\", \"source\", \"gnt:watcher\"]]]'\n" +
			"  corral filter add --action 'RATE_LIMIT 2' --predicates '[[\"opcode\", [\"=\", \"OP_ID\", \"OP_INSTANCE_MIGRATE\"]]]'",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.replaceFilter(cmd, "", &r)
		},
	}
	r.add(cmd)
	return cmd
}

func (a *app) filterReplaceCmd() *cobra.Command {
	var r filterRuleFlags
	cmd := &cobra.Command{
		Use:     "replace UUID",
		Short:   "Replace a filter rule (or add one with that uuid); prints its uuid",
		Long:    "Replace the filter rule with the given uuid by one made of the flags (defaults for those not given), or add it if there is none.",
		Example: "  corral filter replace 5ad3c1f0-0a1b-4c2d-8e3f-001122334455 --action ACCEPT",
		Args:    exactArgs(1, "the filter rule's uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.replaceFilter(cmd, args[0], &r)
		},
	}
	r.add(cmd)
	return cmd
}

func (a *app) replaceFilter(cmd *cobra.Command, uuid string, r *filterRuleFlags) error {
	preds, action, reason, err := r.parts()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	return a.env.withClient(ctx, func(c *luxi.Client) error {
		id, err := c.ReplaceFilter(ctx, uuid, r.priority, preds, action, reason)
		if err != nil {
			return err
		}
		fmt.Fprintln(cmd.OutOrStdout(), id)
		return nil
	})
}

func (a *app) filterDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "delete UUID",
		Aliases: []string{"remove"},
		Short:   "Delete a filter rule",
		Long:    "Delete a job filter rule; the jobs it held (PAUSE, RATE_LIMIT) may then run.",
		Example: "  corral filter delete 5ad3c1f0-0a1b-4c2d-8e3f-001122334455",
		Args:    exactArgs(1, "the filter rule's uuid"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.env.withClient(ctx, func(c *luxi.Client) error { return c.DeleteFilter(ctx, args[0]) })
		},
	}
}

func (a *app) filterListCmd() *cobra.Command {
	var o listOpts
	cmd := &cobra.Command{
		Use:     "list [UUID...]",
		Aliases: []string{"ls"},
		Short:   "List filter rules",
		Long: `List the job filter rules (all, the ones named, or those a query filter
selects with -F) in evaluation order.

Fields: uuid, watermark, priority, predicates, action, reason_trail.`,
		Example: "  corral filter list\n  corral filter list -o uuid,action --no-headers\n  corral filter list -F 'priority < 10'",
		RunE: a.listRun(&o, defaultFilterFields(), filterField, func(ctx context.Context, c *luxi.Client, args, fields []string) ([][]any, error) {
			flt, err := qlang.MakeFilter(args, o.filter, "uuid", false)
			if err != nil {
				return nil, paramErr("%v", err)
			}
			return queryFiltered(ctx, c, "filter", fields, flt)
		}),
	}
	addListFlags(cmd, &o, defaultFilterFields(), false)
	return cmd
}

func (a *app) filterInfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "info [UUID...]",
		Aliases: []string{"show"},
		Short:   "Show filter rules in detail",
		Long:    "Show every field of the named job filter rules (all without uuids).",
		Example: "  corral filter info\n  corral filter info 5ad3c1f0-0a1b-4c2d-8e3f-001122334455",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			fields := defaultFilterFields()
			return a.env.withClient(ctx, func(c *luxi.Client) error {
				rows, err := c.QueryFilters(ctx, args, fields)
				if err != nil {
					return err
				}
				return writeFilterInfo(cmd.OutOrStdout(), rows)
			})
		},
	}
}

// writeFilterInfo prints rows of defaultFilterFields, a block per rule.
func writeFilterInfo(w io.Writer, rows [][]any) error {
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	var b strings.Builder
	for _, r := range rows {
		if len(r) != 6 {
			return fmt.Errorf("malformed answer: %d values for 6 fields", len(r))
		}
		action := fmt.Sprint(r[4])
		if _, ok := r[4].(string); !ok {
			action = js(r[4])
		}
		fmt.Fprintf(&b, "UUID: %v\n  Watermark: %s\n  Priority: %s\n  Predicates: %s\n  Action: %s\n  Reason trail: %s\n",
			r[0], js(r[1]), js(r[2]), js(r[3]), action, js(r[5]))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
