package kvopts

import (
	"strconv"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestParseUnitMiB(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{"512", 512, ""},
		{"0", 0, ""},
		{"1G", 1024, ""},
		{"1g", 1024, ""},
		{"10G", 10240, ""},
		{"1.5g", 1536, ""},
		{"1.1g", 1127, ""}, // 1126.4 rounds up
		{"0.1", 1, ""},
		{"2.0001", 3, ""},
		{".5g", 512, ""},
		{"5.", 5, ""},
		{"100m", 100, ""},
		{"100M", 100, ""},
		{"100MB", 100, ""},
		{"100mib", 100, ""},
		{"100MiB", 100, ""},
		{"2GB", 2048, ""},
		{"2GiB", 2048, ""},
		{"1T", 1048576, ""},
		{"1tb", 1048576, ""},
		{"0.5TiB", 524288, ""},
		{"10 G", 10240, ""},
		{" 10G ", 10240, ""},
		{"8796093022207T", 8796093022207 << 20, ""},
		{"", 0, "empty size"},
		{"   ", 0, "empty size"},
		{"-1", 0, `negative size "-1"`},
		{"-1G", 0, "negative size"},
		{"+1", 0, "invalid size"},
		{"G", 0, "invalid size"},
		{".", 0, "invalid size"},
		{"1.2.3", 0, "invalid size"},
		{"1e3", 0, `unknown unit "e3"`},
		{"10K", 0, `unknown unit "K"`},
		{"10 GB x", 0, "unknown unit"},
		{"10Gb2", 0, "unknown unit"},
		{"8796093022208T", 0, "too large"},
		{"99999999999999999999", 0, "too large"},
		{strings.Repeat("1", 70), 0, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseUnitMiB(tt.in)
			if tt.wantErr != "" {
				checkErr(t, err, ecode.UnitParseError, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("ParseUnitMiB(%q) = %d, want %d", tt.in, got, tt.want)
			}
		})
	}
}

func TestFormatMiB(t *testing.T) {
	for in, want := range map[int64]string{0: "0M", 1: "1M", 1536: "1536M", 1024: "1G", 10240: "10G", 1 << 20: "1T", 3 << 20: "3T", (1 << 20) + 1024: "1025G"} {
		if got := FormatMiB(in); got != want {
			t.Errorf("FormatMiB(%d) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseUnitMiB(f *testing.F) {
	for _, s := range []string{"512", "1G", "1.5g", "0.1", "10 TiB", "-1", "", ".", "1e3", "8796093022208T", "1.", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseUnitMiB(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("%q -> negative %d", s, n)
		}
		if back, err := ParseUnitMiB(FormatMiB(n)); err != nil || back != n {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, n, FormatMiB(n), back, err)
		}
		// A plain integer is taken as MiB exactly.
		if back, err := ParseUnitMiB(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("%d as plain text -> %d, %v", n, back, err)
		}
	})
}
