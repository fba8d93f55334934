package kvm

// Tests of the os/tiny OS definition, the guest TestBootTinyGuest installs.
// They need no qemu: the scripts only write file systems.

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type tinyOS struct {
	dir     string
	debugfs string
}

func newTinyOS(t *testing.T) tinyOS {
	t.Helper()
	var found []string
	for _, tool := range []string{"mke2fs", "debugfs"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			if p, err = exec.LookPath("/sbin/" + tool); err != nil {
				t.Skipf("%s (e2fsprogs) is not installed", tool)
			}
		}
		found = append(found, p)
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("/bin/busybox (busybox-static) is not installed")
	}
	return tinyOS{dir: filepath.Join(repoRoot(t), "os", "tiny"), debugfs: found[1]}
}

// run runs one script the way the OS API does: clean environment, cwd = the
// OS directory.
func (o tinyOS) run(t *testing.T, script string, env []string, stdin []byte, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(o.dir, script), args...)
	cmd.Dir = o.dir
	cmd.Env = append([]string{"PATH=/sbin:/bin:/usr/sbin:/usr/bin", "OS_API_VERSION=20", "OS_NAME=tiny", "DEBUG_LEVEL=0"}, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), errb.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	return out.String(), errb.String(), 0
}

func sparseDisk(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

func (o tinyOS) cat(t *testing.T, disk, path string) string {
	t.Helper()
	out, err := exec.Command(o.debugfs, "-R", "cat "+path, disk).Output()
	if err != nil {
		t.Fatalf("debugfs cat %s: %v", path, err)
	}
	return string(out)
}

func TestTinyOSCreateRename(t *testing.T) {
	o := newTinyOS(t)
	disk := sparseDisk(t, 16<<20)
	env := []string{"INSTANCE_NAME=vm1.example", "DISK_COUNT=1", "DISK_0_PATH=" + disk, "OSP_MARKER=m-1"}
	if out, errs, code := o.run(t, "create", env, nil); code != 0 {
		t.Fatalf("create exited %d: %s%s", code, out, errs)
	}
	if st, _ := os.Stat(disk); st.Size() != 16<<20 {
		t.Fatalf("create changed the disk size to %d", st.Size())
	}
	if got := o.cat(t, disk, "/etc/hostname"); got != "vm1.example\n" {
		t.Fatalf("hostname = %q", got)
	}
	if got := o.cat(t, disk, "/etc/corral-marker"); got != "m-1\n" {
		t.Fatalf("marker = %q", got)
	}
	if init := o.cat(t, disk, "/sbin/init"); !strings.Contains(init, "CORRAL-GUEST-BOOTED name=") {
		t.Fatalf("/sbin/init does not print the boot marker:\n%s", init)
	}
	if acpi := o.cat(t, disk, "/etc/acpi/PWRF/00000080"); !strings.Contains(acpi, "CORRAL-GUEST-POWERDOWN") {
		t.Fatalf("power button handler:\n%s", acpi)
	}

	out, errs, code := o.run(t, "rename", []string{"INSTANCE_NAME=vm2.example", "OLD_INSTANCE_NAME=vm1.example", "DISK_COUNT=1", "DISK_0_PATH=" + disk}, nil)
	if code != 0 || !strings.Contains(out, "vm2.example") {
		t.Fatalf("rename exited %d: %s%s", code, out, errs)
	}
	if got := o.cat(t, disk, "/etc/hostname"); got != "vm2.example\n" {
		t.Fatalf("hostname after rename = %q", got)
	}
	if got := o.cat(t, disk, "/etc/corral-marker"); got != "m-1\n" {
		t.Fatalf("rename lost the marker: %q", got)
	}
	if _, _, code := o.run(t, "rename", []string{"INSTANCE_NAME=x", "DISK_COUNT=1", "DISK_0_PATH=/nonexistent"}, nil); code == 0 {
		t.Fatal("rename of a missing disk succeeded")
	}

	// No disk: nothing to do. Bad marker: refused.
	if out, errs, code := o.run(t, "create", []string{"INSTANCE_NAME=x", "DISK_COUNT=0"}, nil); code != 0 {
		t.Fatalf("create without disks exited %d: %s%s", code, out, errs)
	}
	if _, errs, code := o.run(t, "create", append(env[:3:3], "OSP_MARKER=two words"), nil); code == 0 || !strings.Contains(errs, "whitespace") {
		t.Fatalf("create with a bad marker: exit %d, %s", code, errs)
	}
}

func TestTinyOSExportImport(t *testing.T) {
	o := newTinyOS(t)
	src := sparseDisk(t, 8<<20)
	if _, errs, code := o.run(t, "create", []string{"INSTANCE_NAME=e1", "DISK_COUNT=1", "DISK_0_PATH=" + src}, nil); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	want, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}

	// export, with the expected size reported on an extra descriptor.
	sizeR, sizeW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(o.dir, "export"))
	cmd.Dir = o.dir
	cmd.Env = []string{"PATH=/sbin:/bin:/usr/sbin:/usr/bin", "EXPORT_INDEX=0", "EXPORT_DISK_PATH=" + src, "EXP_SIZE_FD=3"}
	cmd.ExtraFiles = []*os.File{sizeW}
	stream, err := cmd.Output()
	sizeW.Close()
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	sizeLine := make([]byte, 64)
	n, _ := sizeR.Read(sizeLine)
	sizeR.Close()
	if got := strings.TrimSpace(string(sizeLine[:n])); got != strconv.Itoa(8<<20) {
		t.Fatalf("export reported size %q", got)
	}
	if !bytes.Equal(stream, want) {
		t.Fatal("exported stream differs from the disk")
	}

	dst := sparseDisk(t, 8<<20)
	if _, errs, code := o.run(t, "import", []string{"IMPORT_INDEX=0", "IMPORT_DISK_PATH=" + dst}, stream); code != 0 {
		t.Fatalf("import: %s", errs)
	}
	got, _ := os.ReadFile(dst)
	if !bytes.Equal(got, want) {
		t.Fatal("imported disk differs from the source")
	}
	small := sparseDisk(t, 4<<20)
	if _, errs, code := o.run(t, "import", []string{"IMPORT_INDEX=0", "IMPORT_DISK_PATH=" + small}, stream); code == 0 || !strings.Contains(errs, "larger than the disk") {
		t.Fatalf("import into a smaller disk: exit %d, %s", code, errs)
	}
	if st, _ := os.Stat(small); st.Size() != 4<<20 {
		t.Fatalf("import grew the disk to %d", st.Size())
	}
}

