package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/corral/corral/internal/luxi"
)

// fieldKind decides how a field's values are printed and aligned.
type fieldKind int

const (
	kindText   fieldKind = iota
	kindNumber           // right-aligned
	kindUnit             // a size in MiB: human units unless --units says otherwise; right-aligned
	kindTime             // epoch seconds or [sec, usec]
	kindBool             // Y / N
	kindOther            // lists and dicts
	kindGuess            // unknown field: numbers if every value is one
)

// fieldDef is how the CLI shows one query field.
type fieldDef struct {
	title string
	kind  fieldKind
}

// fieldTable maps a field name to its column; unknown names get their own
// name as title.
type fieldTable func(name string) fieldDef

func nodeField(name string) fieldDef {
	switch name {
	case "name":
		return fieldDef{"Node", kindText}
	case "uuid":
		return fieldDef{"UUID", kindText}
	case "pip":
		return fieldDef{"PrimaryIP", kindText}
	case "sip":
		return fieldDef{"SecondaryIP", kindText}
	case "master":
		return fieldDef{"IsMaster", kindBool}
	case "master_candidate":
		return fieldDef{"MasterC", kindBool}
	case "master_capable":
		return fieldDef{"MasterCapable", kindBool}
	case "vm_capable":
		return fieldDef{"VMCapable", kindBool}
	case "offline":
		return fieldDef{"Offline", kindBool}
	case "drained":
		return fieldDef{"Drained", kindBool}
	case "role":
		return fieldDef{"Role", kindText}
	case "group":
		return fieldDef{"Group", kindText}
	case "group.uuid":
		return fieldDef{"GroupUUID", kindText}
	case "ndparams":
		return fieldDef{"NodeParameters", kindOther}
	case "pinst_cnt":
		return fieldDef{"Pinst", kindNumber}
	case "pinst_list":
		return fieldDef{"PriInstances", kindOther}
	case "sinst_cnt":
		return fieldDef{"Sinst", kindNumber}
	case "sinst_list":
		return fieldDef{"SecInstances", kindOther}
	case "mtotal":
		return fieldDef{"MTotal", kindUnit}
	case "mnode":
		return fieldDef{"MNode", kindUnit}
	case "mfree":
		return fieldDef{"MFree", kindUnit}
	case "dtotal":
		return fieldDef{"DTotal", kindUnit}
	case "dfree":
		return fieldDef{"DFree", kindUnit}
	case "ctotal":
		return fieldDef{"CTotal", kindNumber}
	case "cnodes":
		return fieldDef{"CNodes", kindNumber}
	case "csockets":
		return fieldDef{"CSockets", kindNumber}
	case "version":
		return fieldDef{"Version", kindText}
	}
	return commonField(name)
}

