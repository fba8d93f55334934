package provnet

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

const sampleConfig = `{
  "api_target": "127.0.0.1:6385",
  "networks": [
    {"name": "provisioning", "address": "10.88.0.1/24", "ipv6": "fd00:88::1/64", "boot": true},
    {"name": "rescue", "bridge": "bmresc", "address": "10.89.0.1/24", "ipv6": "fd00:89::1/64", "boot": true,
     "dhcp_start": "10.89.0.50", "dhcp_end": "10.89.0.60"},
    {"name": "tenant", "address": "10.90.0.1/24"}
  ]
}`

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	if c.Netns != DefaultNetns || c.HTTPPort != DefaultHTTPPort || c.APIPort != DefaultAPIPort {
		t.Fatalf("defaults: %+v", c)
	}
	prov, err := c.Network("provisioning")
	if err != nil {
		t.Fatal(err)
	}
	if prov.Bridge != "bm-provisioning" || prov.Gateway().String() != "10.88.0.1" ||
		prov.start.String() != "10.88.0.100" || prov.end.String() != "10.88.0.199" {
		t.Fatalf("provisioning: bridge %s gateway %s range %s-%s", prov.Bridge, prov.Gateway(), prov.start, prov.end)
	}
	resc, _ := c.Network("rescue")
	if resc.Bridge != "bmresc" || resc.start.String() != "10.89.0.50" || resc.end.String() != "10.89.0.60" {
		t.Fatalf("rescue: %+v", resc)
	}
	if got := len(c.BootNetworks()); got != 2 {
		t.Fatalf("%d booting networks, want 2", got)
	}
	url, err := c.APIURL("rescue", "https")
	if err != nil || url != "https://10.89.0.1:6385" {
		t.Fatalf("APIURL(rescue) = %q, %v", url, err)
	}
	if _, err := c.APIURL("tenant", "https"); ecode.ClassOf(err) != ecode.State {
		t.Fatalf("APIURL(tenant): %v, want a state error (no forwarder on a non-booting network)", err)
	}
	if _, err := c.Network("nope"); ecode.ClassOf(err) != ecode.NoEnt {
		t.Fatalf("unknown network: %v", err)
	}
}

