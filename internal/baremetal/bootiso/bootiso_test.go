package bootiso

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/ecode"
)

// TestISOCarriesTheCommandLine builds an ISO and reads its isolinux
// configuration and files back with xorriso.
func TestISOCarriesTheCommandLine(t *testing.T) {
	bmctest.NeedISOTools(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, KernelFile), []byte("kernel-bytes"), 0o644)
	os.WriteFile(filepath.Join(dir, InitrdFile), []byte("initrd-bytes"), 0o644)
	cmdline, err := AgentCommandLine("https://10.0.0.1:6385", strings.Repeat("0F", 32), " console=ttyS0 ipa-advertise-port=19999 ")
	if err != nil {
		t.Fatal(err)
	}
	if want := "ipa-api-url=https://10.0.0.1:6385 corral.api-ca-sha256=" + strings.Repeat("0f", 32) + " console=ttyS0 ipa-advertise-port=19999"; cmdline != want {
		t.Fatalf("command line %q, want %q", cmdline, want)
	}
	iso := filepath.Join(t.TempDir(), "m1.iso")
	if err := (Loader{}).Build(context.Background(), dir, iso, cmdline); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, f := range []string{"/isolinux/isolinux.cfg", "/" + InitrdFile} {
		if b, err := exec.Command("xorriso", "-osirrox", "on", "-indev", iso, "-extract", f, filepath.Join(out, filepath.Base(f))).CombinedOutput(); err != nil {
			t.Fatalf("extract %s: %v\n%s", f, err, b)
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(out, "isolinux.cfg"))
	if !strings.Contains(string(cfg), "\n  APPEND "+cmdline+"\n") || !strings.Contains(string(cfg), "INITRD /initrd.img") {
		t.Fatalf("isolinux.cfg:\n%s", cfg)
	}
	if b, _ := os.ReadFile(filepath.Join(out, InitrdFile)); string(b) != "initrd-bytes" {
		t.Fatalf("initrd in the ISO: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(iso), ".bootiso-*")); len(left) != 0 {
		t.Fatalf("staging left behind: %v", left)
	}
	if err := (Loader{}).Build(context.Background(), dir, iso, "a\nb"); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("a two-line command line: %v", err)
	}
	if err := (Loader{}).Build(context.Background(), t.TempDir(), iso, "x"); ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), "vmlinuz") {
		t.Fatalf("a ramdisk directory without kernel: %v", err)
	}
}

func TestAgentCommandLineRefusals(t *testing.T) {
	for name, tc := range map[string][3]string{
		"no scheme":        {"10.0.0.1:6385", "", ""},
		"ftp":              {"ftp://h/", "", ""},
		"credentials":      {"http://u:p@h:6385", "", ""},
		"blank in url":     {"http://h:6385/a b", "", ""},
		"short pin":        {"https://h:6385", "abcd", ""},
		"pin without tls":  {"http://h:6385", strings.Repeat("ab", 32), ""},
		"newline in param": {"http://h:6385", "", "a\nroot=/dev/sda"},
		"too long":         {"http://h:6385", "", strings.Repeat("x", 2100)},
	} {
		if _, err := AgentCommandLine(tc[0], tc[1], tc[2]); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: %v, want an Inval error", name, err)
		}
	}
	if got, err := AgentCommandLine("http://h:6385", "", ""); err != nil || got != "ipa-api-url=http://h:6385" {
		t.Fatalf("%q %v", got, err)
	}
}