func instanceField(name string) fieldDef {
	switch name {
	case "name":
		return fieldDef{"Instance", kindText}
	case "uuid":
		return fieldDef{"UUID", kindText}
	case "os":
		return fieldDef{"OS", kindText}
	case "hypervisor":
		return fieldDef{"Hypervisor", kindText}
	case "admin_state":
		return fieldDef{"InstanceState", kindText}
	case "admin_up":
		return fieldDef{"Autostart", kindBool}
	case "pnode":
		return fieldDef{"Primary_node", kindText}
	case "pnode.group":
		return fieldDef{"PrimaryNodeGroup", kindText}
	case "snodes":
		return fieldDef{"Secondary_Nodes", kindOther}
	case "disk_template":
		return fieldDef{"Disk_template", kindText}
	case "disk.count":
		return fieldDef{"Disks", kindNumber}
	case "disk.sizes":
		return fieldDef{"Disk_sizes", kindUnit}
	case "disk_usage":
		return fieldDef{"DiskUsage", kindUnit}
	case "nic.count":
		return fieldDef{"NICs", kindNumber}
	case "nic.macs":
		return fieldDef{"NIC_MACs", kindOther}
	case "nic.ips":
		return fieldDef{"NIC_IPs", kindOther}
	case "nic.modes":
		return fieldDef{"NIC_modes", kindOther}
	case "nic.links":
		return fieldDef{"NIC_links", kindOther}
	case "nic.bridges":
		return fieldDef{"NIC_bridges", kindOther}
	case "network_port":
		return fieldDef{"Network_port", kindNumber}
	case "oper_state":
		return fieldDef{"Running", kindBool}
	case "oper_ram":
		return fieldDef{"Memory", kindUnit}
	case "oper_vcpus":
		return fieldDef{"VCPUs", kindNumber}
	case "status":
		return fieldDef{"Status", kindText}
	case "be/memory", "be/maxmem":
		return fieldDef{"ConfigMaxMem", kindUnit}
	case "be/minmem":
		return fieldDef{"ConfigMinMem", kindUnit}
	case "be/vcpus":
		return fieldDef{"ConfigVCPUs", kindNumber}
	}
	if n, ok := strings.CutPrefix(name, "disk.size/"); ok {
		return fieldDef{"Disk/" + n, kindUnit}
	}
	return commonField(name)
}

func jobField(name string) fieldDef {
	switch name {
	case "id":
		return fieldDef{"ID", kindNumber}
	case "status":
		return fieldDef{"Status", kindText}
	case "priority":
		return fieldDef{"Prio", kindNumber}
	case "archived":
		return fieldDef{"Archived", kindBool}
	case "ops":
		return fieldDef{"OpCodes", kindOther}
	case "opresult":
		return fieldDef{"OpCode_result", kindOther}
	case "opstatus":
		return fieldDef{"OpCode_status", kindOther}
	case "oplog":
		return fieldDef{"OpCode_log", kindOther}
	case "opstart":
		return fieldDef{"OpCode_start", kindTime}
	case "opexec":
		return fieldDef{"OpCode_exec", kindTime}
	case "opend":
		return fieldDef{"OpCode_end", kindTime}
	case "oppriority":
		return fieldDef{"OpCode_prio", kindNumber}
	case "summary":
		return fieldDef{"Summary", kindOther}
	case "received_ts":
		return fieldDef{"Received", kindTime}
	case "start_ts":
		return fieldDef{"Start", kindTime}
	case "end_ts":
		return fieldDef{"End", kindTime}
	}
	return fieldDef{name, kindGuess}
}

// commonField covers fields every configuration object has.
func commonField(name string) fieldDef {
	switch name {
	case "ctime":
		return fieldDef{"CTime", kindTime}
	case "mtime":
		return fieldDef{"MTime", kindTime}
	case "serial_no":
		return fieldDef{"SerialNo", kindNumber}
	case "tags":
		return fieldDef{"Tags", kindOther}
	}
	return fieldDef{name, kindGuess}
}

// listOpts are the flags of the list commands.
type listOpts struct {
	output    string
	noHeaders bool
	separator string
	units     string
	filter    bool // -F: the argument is a query filter (queryfilter.go)
}

func addListFlags(cmd *cobra.Command, o *listOpts, defaults []string, units bool) {
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "", fmt.Sprintf("comma-separated fields to show; \"+f1,f2\" appends to the defaults (%s)", strings.Join(defaults, ",")))
	f.BoolVar(&o.noHeaders, "no-headers", false, "do not print the header line")
	f.StringVar(&o.separator, "separator", "", "join the fields with this string instead of aligning them in columns")
	f.BoolVarP(&o.filter, "filter", "F", false, `take the argument as a query filter, e.g. 'status == "running" and not "gpu" in tags' (a single argument with spaces, quotes or operators is one anyway)`)
	if units {
		f.StringVar(&o.units, "units", "", "units of sizes: h (human: 512M, 1.9G, 2.0T), m (MiB), g (GiB) or t (TiB); default h, or m with --separator")
	}
}

