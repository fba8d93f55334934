package cli

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

func TestFormatUnit(t *testing.T) {
	tests := []struct {
		mib   float64
		units string
		want  string
	}{
		{0, "h", "0M"},
		{512, "h", "512M"},
		{1023.6, "h", "1024M"},
		{1024, "h", "1.0G"},
		{1945, "h", "1.9G"},
		{1048575, "h", "1024.0G"},
		{1048576, "h", "1.0T"},
		{3 * 1048576, "h", "3.0T"},
		{1945, "m", "1945"},
		{1945, "g", "1.9"},
		{1048576, "t", "1.0"},
	}
	for _, tc := range tests {
		if got := formatUnit(tc.mib, tc.units); got != tc.want {
			t.Errorf("formatUnit(%v, %s) = %q, want %q", tc.mib, tc.units, got, tc.want)
		}
	}
}

func TestCellFormatting(t *testing.T) {
	f := &formatter{units: "h", loc: time.UTC}
	tests := []struct {
		kind fieldKind
		v    any
		want string
	}{
		{kindText, nil, "-"},
		{kindBool, true, "Y"},
		{kindBool, false, "N"},
		{kindNumber, 3.0, "3"},
		{kindNumber, 2.5, "2.5"},
		{kindUnit, 2048.0, "2.0G"},
		{kindUnit, []any{1024.0, 512.0}, "1.0G,512M"},
		{kindOther, []any{"a", "b"}, "a,b"},
		{kindOther, []any{}, ""},
		{kindOther, map[string]any{"b": 1.0, "a": "x"}, `{"a":"x","b":1}`},
		{kindOther, []any{[]any{"x", 1.0}}, `["x",1]`},
		{kindTime, float64(fakeEpoch), "2023-11-14 22:13:20"},
		{kindTime, []any{float64(fakeEpoch), 5.0}, "2023-11-14 22:13:20"},
		{kindTime, []any{[]any{float64(fakeEpoch), 0.0}, nil}, "2023-11-14 22:13:20,-"},
	}
	for _, tc := range tests {
		if got := f.cell(tc.kind, tc.v); got != tc.want {
			t.Errorf("cell(%d, %v) = %q, want %q", tc.kind, tc.v, got, tc.want)
		}
	}
}

func TestWriteTable(t *testing.T) {
	f := &formatter{units: "h", loc: time.UTC}
	rows := [][]any{{"a", 1.0, nil}, {"longer", 100.0, "x"}}
	fields := []string{"name", "pinst_cnt", "mystery"}
	var b strings.Builder
	if err := f.writeTable(&b, &listOpts{}, nodeField, fields, rows); err != nil {
		t.Fatal(err)
	}
	want := "Node   Pinst mystery\na          1 -\nlonger   100 x\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	// An unknown field holding only numbers is aligned right.
	b.Reset()
	if err := f.writeTable(&b, &listOpts{noHeaders: true}, nodeField, []string{"n"}, [][]any{{5.0}, {50.0}, {nil}}); err != nil {
		t.Fatal(err)
	}
	if b.String() != " 5\n50\n -\n" {
		t.Fatalf("guessed numbers: %q", b.String())
	}
	// A short row is an error, not a panic.
	if err := f.writeTable(&b, &listOpts{}, nodeField, fields, [][]any{{"a"}}); err == nil {
		t.Fatal("short row accepted")
	}
}

