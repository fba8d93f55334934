package exportcfg

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func sample() *Export {
	return &Export{
		Version: 0, Timestamp: 1700000000, Source: "node1", OS: "debootstrap+bookworm", Compression: "zstd",
		Name: "web1", Hypervisor: "kvm", DiskTemplate: "file", MaxMem: 2048, MinMem: 1024, VCPUs: 2,
		Tags: []string{"env:prod", "role:web"},
		Disks: []Disk{
			{Index: 0, Name: "root", SizeMiB: 10240, Dump: "disk0.img", Mode: "rw"},
			{Index: 2, SizeMiB: 1024, Dump: "disk2.img"},
		},
		NICs: []NIC{
			{MAC: "aa:00:00:11:22:33", IP: "192.0.2.5", Mode: "bridged", Link: "br0", Name: "eth0"},
			{MAC: "aa:00:00:11:22:34", Network: "lan"},
		},
		HVParams: map[string]string{"acpi": "true", "kernel_path": ""},
		BEParams: map[string]string{"maxmem": "2048", "vcpus": "2"},
		OSParams: map[string]string{"motd": "line one\nline two"},
	}
}

func TestRoundTrip(t *testing.T) {
	e := sample()
	data := e.Marshal()
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("round trip\n got %+v\nwant %+v\n%s", got, e, data)
	}
	if again := got.Marshal(); string(again) != string(data) {
		t.Fatalf("Marshal is not deterministic:\n%s\n---\n%s", data, again)
	}
}

func TestMarshalLayout(t *testing.T) {
	data := string(sample().Marshal())
	for _, want := range []string{
		"[export]\nversion = 0\ntimestamp = 1700000000\nsource = node1\nos = debootstrap+bookworm\ncompression = zstd\n\n[instance]\n",
		"name = web1\nmaxmem = 2048\nminmem = 1024\nmemory = 2048\nvcpus = 2\n",
		"tags = env:prod role:web\n",
		"nic1_mac = aa:00:00:11:22:34\nnic1_ip = None\nnic1_network = lan\n",
		"nic_count = 2\n",
		"disk2_ivname = disk/2\ndisk2_dump = disk2.img\ndisk2_size = 1024\ndisk2_name = None\ndisk_count = 2\n",
		"[hypervisor]\nacpi = true\nkernel_path = \n",
		"[os]\nmotd = line one\n\tline two\n",
	} {
		if !strings.Contains(data, want) {
			t.Errorf("output lacks %q:\n%s", want, data)
		}
	}
}

func TestParseGanetiExport(t *testing.T) {
	data, err := os.ReadFile("testdata/ganeti-config.ini")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	want := &Export{
		Version: 0, Timestamp: 1701342000, Source: "node1.example.com", OS: "debootstrap+default", Compression: "none",
		Name: "web1.example.com", Hypervisor: "kvm", DiskTemplate: "plain", MaxMem: 1024, MinMem: 512, VCPUs: 2,
		Tags: []string{"role:web", "env:prod"},
		NICs: []NIC{
			{MAC: "aa:00:00:4e:2a:11", Mode: "bridged", Link: "br0"},
			{MAC: "aa:00:00:4e:2a:12", IP: "192.0.2.10", Mode: "routed", Link: "rt100"},
		},
		Disks: []Disk{
			{Index: 0, SizeMiB: 10240, Dump: "1d2c7a4e-7f3b-4c1e-9a55-2b4f3c9d0e11.disk0_data.snap"},
			{Index: 1, SizeMiB: 2048, Dump: "5e6f7a8b-1c2d-4e3f-8a9b-0c1d2e3f4a5b.disk1_data.snap"},
		},
		HVParams: map[string]string{"kernel_path": "", "acpi": "True", "boot_order": "disk"},
		BEParams: map[string]string{"maxmem": "1024", "minmem": "512", "vcpus": "2", "always_failover": "False"},
		OSParams: map[string]string{"dhcp": "yes"},
	}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got  %+v\nwant %+v", e, want)
	}
}