// selectFields applies -o to the defaults.
func selectFields(spec string, defaults []string) ([]string, error) {
	if spec == "" {
		return defaults, nil
	}
	var base []string
	if rest, ok := strings.CutPrefix(spec, "+"); ok {
		base, spec = append(base, defaults...), rest
	}
	for i, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, paramErr("empty field name at position %d in %q", i+1, spec)
		}
		base = append(base, f)
	}
	return base, nil
}

// formatter renders values for tables and readable listings.
type formatter struct {
	units string // h, m, g or t
	loc   *time.Location
}

func (a *app) newFormatter(o *listOpts) (*formatter, error) {
	u := strings.ToLower(o.units)
	switch u {
	case "":
		u = "h"
		if o.separator != "" {
			// As Ganeti: machine-readable output gets plain MiB.
			u = "m"
		}
	case "h", "m", "g", "t":
	default:
		return nil, paramErr("invalid units %q (use h, m, g or t)", o.units)
	}
	return &formatter{units: u, loc: a.env.loc()}, nil
}

// nullText is what a value the server could not provide (null) prints as.
const nullText = "-"

// cell renders one value of the given kind.
func (f *formatter) cell(kind fieldKind, v any) string {
	switch x := v.(type) {
	case nil:
		return nullText
	case bool:
		if x {
			return "Y"
		}
		return "N"
	case string:
		return x
	case float64:
		switch kind {
		case kindUnit:
			return formatUnit(x, f.units)
		case kindTime:
			return f.time(x)
		}
		return formatNumber(x)
	case []any:
		if kind == kindTime {
			if t, ok := parseTimestamp(x); ok {
				return t.In(f.loc).Format(timeLayout)
			}
		}
		parts := make([]string, len(x))
		for i, e := range x {
			if t, ok := parseTimestamp(e); ok && kind == kindTime {
				parts[i] = t.In(f.loc).Format(timeLayout)
				continue
			}
			switch e.(type) {
			case []any, map[string]any:
				b, _ := json.Marshal(e)
				parts[i] = string(b)
			default:
				parts[i] = f.cell(kind, e)
			}
		}
		return strings.Join(parts, ",")
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

// timeLayout is how tables and listings print times, as Ganeti's FormatTime.
const timeLayout = "2006-01-02 15:04:05"

func (f *formatter) time(sec float64) string {
	t, _ := parseTimestamp(sec)
	return t.In(f.loc).Format(timeLayout)
}

// formatNumber prints integers without a fraction.
func formatNumber(x float64) string {
	if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
		return strconv.FormatInt(int64(x), 10)
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// formatUnit prints a size in MiB as Ganeti's FormatUnit: m, g and t give a
// bare number in that unit; h picks the unit, e.g. "512M", "1.9G", "2.0T".
func formatUnit(mib float64, units string) string {
	const k = 1024.0
	switch {
	case units == "m":
		return strconv.FormatInt(int64(math.Round(mib)), 10)
	case units == "g":
		return strconv.FormatFloat(mib/k, 'f', 1, 64)
	case units == "t":
		return strconv.FormatFloat(mib/k/k, 'f', 1, 64)
	case mib < k:
		return strconv.FormatInt(int64(math.Round(mib)), 10) + "M"
	case mib < k*k:
		return strconv.FormatFloat(mib/k, 'f', 1, 64) + "G"
	default:
		return strconv.FormatFloat(mib/k/k, 'f', 1, 64) + "T"
	}
}

// writeTable prints rows of values of fields: aligned columns (numbers to
// the right) under a header line, or separator-joined lines without padding.
func (f *formatter) writeTable(w io.Writer, o *listOpts, defs fieldTable, fields []string, rows [][]any) error {
	cols := make([]fieldDef, len(fields))
	right := make([]bool, len(fields))
	for i, name := range fields {
		cols[i] = defs(name)
		switch cols[i].kind {
		case kindNumber, kindUnit:
			right[i] = true
		case kindGuess:
			right[i] = allNumbers(rows, i)
		}
	}
	var lines [][]string
	if !o.noHeaders {
		h := make([]string, len(cols))
		for i, c := range cols {
			h[i] = c.title
		}
		lines = append(lines, h)
	}
	for n, row := range rows {
		if len(row) != len(fields) {
			return fmt.Errorf("malformed answer: row %d has %d values for %d fields", n+1, len(row), len(fields))
		}
		l := make([]string, len(row))
		for i, v := range row {
			l[i] = f.cell(cols[i].kind, v)
		}
		lines = append(lines, l)
	}
	return writeLines(w, lines, right, o.separator)
}

// writeLines aligns cells into columns, or joins them with sep when sep is
// set.
func writeLines(w io.Writer, lines [][]string, right []bool, sep string) error {
	var b strings.Builder
	if sep != "" {
		for _, l := range lines {
			b.WriteString(strings.Join(l, sep))
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	width := make([]int, len(right))
	for _, l := range lines {
		for i, c := range l {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, l := range lines {
		var line strings.Builder
		for i, c := range l {
			if i > 0 {
				line.WriteByte(' ')
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// allNumbers reports whether column i holds only numbers (or nulls), with at
// least one number.
func allNumbers(rows [][]any, i int) bool {
	seen := false
	for _, r := range rows {
		if i >= len(r) || r[i] == nil {
			continue
		}
		if _, ok := r[i].(float64); !ok {
			return false
		}
		seen = true
	}
	return seen
}

// queryRows fetches the rows of a list command.
type queryRows func(ctx context.Context, c *luxi.Client, names, fields []string) ([][]any, error)

// listRun is the body the list commands share: pick the fields, query the
// master, print the table.
func (a *app) listRun(o *listOpts, defaults []string, defs fieldTable, query queryRows) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		fields, err := selectFields(o.output, defaults)
		if err != nil {
			return err
		}
		f, err := a.newFormatter(o)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		return a.env.withClient(ctx, func(c *luxi.Client) error {
			rows, err := query(ctx, c, args, fields)
			if err != nil {
				return err
			}
			return f.writeTable(cmd.OutOrStdout(), o, defs, fields, rows)
		})
	}
}

// infoField is one line of an info command: the field to query and its label.
type infoField struct{ field, label string }

// infoRun is the body the info commands share: query the name and every
// field of the objects named (all without names), then print each object as
// a title line followed by one indented line per field. Sizes and times go
// through the table formatter so they read as in the list commands.
func (a *app) infoRun(title string, infoFields []infoField, defs fieldTable, query queryRows) func(cmd *cobra.Command, args []string) error {
	return func(cmd *cobra.Command, args []string) error {
		fields := []string{"name"}
		for _, f := range infoFields {
			fields = append(fields, f.field)
		}
		ctx := cmd.Context()
		return a.env.withClient(ctx, func(c *luxi.Client) error {
			rows, err := query(ctx, c, args, fields)
			if err != nil {
				return err
			}
			f := &formatter{units: "h", loc: a.env.loc()}
			var b strings.Builder
			for _, row := range rows {
				if len(row) != len(fields) {
					return fmt.Errorf("malformed answer: %d values for %d fields", len(row), len(fields))
				}
				line(&b, "", title+": "+f.cell(kindText, row[0]))
				for i, fi := range infoFields {
					v := row[i+1]
					if fi.field == "status" {
						f.statusBlock(&b, "  ", v)
						continue
					}
					if k := defs(fi.field).kind; v != nil && (k == kindUnit || k == kindTime) {
						line(&b, "  ", fi.label+": "+f.cell(k, v))
						continue
					}
					f.readable(&b, "  ", fi.label, v)
				}
			}
			_, err = io.WriteString(cmd.OutOrStdout(), b.String())
			return err
		})
	}
}
