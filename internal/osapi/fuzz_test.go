package osapi

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

func TestParseAPIVersions(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"20\n", []int{20}, false},
		{"20\n15\n10\n", []int{20, 15, 10}, false},
		{" 20 \r\n15", []int{20, 15}, false},
		{"", nil, false},
		{"20\n\n", nil, true},
		{"x\n", nil, true},
		{"2.0\n", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseAPIVersions([]byte(tt.in))
		if (err != nil) != tt.wantErr || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseAPIVersions(%q) = %v, %v", tt.in, got, err)
		}
	}
	if EffectiveAPIVersion([]int{5, 15, 10, 30}) != 15 || EffectiveAPIVersion([]int{5}) != 0 || EffectiveAPIVersion(nil) != 0 {
		t.Error("EffectiveAPIVersion")
	}
}

func FuzzParseAPIVersions(f *testing.F) {
	for _, s := range []string{"20\n", "20\n15\n10\n", " 10 \r\n", "", "\n", "x", "-1\n+20", "99999999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := ParseAPIVersions(data)
		if err != nil {
			if got != nil {
				t.Fatalf("values returned with an error: %v", got)
			}
			return
		}
		// Every accepted file round-trips through its canonical form.
		var b strings.Builder
		for _, v := range got {
			b.WriteString(strconv.Itoa(v) + "\n")
		}
		again, err := ParseAPIVersions([]byte(b.String()))
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip: %v -> %v, %v", got, again, err)
		}
		eff := EffectiveAPIVersion(got)
		if eff != 0 && eff != 10 && eff != 15 && eff != 20 {
			t.Fatalf("effective version %d", eff)
		}
	})
}

func TestParseVariants(t *testing.T) {
	got := ParseVariants([]byte("# list\ndefault\n\n  minimal \r\n#x\nfull"))
	if want := []string{"default", "minimal", "full"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
	if ParseVariants(nil) != nil || ParseVariants([]byte("\n# only\n")) != nil {
		t.Fatal("empty lists must be nil")
	}
}

func FuzzParseVariants(f *testing.F) {
	for _, s := range []string{"default\nminimal\n", "# c\n\n x \n", "", "\r\r\n", "a#b\n#"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range ParseVariants(data) {
			if v == "" || strings.HasPrefix(v, "#") || strings.TrimSpace(v) != v || strings.ContainsAny(v, "\r\n") {
				t.Fatalf("bad variant %q", v)
			}
		}
	})
}

func TestParseParameters(t *testing.T) {
	got := ParseParameters([]byte("dhcp\tUse DHCP\n\n  root-password   The  password  \nflag\n"))
	want := [][2]string{{"dhcp", "Use DHCP"}, {"root-password", "The  password"}, {"flag", ""}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
}

func FuzzParseParameters(f *testing.F) {
	for _, s := range []string{"dhcp Use DHCP\n", "a\tb c\n\nd\n", "", "  \n\t", "x\u00a0y z"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range ParseParameters(data) {
			if p[0] == "" || strings.IndexFunc(p[0], unicode.IsSpace) >= 0 {
				t.Fatalf("bad name %q", p[0])
			}
			if strings.TrimSpace(p[1]) != p[1] || strings.ContainsAny(p[1], "\r\n") {
				t.Fatalf("bad description %q", p[1])
			}
		}
	})
}

// FuzzParseVersion: the version is one line, trimmed, and the first line's
// content whatever follows it.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.0\n", " 2.4-1 \r\nrest\n", "", "\n", "\r\r\n", "x\ny"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v := ParseVersion(data)
		if strings.ContainsAny(v, "\r\n") || v != strings.TrimSpace(v) {
			t.Fatalf("ParseVersion(%q) = %q: not one trimmed line", data, v)
		}
		if !strings.Contains(string(data), v) {
			t.Fatalf("ParseVersion(%q) = %q: not from the input", data, v)
		}
		if got := ParseVersion(append(append([]byte(nil), data...), []byte("\nmore")...)); got != v && len(splitLines(data)) > 0 {
			t.Fatalf("text after the first line changed the version: %q vs %q", got, v)
		}
	})
}