func TestParseConfigRefuses(t *testing.T) {
	net := func(extra string) string {
		return `{"networks": [` + extra + `]}`
	}
	for name, data := range map[string]string{
		"unknown field":       `{"netns": "x", "bridges": []}`,
		"no networks":         `{}`,
		"bad netns":           `{"netns": "Bad/Name", "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"same ports":          `{"http_port": 6385, "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"port range":          `{"api_port": 70000, "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"bad target":          `{"api_target": "localhost", "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"trailing data":       `{"networks": [{"name": "p", "address": "10.0.0.1/24"}]} {}`,
		"no prefix":           net(`{"name": "p", "address": "10.0.0.1"}`),
		"ipv6 address":        net(`{"name": "p", "address": "fd00::1/64"}`),
		"network address":     net(`{"name": "p", "address": "10.0.0.0/24"}`),
		"broadcast":           net(`{"name": "p", "address": "10.0.0.255/24"}`),
		"tiny subnet":         net(`{"name": "p", "address": "10.0.0.1/30"}`),
		"bad name":            net(`{"name": "Prov", "address": "10.0.0.1/24"}`),
		"long bridge":         net(`{"name": "p", "bridge": "a-very-long-bridge", "address": "10.0.0.1/24"}`),
		"bad ipv6":            net(`{"name": "p", "address": "10.0.0.1/24", "ipv6": "fd00::1/48"}`),
		"duplicate name":      net(`{"name": "p", "address": "10.0.0.1/24"}, {"name": "p", "bridge": "b2", "address": "10.1.0.1/24"}`),
		"duplicate bridge":    net(`{"name": "p", "bridge": "b", "address": "10.0.0.1/24"}, {"name": "q", "bridge": "b", "address": "10.1.0.1/24"}`),
		"overlap":             net(`{"name": "p", "address": "10.0.0.1/16"}, {"name": "q", "address": "10.0.5.1/24"}`),
		"overlap v6":          net(`{"name": "p", "address": "10.0.0.1/24", "ipv6": "fd00::1/64"}, {"name": "q", "address": "10.1.0.1/24", "ipv6": "fd00::2/64"}`),
		"range off subnet":    net(`{"name": "p", "address": "10.0.0.1/24", "boot": true, "dhcp_start": "10.0.1.5"}`),
		"range reversed":      net(`{"name": "p", "address": "10.0.0.1/24", "boot": true, "dhcp_start": "10.0.0.150", "dhcp_end": "10.0.0.120"}`),
		"range has gateway":   net(`{"name": "p", "address": "10.0.0.150/24", "boot": true}`),
		"range no boot":       net(`{"name": "p", "address": "10.0.0.1/24", "dhcp_start": "10.0.0.5"}`),
		"forward on api port": `{"forwards": [{"port": 6385, "target": "127.0.0.1:80"}], "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"forward twice":       `{"forwards": [{"port": 81, "target": "127.0.0.1:80"}, {"port": 81, "target": "127.0.0.1:82"}], "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"forward bad target":  `{"forwards": [{"port": 81, "target": "images:80"}], "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
		"forward port range":  `{"forwards": [{"port": 0, "target": "127.0.0.1:80"}], "networks": [{"name": "p", "address": "10.0.0.1/24"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := ParseConfig([]byte(data)); err == nil {
				t.Fatalf("accepted: %+v", c)
			} else if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("error %v has class %s, want %s", err, ecode.ClassOf(err), ecode.Inval)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "networks.json")
	if _, err := LoadConfig(path); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(sampleConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil || len(c.Networks) != 3 {
		t.Fatalf("LoadConfig: %+v %v", c, err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(sampleConfig))
	f.Add([]byte(`{"networks": [{"name": "p", "address": "10.0.0.1/29", "boot": true}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		// Whatever is accepted must make sane dnsmasq ranges.
		for _, n := range c.BootNetworks() {
			if !n.gateway.Contains(n.start) || !n.gateway.Contains(n.end) || n.end.Less(n.start) {
				t.Fatalf("network %s: range %s-%s outside %s", n.Name, n.start, n.end, n.gateway)
			}
			if checkIfName(n.Bridge) != nil {
				t.Fatalf("bridge name %q accepted", n.Bridge)
			}
		}
	})
}

func testService(t *testing.T) (*Service, *Config) {
	t.Helper()
	c, err := ParseConfig([]byte(sampleConfig))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s, err := New(c, Options{StateDir: filepath.Join(dir, "state"), RamdiskDir: filepath.Join(dir, "ramdisk")})
	if err != nil {
		t.Fatal(err)
	}
	// t.TempDir is private to root (0700): dnsmasq, running as nobody,
	// could not read its hosts directory below it.
	if err := s.makeDirs(); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("a state directory below a private one: %v, want an environment error", err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.makeDirs(); err != nil {
		t.Fatal(err)
	}
	return s, c
}

func TestDnsmasqConfig(t *testing.T) {
	s, c := testService(t)
	prov, _ := c.Network("provisioning")
	conf := s.dnsmasqConfig(prov)
	st := s.stateDir + "/dnsmasq/"
	for _, want := range []string{
		"\ninterface=bm-provisioning\n",
		"\nport=0\n",
		"\nno-ping\n",
		"\ndhcp-range=10.88.0.100,10.88.0.199,255.255.255.0,1h\n",
		"\ndhcp-option=option:router,10.88.0.1\n",
		"\ndhcp-hostsdir=" + st + "hosts\n",
		"\ndhcp-ignore=tag:!known\n",
		"\ndhcp-match=set:ipxe,175\n",
		"\ndhcp-boot=tag:ipxe,http://10.88.0.1:8088/boot.ipxe\n",
		"\nenable-ra\n",
		"\ndhcp-range=::,constructor:bm-provisioning,ra-only\n",
		"\npid-file=" + st + "provisioning.pid\n",
		"\ndhcp-leasefile=" + st + "provisioning.leases\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("dnsmasq configuration lacks %q:\n%s", strings.TrimSpace(want), conf)
		}
	}
	noV6 := *prov
	noV6.IPv6, noV6.ipv6 = "", netip.Prefix{}
	if conf := s.dnsmasqConfig(&noV6); strings.Contains(conf, "enable-ra") || strings.Contains(conf, "constructor:") {
		t.Errorf("router advertisements without an IPv6 prefix:\n%s", conf)
	}
}

func TestPrepareBootAndScripts(t *testing.T) {
	s, c := testService(t)
	prov, _ := c.Network("provisioning")
	if err := os.MkdirAll(s.ramdiskDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.ramdiskDir, RamdiskKernel), []byte("KERNEL-BYTES"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.bootHandler(prov))
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := get("/boot.ipxe"); code != 200 || body != "#!ipxe\nchain http://10.88.0.1:8088/machines/${mac:hexhyp}.ipxe\n" {
		t.Fatalf("chain script: %d %q", code, body)
	}
	if code, _ := get("/machines/52-54-00-aa-bb-cc.ipxe"); code != 404 {
		t.Fatalf("a machine never prepared got %d, want 404", code)
	}
	const cmdline = "console=ttyS0 ipa-api-url=https://10.88.0.1:6385"
	if err := s.PrepareBoot("52:54:00:AA:BB:CC", cmdline); err != nil {
		t.Fatal(err)
	}
	want := "#!ipxe\nkernel http://10.88.0.1:8088/ramdisk/vmlinuz " + cmdline +
		"\ninitrd http://10.88.0.1:8088/ramdisk/initrd.img\nboot\n"
	if code, body := get("/machines/52-54-00-aa-bb-cc.ipxe"); code != 200 || body != want {
		t.Fatalf("machine script: %d %q, want %q", code, body, want)
	}
	host, err := os.ReadFile(filepath.Join(s.DHCPHostsDir(), "52-54-00-aa-bb-cc"))
	if err != nil || string(host) != "52:54:00:aa:bb:cc\n" {
		t.Fatalf("dhcp host file: %q %v", host, err)
	}
	if code, body := get("/ramdisk/vmlinuz"); code != 200 || body != "KERNEL-BYTES" {
		t.Fatalf("kernel: %d %q", code, body)
	}
	for _, p := range []string{"/ramdisk/../boot/52-54-00-aa-bb-cc.cmdline", "/ramdisk/other", "/machines/zz.ipxe", "/machines/52-54-00-aa-bb-cc"} {
		if code, _ := get(p); code == 200 {
			t.Fatalf("%s served", p)
		}
	}

	if err := s.CleanUpBoot("52:54:00:aa:bb:cc"); err != nil {
		t.Fatal(err)
	}
	if code, _ := get("/machines/52-54-00-aa-bb-cc.ipxe"); code != 404 {
		t.Fatalf("a cleaned-up machine got %d, want 404", code)
	}
	if _, err := os.Stat(filepath.Join(s.DHCPHostsDir(), "52-54-00-aa-bb-cc")); !os.IsNotExist(err) {
		t.Fatalf("dhcp host file after clean-up: %v", err)
	}
	if err := s.CleanUpBoot("52:54:00:aa:bb:cc"); err != nil {
		t.Fatalf("a second clean-up: %v", err)
	}
	for _, bad := range []struct{ mac, cmdline string }{
		{"52:54:00:aa:bb", cmdline}, {"not-a-mac", cmdline},
		{"52:54:00:aa:bb:cc", "console=ttyS0\nboot evil"}, {"52:54:00:aa:bb:cc", strings.Repeat("x", maxCmdline+1)},
	} {
		if err := s.PrepareBoot(bad.mac, bad.cmdline); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("PrepareBoot(%q, %.20q): %v, want an input error", bad.mac, bad.cmdline, err)
		}
	}
}

func TestParseLeases(t *testing.T) {
	data := "1767225600 52:54:00:aa:bb:cc 10.88.0.123 corral-agent 01:52:54:00:aa:bb:cc\n" +
		"duid 00:01:00:01:2c:aa:bb:cc:dd:ee:ff:00\n" +
		"1767225600 garbage 10.88.0.5 * *\n"
	got := parseLeases([]byte(data))
	if len(got) != 1 || got[0].MAC != "52:54:00:aa:bb:cc" || got[0].IP.String() != "10.88.0.123" {
		t.Fatalf("leases: %+v", got)
	}
}