func TestParseSyntax(t *testing.T) {
	in := "# written by hand\n; another comment\n[export]\nVersion: 0\n[instance]\n  NAME = old  \nname=web1\n" +
		"memory = 512\ndisk_count = 0\nnic_count = 0\ndescription = first\n  second\n\n\tthird = 3\n[hypervisor]\n"
	e, err := Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if e.Name != "web1" || e.MaxMem != 512 || e.MinMem != 512 || e.Disks != nil || e.NICs != nil || e.Tags != nil {
		t.Fatalf("got %+v", e)
	}
	if e.HVParams == nil || e.BEParams == nil || e.OSParams == nil {
		t.Fatal("parameter maps must not be nil")
	}
}

func TestParseErrors(t *testing.T) {
	const ok = "[export]\nversion = 0\n[instance]\nname = a\nnic_count = 0\ndisk_count = 0\n"
	for _, tc := range []struct{ name, in, want string }{
		{"empty", "", "no [export] section"},
		{"no instance", "[export]\nversion = 0\n", "no [instance] section"},
		{"no version", strings.Replace(ok, "version = 0\n", "", 1), "has no version"},
		{"version 1", strings.Replace(ok, "version = 0", "version = 1", 1), "unsupported export version \"1\""},
		{"no name", strings.Replace(ok, "name = a\n", "", 1), "has no name"},
		{"key first", "k = v\n" + ok, "line 1: key \"k\" before any [section]"},
		{"bad header", ok + "[oops\n", "bad section header"},
		{"no separator", ok + "justtext\n", "expected \"key = value\""},
		{"empty key", ok + "= v\n", "empty key"},
		{"no nic_count", strings.Replace(ok, "nic_count = 0\n", "", 1), "has no nic_count"},
		{"bad disk_count", strings.Replace(ok, "disk_count = 0", "disk_count = x", 1), "disk_count: invalid count \"x\""},
		{"huge disk_count", strings.Replace(ok, "disk_count = 0", "disk_count = 99", 1), "invalid count \"99\" (0 to 16)"},
		{"nic_count short", ok + "nic0_mac = aa:00:00:00:00:01\n", "nic_count is 0 but 1 NIC(s)"},
		{"nic gap", strings.Replace(ok, "nic_count = 0", "nic_count = 1", 1) + "nic1_mac = aa:00:00:00:00:01\n", "nic_count is 1 but 0 NIC(s)"},
		{"disk_count long", strings.Replace(ok, "disk_count = 0", "disk_count = 2", 1) + "disk0_size = 5\n", "disk_count is 2 but 1 disk(s)"},
		{"bad size", strings.Replace(ok, "disk_count = 0", "disk_count = 1", 1) + "disk0_size = -5\n", "disk0_size: invalid number"},
		{"bad memory", ok + "maxmem = lots\n", "maxmem: invalid number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("minimal export refused: %v", err)
	}
}

func TestMarshalDropsUnwritableKeys(t *testing.T) {
	e := sample()
	e.HVParams = map[string]string{"a=b": "1", "#c": "2", "Upper": "3", "ok": "multi\n\n  line  "}
	got, err := Parse(e.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"ok": "multi\nline"}; !reflect.DeepEqual(got.HVParams, want) {
		t.Fatalf("hvparams %v, want %v", got.HVParams, want)
	}
}

// FuzzParse checks that Parse never panics and that what it accepts
// survives Marshal and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add(string(sample().Marshal()))
	if data, err := os.ReadFile("testdata/ganeti-config.ini"); err == nil {
		f.Add(string(data))
	}
	f.Add("[export]\nversion = 0\n[instance]\nname = a\nnic_count = 0\ndisk_count = 0\n")
	f.Add("[export]\nversion=0\n[instance]\nname: a\n  b\nnic_count = 1\nnic0_mac = x\nnic0_ip = none\ndisk_count = 1\ndisk3_size = 7\ntags = \n[os]\nK = v\n")
	f.Add("[export\n")
	f.Fuzz(func(t *testing.T, in string) {
		e, err := Parse([]byte(in))
		if err != nil {
			return
		}
		out := e.Marshal()
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Marshal output does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(e, again) {
			t.Fatalf("round trip changed the export\n got %#v\nwant %#v\n%s", again, e, out)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data := sample().Marshal()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