func TestTinyOSVerify(t *testing.T) {
	o := newTinyOS(t)
	tests := []struct {
		marker string
		ok     bool
	}{
		{"", true},
		{"hello-42", true},
		{strings.Repeat("x", 64), true},
		{strings.Repeat("x", 65), false},
		{"two words", false},
		{"tab\there", false},
		{`quote"d`, false},
		{"it's", false},
		{"back`tick", false},
	}
	for _, tc := range tests {
		out, _, code := o.run(t, "verify", []string{"OSP_MARKER=" + tc.marker}, nil, "parameters")
		if (code == 0) != tc.ok {
			t.Errorf("marker %q: exit %d (%s)", tc.marker, code, out)
		}
		if !tc.ok && !strings.Contains(out, "marker") {
			t.Errorf("marker %q: failure does not say why: %q", tc.marker, out)
		}
	}
	if _, _, code := o.run(t, "verify", nil, nil); code == 0 {
		t.Error("verify without a check succeeded")
	}
	if _, _, code := o.run(t, "verify", nil, nil, "bogus"); code == 0 {
		t.Error("verify with an unknown check succeeded")
	}
	for _, f := range []string{"ganeti_api_version", "variants.list", "parameters.list"} {
		if _, err := os.Stat(filepath.Join(o.dir, f)); err != nil {
			t.Errorf("OS definition lacks %s", f)
		}
	}
	for _, s := range []string{"create", "import", "export", "rename", "verify"} {
		if st, err := os.Stat(filepath.Join(o.dir, s)); err != nil || st.Mode()&0o100 == 0 {
			t.Errorf("%s is missing or not executable", s)
		}
	}
}

// TestTinyOSKeepsParametersOutOfItsLog: the marker may come as a secret OS
// parameter (OSP_MARKER carries public, private and secret ones alike), so
// no script writes its value to the log (stdout and stderr), whether it
// succeeds or refuses the value; the image still gets it.
func TestTinyOSKeepsParametersOutOfItsLog(t *testing.T) {
	o := newTinyOS(t)
	disk := sparseDisk(t, 16<<20)
	const value = "S3cretMarkerValue"
	env := []string{"INSTANCE_NAME=vm1.example", "DISK_COUNT=1", "DISK_0_PATH=" + disk, "OSP_MARKER=" + value}
	out, errs, code := o.run(t, "create", env, nil)
	if code != 0 {
		t.Fatalf("create exited %d", code)
	}
	if strings.Contains(out+errs, value) {
		t.Errorf("create logged the parameter's value:\n%s%s", out, errs)
	}
	if got := o.cat(t, disk, "/etc/corral-marker"); got != value+"\n" {
		t.Fatalf("marker in the image = %q", got)
	}
	out, errs, _ = o.run(t, "rename", []string{"INSTANCE_NAME=vm2.example", "DISK_COUNT=1", "DISK_0_PATH=" + disk, "OSP_MARKER=" + value}, nil)
	if strings.Contains(out+errs, value) {
		t.Errorf("rename logged the parameter's value:\n%s%s", out, errs)
	}
	bad := value + strings.Repeat("x", 64)
	for _, script := range []string{"create", "verify"} {
		out, errs, code := o.run(t, script, []string{"INSTANCE_NAME=x", "DISK_COUNT=1", "DISK_0_PATH=" + disk, "OSP_MARKER=" + bad}, nil, "parameters")
		if code == 0 {
			t.Errorf("%s accepted a marker of %d characters", script, len(bad))
		}
		if strings.Contains(out+errs, value) {
			t.Errorf("%s logged the refused value:\n%s%s", script, out, errs)
		}
	}
}