func TestReadable(t *testing.T) {
	f := &formatter{units: "h", loc: time.UTC}
	var b strings.Builder
	err := f.writeReadable(&b, map[string]any{
		"b":     map[string]any{"y": nil, "x": []any{"p", "q"}},
		"a":     true,
		"list":  []any{map[string]any{"k": 1.0, "j": "v"}, []any{1.0, 2.0}, []any{map[string]any{}}, "s"},
		"mtime": float64(fakeEpoch),
		"empty": map[string]any{},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `a: true
b:
  x: p, q
  y: -
empty: (none)
list:
  - j: v
    k: 1
  - 1, 2
  -
    - (none)
  - s
mtime: 2023-11-14 22:13:20
`
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestSelectFields(t *testing.T) {
	def := []string{"a", "b"}
	tests := []struct {
		spec string
		want string
		err  bool
	}{
		{"", "a,b", false},
		{"x", "x", false},
		{"x, y", "x,y", false},
		{"+c", "a,b,c", false},
		{"+c,d", "a,b,c,d", false},
		{"+", "", true},
		{"a,", "", true},
	}
	for _, tc := range tests {
		got, err := selectFields(tc.spec, def)
		if (err != nil) != tc.err || err == nil && strings.Join(got, ",") != tc.want {
			t.Errorf("selectFields(%q) = %v, %v", tc.spec, got, err)
		}
	}
	if strings.Join(def, ",") != "a,b" {
		t.Fatal("defaults modified")
	}
}

func TestParsePriority(t *testing.T) {
	for s, want := range map[string]int{"low": 10, "NORMAL": 0, "high": -10, "-20": -20, "19": 19, "3": 3} {
		if got, err := parsePriority(s); err != nil || got != want {
			t.Errorf("parsePriority(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "urgent", "20", "-21", "1.5"} {
		if _, err := parsePriority(s); err == nil {
			t.Errorf("parsePriority(%q) accepted", s)
		}
	}
}

func TestParseTimespec(t *testing.T) {
	for s, want := range map[string]int64{"0": 0, "90": 90, "30s": 30, "5m": 300, "2h": 7200, "1d": 86400, "1w": 604800} {
		if got, err := parseTimespec(s); err != nil || got != want {
			t.Errorf("parseTimespec(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "h", "-1", "+5", "1.5h", "2y", "1hh", "99999999999999999999", "9223372036854775807w"} {
		if _, err := parseTimespec(s); err == nil {
			t.Errorf("parseTimespec(%q) accepted", s)
		}
	}
}

func TestParseTTL(t *testing.T) {
	for s, want := range map[string]time.Duration{"1h": time.Hour, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute, "2d": 48 * time.Hour, "600": 10 * time.Minute} {
		if got, err := parseTTL(s); err != nil || got != want {
			t.Errorf("parseTTL(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"0", "-1h", "soon", ""} {
		if _, err := parseTTL(s); err == nil {
			t.Errorf("parseTTL(%q) accepted", s)
		}
	}
}

func TestParseBEParams(t *testing.T) {
	got, err := parseBEParams("-B", "memory=1.5G,maxmem=512,vcpus=4,auto_balance,no_always_failover,spindle_use=1,other=x", false)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, got, `{"memory":1536,"maxmem":512,"vcpus":4,"auto_balance":true,"always_failover":false,"spindle_use":1,"other":"x"}`) {
		t.Fatalf("got %v", got)
	}
	got, err = parseBEParams("-B", "-memory,vcpus=2", true)
	if err != nil || !sameJSON(t, got, `{"memory":"default","vcpus":2}`) {
		t.Fatalf("reset: %v, %v", got, err)
	}
	for _, s := range []string{"memory=x", "vcpus=two", "vcpus=-1", "auto_balance=perhaps", "-memory", "a=1,a=2", ","} {
		_, err := parseBEParams("-B", s, false)
		e, ok := ecode.As(err)
		if !ok || e.Class != ecode.Inval || !strings.HasPrefix(e.Msg, "-B") {
			t.Errorf("parseBEParams(%q): %v", s, err)
		}
	}
}

func TestParseDisksAndNICs(t *testing.T) {
	d, err := parseDisks([]string{"1:size=2G,name=data", "0:size=1", "2:size=0.5,mode=ro"}, "")
	if err != nil || !sameJSON(t, d, `[{"size":1},{"size":2048,"name":"data"},{"size":1,"mode":"ro"}]`) {
		t.Fatalf("disks %v, %v", d, err)
	}
	d, err = parseDisks(nil, "3g")
	if err != nil || !sameJSON(t, d, `[{"size":3072}]`) {
		t.Fatalf("-s: %v, %v", d, err)
	}
	// A size with a comma cannot smuggle in other keys.
	if _, err = parseDisks(nil, "1G,mode=ro"); err == nil {
		t.Fatal("-s with a comma accepted")
	}
	n, err := parseNICs(nil, false)
	if err != nil || !sameJSON(t, n, `[{}]`) {
		t.Fatalf("default NIC %v", n)
	}
	n, err = parseNICs([]string{"0:mode=bridged,link=br\\,0,mac=aa:00:00:00:00:01"}, false)
	if err != nil || !sameJSON(t, n, `[{"mode":"bridged","link":"br,0","mac":"aa:00:00:00:00:01"}]`) {
		t.Fatalf("NIC %v, %v", n, err)
	}
	if _, err := parseIndexed("--disk", "disk", []string{fmt.Sprintf("%d:size=1", maxIndexed)}); err == nil {
		t.Fatal("huge index accepted")
	}
}

func TestParseGroups(t *testing.T) {
	g, err := parseGroups("-O", []string{"deb:a=1,-b", "cent"}, true)
	if err != nil || !sameJSON(t, g, `{"deb":{"a":"1","b":"default"},"cent":{}}`) {
		t.Fatalf("groups %v, %v", g, err)
	}
	for _, specs := range [][]string{{"-deb"}, {"no_deb"}, {"deb:-a"}, {":a=1"}, {"x:a=1", "x:b=2"}} {
		if _, err := parseGroups("-H", specs, false); err == nil {
			t.Errorf("parseGroups(%q) accepted", specs)
		}
	}
}

func TestFormatLogEntry(t *testing.T) {
	a := &app{env: &Env{Location: time.UTC}}
	tests := []struct {
		entry []any
		want  string
	}{
		{[]any{1.0, []any{float64(fakeEpoch), 0.0}, "message", "hello"}, "Tue Nov 14 22:13:20 2023 hello"},
		{[]any{2.0, []any{float64(fakeEpoch), 0.0}, "delay-test", map[string]any{"n": 1.0}}, `Tue Nov 14 22:13:20 2023 delay-test: {"n":1}`},
		{[]any{3.0, nil, "message", "no time"}, "no time"},
		{[]any{}, ": null"},
	}
	for _, tc := range tests {
		if got := a.formatLogEntry(tc.entry); got != tc.want {
			t.Errorf("formatLogEntry(%v) = %q, want %q", tc.entry, got, tc.want)
		}
	}
}

// Fuzz targets for the CLI's own parsers; their seeds run as unit tests.

func FuzzParseTimespec(f *testing.F) {
	for _, s := range []string{"0", "90", "30s", "5m", "2h", "1d", "1w", "", "-1", "1.5h", "9223372036854775807w", "+5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseTimespec(s)
		if err != nil {
			if _, ok := ecode.As(err); !ok {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("%q gave negative %d", s, n)
		}
		// Every accepted value reads back the same as plain seconds.
		if back, err := parseTimespec(fmt.Sprint(n)); err != nil || back != n {
			t.Fatalf("%q = %d, but %d reads as %d, %v", s, n, n, back, err)
		}
	})
}

func FuzzParseDisks(f *testing.F) {
	f.Add("0:size=10G", "1:size=1,mode=ro", "")
	f.Add("0:size=1.5g,name=a\\,b", "", "")
	f.Add("", "", "4T")
	f.Add("x:size=1", "0:size=-1", "")
	f.Add("0:size=1", "0:size=1", "1G,mode=ro")
	f.Fuzz(func(t *testing.T, d0, d1, size string) {
		var specs []string
		for _, d := range []string{d0, d1} {
			if d != "" {
				specs = append(specs, d)
			}
		}
		disks, err := parseDisks(specs, size)
		if err != nil {
			if e, ok := ecode.As(err); !ok || e.Class != ecode.Inval {
				t.Fatalf("error %v is not an input error", err)
			}
			return
		}
		if len(disks) > maxIndexed {
			t.Fatalf("%d disks", len(disks))
		}
		for i, d := range disks {
			m := d.(map[string]any)
			n, ok := m["size"].(int64)
			if !ok || n < 0 {
				t.Fatalf("disk %d size %v", i, m["size"])
			}
			if mode, ok := m["mode"]; ok && mode != "rw" && mode != "ro" {
				t.Fatalf("disk %d mode %v", i, mode)
			}
		}
	})
}

func FuzzParseBEParams(f *testing.F) {
	for _, s := range []string{"memory=1G,vcpus=2", "auto_balance,no_always_failover", "-memory", "a=1,a=2", "memory=1e9T", "vcpus=99999999999999999999", ""} {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, reset bool) {
		m, err := parseBEParams("-B", s, reset)
		if err != nil {
			if e, ok := ecode.As(err); !ok || e.Class != ecode.Inval {
				t.Fatalf("error %v is not an input error", err)
			}
			return
		}
		for k, v := range m {
			if v == resetValue {
				continue
			}
			switch beKind(k) {
			case "size", "int":
				if n, ok := v.(int64); !ok || n < 0 {
					t.Fatalf("%s = %v", k, v)
				}
			case "bool":
				if _, ok := v.(bool); !ok {
					t.Fatalf("%s = %v", k, v)
				}
			}
		}
	})
}

func FuzzSelectFields(f *testing.F) {
	for _, s := range []string{"", "name", "+pip", "a,,b", "+", ",", "+a,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		def := []string{"name", "os"}
		fields, err := selectFields(s, def)
		if err != nil {
			return
		}
		if len(fields) == 0 {
			t.Fatalf("%q selected no field", s)
		}
		for _, fl := range fields {
			if fl == "" || strings.Contains(fl, ",") {
				t.Fatalf("%q gave field %q", s, fl)
			}
		}
		if def[0] != "name" || def[1] != "os" {
			t.Fatal("defaults modified")
		}
	})
}

func FuzzParsePriority(f *testing.F) {
	for _, s := range []string{"low", "normal", "high", "-20", "19", "20", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePriority(s)
		if err == nil && (p < prioMin || p > prioMax) {
			t.Fatalf("%q gave priority %d", s, p)
		}
	})
}

func TestFormatNumber(t *testing.T) {
	for v, want := range map[float64]string{0: "0", -3: "-3", 1.25: "1.25", 1e20: "100000000000000000000", math.MaxInt32: "2147483647"} {
		if got := formatNumber(v); got != want {
			t.Errorf("formatNumber(%v) = %q, want %q", v, got, want)
		}
	}
}
