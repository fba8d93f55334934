package cmdlib

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
)

func TestMergeOS(t *testing.T) {
	full := nodeapi.OSInfo{Name: "deb", Path: "/os/deb", Valid: true, Trusted: true, Variants: []string{"a", "b"},
		Parameters: [][2]string{{"p1", "d1"}, {"p2", "d2"}}, APIVersions: []int{15, 20}}
	less := nodeapi.OSInfo{Name: "deb", Path: "/os/deb", Valid: true, Trusted: true, Variants: []string{"b", "c"},
		Parameters: [][2]string{{"p2", "d2"}}, APIVersions: []int{20}}
	broken := nodeapi.OSInfo{Name: "deb", Path: "/os/deb", Valid: false, Error: "no create script"}
	cases := []struct {
		name    string
		perNode map[string][]nodeapi.OSInfo
		cluster *config.Cluster
		want    OSStatus
	}{
		{
			name:    "one node",
			perNode: map[string][]nodeapi.OSInfo{"n1": {full}},
			want: OSStatus{OSParams: map[string]config.Params{}, OSHVParams: map[string]map[string]config.Params{}, Name: "deb", Valid: true, Trusted: true, Variants: []string{"a", "b"}, Parameters: full.Parameters, APIVersions: []int{15, 20},
				NodeStatus: map[string][]any{"n1": {[]any{"/os/deb", true, "", []string{"a", "b"}, full.Parameters, []int{15, 20}, true}}}},
		},
		{
			name:    "what every node offers",
			perNode: map[string][]nodeapi.OSInfo{"n1": {full}, "n2": {less}},
			cluster: &config.Cluster{HiddenOS: []string{"deb"}},
			want: OSStatus{OSParams: map[string]config.Params{}, OSHVParams: map[string]map[string]config.Params{}, Name: "deb", Valid: true, Trusted: true, Hidden: true, Variants: []string{"b"}, Parameters: [][2]string{{"p2", "d2"}}, APIVersions: []int{20},
				NodeStatus: map[string][]any{
					"n1": {[]any{"/os/deb", true, "", []string{"a", "b"}, full.Parameters, []int{15, 20}, true}},
					"n2": {[]any{"/os/deb", true, "", []string{"b", "c"}, less.Parameters, []int{20}, true}},
				}},
		},
		{
			name:    "missing on a node",
			perNode: map[string][]nodeapi.OSInfo{"n1": {full}, "n2": {}},
			cluster: &config.Cluster{BlacklistedOS: []string{"deb"}},
			want: OSStatus{OSParams: map[string]config.Params{}, OSHVParams: map[string]map[string]config.Params{}, Name: "deb", Valid: false, Trusted: true, Blacklisted: true,
				NodeStatus: map[string][]any{"n1": {[]any{"/os/deb", true, "", []string{"a", "b"}, full.Parameters, []int{15, 20}, true}}, "n2": {}}},
		},
		{
			name:    "invalid on a node",
			perNode: map[string][]nodeapi.OSInfo{"n1": {broken}, "n2": {full}},
			want: OSStatus{OSParams: map[string]config.Params{}, OSHVParams: map[string]map[string]config.Params{}, Name: "deb", Valid: false, Trusted: false,
				NodeStatus: map[string][]any{
					"n1": {[]any{"/os/deb", false, "no create script", []string{}, [][2]string{}, []int{}, false}},
					"n2": {[]any{"/os/deb", true, "", []string{"a", "b"}, full.Parameters, []int{15, 20}, true}},
				}},
		},
		{
			// Ganeti 3.0's os query lists the cluster's parameters of the
			// OS and of each of its variants.
			name:    "cluster parameters",
			perNode: map[string][]nodeapi.OSInfo{"n1": {full}},
			cluster: &config.Cluster{OSParams: map[string]config.Params{"deb": {"p1": "x"}, "deb+b": {"p2": "y"}, "other": {"p1": "z"}},
				OSHVParams: map[string]map[string]config.Params{"deb+a": {"kvm": {"acpi": false}}, "other": {"kvm": {"acpi": true}}}},
			want: OSStatus{Name: "deb", Valid: true, Trusted: true, Variants: []string{"a", "b"}, Parameters: full.Parameters, APIVersions: []int{15, 20},
				NodeStatus: map[string][]any{"n1": {[]any{"/os/deb", true, "", []string{"a", "b"}, full.Parameters, []int{15, 20}, true}}},
				OSParams:   map[string]config.Params{"deb": {"p1": "x"}, "deb+b": {"p2": "y"}},
				OSHVParams: map[string]map[string]config.Params{"deb+a": {"kvm": {"acpi": false}}}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := MergeOS(c.perNode, c.cluster)
			if len(got) != 1 || !reflect.DeepEqual(got[0], c.want) {
				t.Fatalf("got %#v\nwant %#v", got, c.want)
			}
		})
	}
}

func TestOSDiagnose(t *testing.T) {
	e := openEnv(t, filepath.Join(t.TempDir(), "s.db"), newNodeDouble(), true)
	defer e.close()
	cases := []struct {
		fields []any
		names  []any
		status string
		want   string // the result as JSON, or a part of the error
	}{
		{fields: []any{"name", "variants"}, status: "success", want: `[[["tiny",["default"]]]]`},
		{fields: []any{"name", "valid", "api_versions", "parameters"}, status: "success", want: `[[["tiny",true,[],[["marker","m"]]]]]`},
		{fields: []any{"name"}, names: []any{"other"}, status: "success", want: `[[]]`},
		{fields: []any{"name", "nosuch"}, status: "error", want: "Unknown output fields"},
	}
	for _, c := range cases {
		op := map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": c.fields}
		if c.names != nil {
			op["names"] = c.names
		}
		st, out := runJSON(t, e, op)
		if st != c.status || (st == "success" && out != c.want) || (st == "error" && !strings.Contains(out, c.want)) {
			t.Errorf("%v %v: %s %s, want %s %s", c.fields, c.names, st, out, c.status, c.want)
		}
	}
	// A hidden OS disappears from listings that do not ask for "hidden".
	tx := e.cfg.Begin()
	c := e.cfg.Cluster()
	c.HiddenOS = []string{"tiny"}
	tx.PutCluster(c)
	if err := e.cfg.Commit(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	if st, out := runJSON(t, e, map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": []any{"name"}}); st != "success" || out != `[[]]` {
		t.Fatalf("hidden OS listed: %s %s", st, out)
	}
	if st, out := runJSON(t, e, map[string]any{"OP_ID": "OP_OS_DIAGNOSE", "output_fields": []any{"name", "hidden"}}); st != "success" || out != `[[["tiny",true]]]` {
		t.Fatalf("hidden OS with the hidden field: %s %s", st, out)
	}
}
