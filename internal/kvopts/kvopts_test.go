package kvopts

import (
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// checkErr asserts err is a wrong_input error whose message contains want.
func checkErr(t *testing.T, err error, kind ecode.Kind, want string) {
	t.Helper()
	e, ok := ecode.As(err)
	if !ok {
		t.Fatalf("err = %v, want an *ecode.Error containing %q", err, want)
	}
	if e.Kind != kind || e.Class != ecode.Inval || !strings.Contains(e.Msg, want) {
		t.Fatalf("err = %s/%s %q, want %s/%s containing %q", e.Kind, e.Class, e.Msg, kind, ecode.Inval, want)
	}
}

func TestParseKV(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]string
		wantErr string
	}{
		{"", map[string]string{}, ""},
		{"memory=512,vcpus=2", map[string]string{"memory": "512", "vcpus": "2"}, ""},
		{"a=1,b,no_c", map[string]string{"a": "1", "b": "true", "c": "false"}, ""},
		{"acpi=true,kernel_path=/boot/vmlinuz", map[string]string{"acpi": "true", "kernel_path": "/boot/vmlinuz"}, ""},
		{"kernel_args=ro console=ttyS0,root=/dev/vda1", map[string]string{"kernel_args": "ro console=ttyS0", "root": "/dev/vda1"}, ""},
		{"cmd=a=b=c", map[string]string{"cmd": "a=b=c"}, ""},
		{`list=a\,b\,c,x=1`, map[string]string{"list": "a,b,c", "x": "1"}, ""},
		{`path=C:\\dir,y=2`, map[string]string{"path": `C:\dir`, "y": "2"}, ""},
		{`k=\\,z`, map[string]string{"k": `\`, "z": "true"}, ""},
		{`k=trailing\`, map[string]string{"k": `trailing\`}, ""},
		{`k=\x`, map[string]string{"k": "x"}, ""},
		{"empty=", map[string]string{"empty": ""}, ""},
		{"no_x=1", map[string]string{"no_x": "1"}, ""},
		{"-x=1", map[string]string{"-x": "1"}, ""},
		{"size=10,size=20", nil, `duplicate key "size"`},
		{"no_acpi,acpi", nil, `duplicate key "acpi"`},
		{"a=1,,b=2", nil, "empty element 2"},
		{"a=1,", nil, "empty element 2"},
		{"=5", nil, "empty key in element 1"},
		{"no_", nil, "empty key in element 1"},
		{"-kernel_path", nil, `"kernel_path" cannot be reset`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseKV(tt.in)
			if tt.wantErr != "" {
				checkErr(t, err, ecode.ParameterError, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	got, err := ParseValues("-kernel_path,acpi,no_serial_console,vnc_bind_address=0.0.0.0")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Value{
		"kernel_path":      {Reset: true},
		"acpi":             {Set: true, Str: "true"},
		"serial_console":   {Set: true, Str: "false"},
		"vnc_bind_address": {Set: true, Str: "0.0.0.0"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if v := got["missing"]; v.Set || v.Reset {
		t.Fatal("a missing key reads as given")
	}
	if _, err := ParseValues("-a,a=1"); err == nil {
		t.Fatal("reset and set of one key accepted")
	}
}

func TestErrorsDoNotEchoValues(t *testing.T) {
	for _, in := range []string{"password=hunter2,password=hunter2", "password=hunter2,,x", "password=hunter2,=hunter2"} {
		_, err := ParseKV(in)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("ParseKV(%q): %v", in, err)
		}
	}
	_, _, err := ParseIdentKV("secret=hunter2")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("ParseIdentKV: %v", err)
	}
}

func TestParseStrictKV(t *testing.T) {
	got, err := ParseStrictKV(`min=1,max=a\,b=c`)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"min": "1", "max": "a,b=c"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for in, want := range map[string]string{
		"a=1,b":   `missing '=' after key "b"`,
		"a=1,a=2": `duplicate key "a"`,
		"a=1,,":   "empty element 2",
		"=1":      "empty key",
	} {
		_, err := ParseStrictKV(in)
		checkErr(t, err, ecode.ParameterError, want)
	}
}

func TestParseGroup(t *testing.T) {
	tests := []struct {
		in      string
		want    Group
		wantErr string
	}{
		{"0:size=10G,mode=rw", Group{Ident: "0", Values: map[string]Value{"size": {Set: true, Str: "10G"}, "mode": {Set: true, Str: "rw"}}}, ""},
		{"kvm:kernel_path=/boot/vmlinuz,acpi", Group{Ident: "kvm", Values: map[string]Value{"kernel_path": {Set: true, Str: "/boot/vmlinuz"}, "acpi": {Set: true, Str: "true"}}}, ""},
		{"kvm", Group{Ident: "kvm", Values: map[string]Value{}}, ""},
		{"kvm:", Group{Ident: "kvm", Values: map[string]Value{}}, ""},
		{"0:link=br0:1", Group{Ident: "0", Values: map[string]Value{"link": {Set: true, Str: "br0:1"}}}, ""},
		{"add:mode=bridged,link=br0", Group{Ident: "add", Values: map[string]Value{"mode": {Set: true, Str: "bridged"}, "link": {Set: true, Str: "br0"}}}, ""},
		{"-1:size=1G", Group{Ident: "-1", Values: map[string]Value{"size": {Set: true, Str: "1G"}}}, ""},
		{"kvm:-kernel_path", Group{Ident: "kvm", Values: map[string]Value{"kernel_path": {Reset: true}}}, ""},
		{"no_xen-pvm", Group{Ident: "xen-pvm", Remove: true}, ""},
		{"-kvm", Group{Ident: "kvm", Reset: true}, ""},
		{"no_kvm:", Group{Ident: "kvm", Remove: true}, ""},
		{"no_kvm:acpi=1", Group{}, `cannot pass options when removing or resetting parameter group "kvm"`},
		{"-kvm:acpi=1", Group{}, `cannot pass options`},
		{"size=10G", Group{}, "missing identifier"},
		{"size=10G:x", Group{}, "missing identifier"},
		{":size=10G", Group{}, "missing identifier"},
		{"", Group{}, "missing identifier"},
		{"no_", Group{}, "missing identifier"},
		{"-", Group{}, "missing identifier"},
		{"0:size=1,size=2", Group{}, `0: duplicate key "size"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGroup(tt.in)
			if tt.wantErr != "" {
				checkErr(t, err, ecode.ParameterError, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseIdentKV(t *testing.T) {
	ident, kv, err := ParseIdentKV("0:size=10G,mode=rw")
	if err != nil {
		t.Fatal(err)
	}
	if ident != "0" || !reflect.DeepEqual(kv, map[string]string{"size": "10G", "mode": "rw"}) {
		t.Fatalf("got %q %q", ident, kv)
	}
	ident, kv, err = ParseIdentKV("kvm")
	if err != nil || ident != "kvm" || kv == nil || len(kv) != 0 {
		t.Fatalf("bare ident: %q %v %v", ident, kv, err)
	}
	for in, want := range map[string]string{
		"no_kvm":          `"kvm" cannot be removed or reset`,
		"-kvm":            `"kvm" cannot be removed or reset`,
		"kvm:-acpi":       `kvm: "acpi" cannot be reset`,
		"mode=rw":         "missing identifier",
		"0:size=1,,":      "0: empty element 2",
		"0:mode=a,mode=b": `0: duplicate key "mode"`,
	} {
		_, _, err := ParseIdentKV(in)
		checkErr(t, err, ecode.ParameterError, want)
	}
}

func TestSplitListAndMods(t *testing.T) {
	got, err := SplitList(`a,b\,c,d`)
	if err != nil || !reflect.DeepEqual(got, []string{"a", "b,c", "d"}) {
		t.Fatalf("SplitList: %q %v", got, err)
	}
	if got, err := SplitList(""); err != nil || len(got) != 0 {
		t.Fatalf("SplitList empty: %q %v", got, err)
	}
	_, err = SplitList("a,,b")
	checkErr(t, err, ecode.ParameterError, "empty element 2")

	mods, err := ParseListMods("add:debian-image,remove:centos-image")
	if err != nil {
		t.Fatal(err)
	}
	want := []ListMod{{ActionAdd, "debian-image"}, {ActionRemove, "centos-image"}}
	if !reflect.DeepEqual(mods, want) {
		t.Fatalf("got %+v, want %+v", mods, want)
	}
	for in, want := range map[string]string{
		"debian":         "element 1 has no action",
		"add:a,delete:b": `element 2: unknown action "delete"`,
		"add:":           `element 1: empty name after "add:"`,
		"add:a,":         "empty element 2",
	} {
		_, err := ParseListMods(in)
		checkErr(t, err, ecode.ParameterError, want)
	}
}

func TestFormat(t *testing.T) {
	if got, want := FormatKV(map[string]string{"vcpus": "2", "memory": "512", "args": `a,b\c`}), `args=a\,b\\c,memory=512,vcpus=2`; got != want {
		t.Errorf("FormatKV = %q, want %q", got, want)
	}
	if got, want := FormatValues(map[string]Value{"a": {Reset: true}, "b": {Set: true, Str: "x"}, "c": {}}), "-a,b=x"; got != want {
		t.Errorf("FormatValues = %q, want %q", got, want)
	}
	if got, want := FormatIdentKV("0", map[string]string{"size": "10G"}), "0:size=10G"; got != want {
		t.Errorf("FormatIdentKV = %q, want %q", got, want)
	}
	if got, want := FormatIdentKV("kvm", nil), "kvm"; got != want {
		t.Errorf("FormatIdentKV = %q, want %q", got, want)
	}
	for _, g := range []Group{{Ident: "kvm", Remove: true}, {Ident: "kvm", Reset: true}, {Ident: "1", Values: map[string]Value{"x": {Reset: true}}}} {
		back, err := ParseGroup(FormatGroup(g))
		if err != nil || back.Ident != g.Ident || back.Remove != g.Remove || back.Reset != g.Reset || len(back.Values) != len(g.Values) {
			t.Errorf("group %+v -> %q -> %+v %v", g, FormatGroup(g), back, err)
		}
	}
}

func FuzzParseKV(f *testing.F) {
	for _, s := range []string{"", "a=1,b,no_c", `list=a\,b,x=\\`, "a=1,,", "-x,y=z=w", `k=trailing\`, "no_=1", "=", ","} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		kv, err := ParseKV(s)
		if err == nil {
			back, err := ParseKV(FormatKV(kv))
			if err != nil || !reflect.DeepEqual(back, kv) {
				t.Fatalf("%q -> %q -> %q -> %q, %v", s, kv, FormatKV(kv), back, err)
			}
			strict, err := ParseStrictKV(FormatKV(kv))
			if err != nil || !reflect.DeepEqual(strict, kv) {
				t.Fatalf("strict re-parse of %q: %q, %v", FormatKV(kv), strict, err)
			}
		}
		vals, err := ParseValues(s)
		if err != nil {
			return
		}
		for k, v := range vals {
			if k == "" || v.Set == v.Reset {
				t.Fatalf("%q: bad entry %q: %+v", s, k, v)
			}
		}
		back, err := ParseValues(FormatValues(vals))
		if err != nil || !reflect.DeepEqual(back, vals) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, vals, FormatValues(vals), back, err)
		}
	})
}

func FuzzParseIdentKV(f *testing.F) {
	for _, s := range []string{"0:size=10G,mode=rw", "kvm", "no_kvm", "-kvm", "-1:size=1", "kvm:-acpi", "a=b:c", ":", "x:y:z=1", `0:a\,b=c\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ident, kv, err := ParseIdentKV(s)
		if err == nil {
			if ident == "" || strings.ContainsAny(ident, ":=") {
				t.Fatalf("%q: bad identifier %q", s, ident)
			}
			i2, kv2, err := ParseIdentKV(FormatIdentKV(ident, kv))
			if err != nil || i2 != ident || !reflect.DeepEqual(kv2, kv) {
				t.Fatalf("%q -> %q %q -> %q -> %q %q, %v", s, ident, kv, FormatIdentKV(ident, kv), i2, kv2, err)
			}
		}
		g, err := ParseGroup(s)
		if err != nil {
			return
		}
		if g.Remove && g.Reset || (g.Remove || g.Reset) && len(g.Values) != 0 {
			t.Fatalf("%q: inconsistent group %+v", s, g)
		}
		back, err := ParseGroup(FormatGroup(g))
		if err != nil || !reflect.DeepEqual(back, g) {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, g, FormatGroup(g), back, err)
		}
	})
}

func FuzzParseListMods(f *testing.F) {
	for _, s := range []string{"add:a,remove:b", "add:a\\,b", "x", "add:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mods, err := ParseListMods(s)
		if err != nil {
			return
		}
		parts := make([]string, len(mods))
		for i, m := range mods {
			if m.Name == "" || (m.Action != ActionAdd && m.Action != ActionRemove) {
				t.Fatalf("%q: bad element %+v", s, m)
			}
			parts[i] = escape(m.Action + ":" + m.Name)
		}
		back, err := ParseListMods(strings.Join(parts, ","))
		if err != nil || !reflect.DeepEqual(back, mods) {
			t.Fatalf("%q -> %+v -> %+v, %v", s, mods, back, err)
		}
	})
}
