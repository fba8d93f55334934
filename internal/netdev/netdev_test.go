package netdev

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestTapName(t *testing.T) {
	const uuid = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
	tests := []struct {
		node, uuid string
		idx        int
	}{
		{"node1", uuid, 0},
		{"node1", strings.ToUpper(uuid), 7},
		{"node1", uuid, 999},
		{"node2.example.com", uuid, 3},
	}
	for _, tc := range tests {
		got := TapName(tc.node, tc.uuid, tc.idx)
		if want := fmt.Sprintf("n%d", tc.idx); !strings.HasPrefix(got, "crl6f1c2") || !strings.HasSuffix(got, want) || len(got) != 11+len(want) {
			t.Errorf("TapName(%s, %s, %d) = %s, want crl6f1c2 + 3 hex + %s", tc.node, tc.uuid, tc.idx, got, want)
		}
		if len(got) > 15 || strings.ContainsAny(got, "/: ") {
			t.Errorf("TapName(%s, %s, %d) = %s is not a valid interface name", tc.node, tc.uuid, tc.idx, got)
		}
		if again := TapName(tc.node, strings.ToLower(tc.uuid), tc.idx); again != got {
			t.Errorf("TapName is not stable: %s then %s", got, again)
		}
	}
	// Two node daemons on one host never share an instance's tap name.
	if a, b := TapName("node1", uuid, 0), TapName("node2", uuid, 0); a == b {
		t.Errorf("node1 and node2 both name the tap %s", a)
	}
}

func TestCreateTapValidates(t *testing.T) {
	// A missing ip binary: any check that got as far as running it would
	// fail with another class than Inval.
	l := Links{IPBinary: "/nonexistent/ip"}
	ctx := context.Background()
	tests := []struct {
		name, tap, owner, mode, link, ip string
	}{
		{"empty name", "", "", ModeBridged, "br0", ""},
		{"long name", "crl0123456789abc", "", ModeBridged, "br0", ""},
		{"slash", "tap/0", "", ModeBridged, "br0", ""},
		{"option-like", "-tap0", "", ModeBridged, "br0", ""},
		{"bad mode", "tap0", "", "openvswitch", "br0", ""},
		{"bridged without bridge", "tap0", "", ModeBridged, "", ""},
		{"bad bridge", "tap0", "", ModeBridged, "br 0", ""},
		{"routed bad ip", "tap0", "", ModeRouted, "", "10.0.0.300"},
		{"routed ip with zone", "tap0", "", ModeRouted, "", "fe80::1%eth0"},
		{"bad owner", "tap0", "Root;", ModeRouted, "", ""},
		{"owner uid -1", "tap0", "4294967295", ModeRouted, "", ""},
		{"owner uid too big", "tap0", "4294967296", ModeRouted, "", ""},
		{"owner signed uid", "tap0", "+2000", ModeRouted, "", ""},
	}
	for _, tc := range tests {
		err := l.CreateTap(ctx, tc.tap, tc.owner, tc.mode, tc.link, tc.ip)
		if ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: got %v, want an Inval error", tc.name, err)
		}
	}
	if err := CreateTap("bad/name", "", ModeRouted, "", ""); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("package CreateTap with a bad name: %v", err)
	}
	if err := DeleteTap("bad/name"); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("package DeleteTap with a bad name: %v", err)
	}
	if err := l.DeleteTap(ctx, "bad/name"); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("DeleteTap with a bad name: %v", err)
	}
	// A valid request reaches ip, which is missing here.
	if err := l.CreateTap(ctx, "tap0", "", ModeRouted, "", ""); err == nil || ecode.ClassOf(err) == ecode.Inval {
		t.Errorf("valid request: %v", err)
	}
}

const sampleLinks = `[
 {"ifindex":1,"ifname":"lo","flags":["LOOPBACK","UP","LOWER_UP"],"link_type":"loopback"},
 {"ifindex":2,"ifname":"br0","flags":["BROADCAST","MULTICAST","UP"],"linkinfo":{"info_kind":"bridge","info_data":{"stp_state":0}}},
 {"ifindex":3,"ifname":"crl6f1c2a3bn0","flags":["NO-CARRIER","BROADCAST","MULTICAST","UP"],"master":"br0",
  "linkinfo":{"info_kind":"tun","info_data":{"type":"tap","pi":false,"vnet_hdr":false,"multi_queue":false,"persist":true,"user":"corral-qemu"},"info_slave_kind":"bridge"}},
 {"ifindex":4,"ifname":"tun0","flags":["POINTOPOINT"],"linkinfo":{"info_kind":"tun","info_data":{"type":"tun","persist":true}}},
 {"ifindex":5,"ifname":"crl0a1b2c3dn0","flags":["BROADCAST","MULTICAST"],"linkinfo":{"info_kind":"tun","info_data":{"type":"tap","persist":true,"user":2001}}}
]`

func TestParseLinks(t *testing.T) {
	links, err := parseLinks([]byte(sampleLinks))
	if err != nil {
		t.Fatal(err)
	}
	want := []Link{
		{Name: "lo", Up: true},
		{Name: "br0", Kind: "bridge", Up: true},
		{Name: "crl6f1c2a3bn0", Kind: "tun", TapType: "tap", Owner: "corral-qemu", Master: "br0", Up: true},
		{Name: "tun0", Kind: "tun", TapType: "tun"},
		{Name: "crl0a1b2c3dn0", Kind: "tun", TapType: "tap", Owner: "2001"},
	}
	if len(links) != len(want) {
		t.Fatalf("got %d links: %+v", len(links), links)
	}
	for i := range want {
		if links[i] != want[i] {
			t.Errorf("link %d = %+v, want %+v", i, links[i], want[i])
		}
	}
	for _, bad := range []string{"", "{}", `[{"flags":["UP"]}]`, `[{"ifname":1}]`,
		`[{"ifname":"t","linkinfo":{"info_kind":"tun","info_data":{"user":-1}}}]`,
		`[{"ifname":"t","linkinfo":{"info_kind":"tun","info_data":{"user":[]}}}]`} {
		if _, err := parseLinks([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzParseLinks(f *testing.F) {
	f.Add([]byte(sampleLinks))
	f.Add([]byte(`[]`))
	f.Add([]byte(`[{"ifname":"x","linkinfo":{"info_kind":"tun"}}]`))
	f.Add([]byte(`[{"ifname":"x","linkinfo":null,"flags":null}]`))
	f.Add([]byte(`[{"ifname":"x","linkinfo":{"info_kind":"tun","info_data":{"type":"tap","user":2000}}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		links, err := parseLinks(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		for _, l := range links {
			if l.Name == "" {
				t.Fatalf("link without a name from %q", data)
			}
			if l.Kind != "tun" && (l.TapType != "" || l.Owner != "") {
				t.Fatalf("tap fields on a %q link", l.Kind)
			}
		}
	})
}

func TestOwners(t *testing.T) {
	for _, tc := range []struct {
		s     string
		valid bool
	}{
		{"0", true}, {"2000", true}, {"4294967294", true}, {"", false}, {"4294967295", false},
		{"99999999999", false}, {"-1", false}, {"20a", false}, {" 20", false},
	} {
		if got := validUID(tc.s); got != tc.valid {
			t.Errorf("validUID(%q) = %v", tc.s, got)
		}
	}
	// root is uid 0 on every system the tests run on.
	for _, tc := range []struct {
		cur, want string
		same      bool
	}{
		{"", "", true},
		{"2000", "2000", true},
		{"root", "0", true},
		{"0", "root", true},
		{"2000", "2001", false},
		{"root", "1", false},
		{"", "0", false},
		{"0", "", false},
		{"crl-no-such-user", "0", false},
	} {
		if got := sameOwner(tc.cur, tc.want); got != tc.same {
			t.Errorf("sameOwner(%q, %q) = %v", tc.cur, tc.want, got)
		}
	}
}

// netns makes a fresh network namespace for the test, or skips when this
// process may not.
func netns(t *testing.T) Links {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces and taps")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("iproute2's ip is not installed")
	}
	name := fmt.Sprintf("crltest%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return Links{Netns: name}
}

func routes(t *testing.T, l Links, table string) string {
	t.Helper()
	out, err := exec.Command("ip", "-n", l.Netns, "route", "show", "table", table).CombinedOutput()
	if err != nil {
		t.Fatalf("ip route show: %v: %s", err, out)
	}
	return string(out)
}

func TestTapsInNetns(t *testing.T) {
	l := netns(t)
	ctx := context.Background()
	if out, err := exec.Command("ip", "-n", l.Netns, "link", "add", "br0", "type", "bridge").CombinedOutput(); err != nil {
		t.Fatalf("create bridge: %v: %s", err, out)
	}

	// Bridged.
	tap := TapName("node1", "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b", 0)
	if err := l.CreateTap(ctx, tap, "nobody", ModeBridged, "br0", ""); err != nil {
		t.Fatal(err)
	}
	got, err := l.Link(ctx, tap)
	if err != nil || got == nil {
		t.Fatalf("Link(%s) = %v, %v", tap, got, err)
	}
	want := Link{Name: tap, Kind: "tun", TapType: "tap", Owner: "nobody", Master: "br0", Up: true}
	if *got != want {
		t.Fatalf("tap = %+v, want %+v", *got, want)
	}
	if err := l.CreateTap(ctx, tap, "nobody", ModeBridged, "br0", ""); err != nil {
		t.Fatalf("repeated CreateTap: %v", err)
	}
	if err := l.CreateTap(ctx, tap, "", ModeBridged, "br0", ""); ecode.ClassOf(err) != ecode.Exists {
		t.Fatalf("CreateTap with another owner: %v", err)
	}
	if err := l.CreateTap(ctx, "br0", "", ModeRouted, "", ""); ecode.ClassOf(err) != ecode.Exists {
		t.Fatalf("CreateTap over a bridge: %v", err)
	}

	// A missing bridge is refused before anything is created.
	if err := l.CreateTap(ctx, "crltestn1", "", ModeBridged, "nobr0", ""); ecode.ClassOf(err) != ecode.Environ {
		t.Fatalf("CreateTap on a missing bridge: %v", err)
	}
	if k, _ := l.Link(ctx, "crltestn1"); k != nil {
		t.Fatalf("tap left behind: %+v", k)
	}

	// Routed, main table and a numbered table.
	if err := l.CreateTap(ctx, "crltestn2", "", ModeRouted, "", "10.99.1.2"); err != nil {
		t.Fatal(err)
	}
	if r := routes(t, l, "main"); !strings.Contains(r, "10.99.1.2 dev crltestn2") {
		t.Fatalf("main table lacks the host route:\n%s", r)
	}
	if err := l.CreateTap(ctx, "crltestn3", "", ModeRouted, "100", "10.99.1.3"); err != nil {
		t.Fatal(err)
	}
	if r := routes(t, l, "100"); !strings.Contains(r, "10.99.1.3 dev crltestn3") {
		t.Fatalf("table 100 lacks the host route:\n%s", r)
	}
	if k, _ := l.Link(ctx, "crltestn2"); k == nil || k.Master != "" || !k.Up {
		t.Fatalf("routed tap = %+v", k)
	}

	// Deletion: idempotent, and never of a non-tap.
	for _, name := range []string{tap, "crltestn2", "crltestn3"} {
		if err := l.DeleteTap(ctx, name); err != nil {
			t.Fatal(err)
		}
		if k, _ := l.Link(ctx, name); k != nil {
			t.Fatalf("%s still exists", name)
		}
		if err := l.DeleteTap(ctx, name); err != nil {
			t.Fatalf("second DeleteTap(%s): %v", name, err)
		}
	}
	if r := routes(t, l, "main"); strings.Contains(r, "10.99.1.2") {
		t.Fatalf("route survived its tap:\n%s", r)
	}
	// Numeric owners: a uid without a name reads back as that number, one
	// with a name as the name, and either form matches a retried create.
	const unnamed = "3999999"
	if _, err := user.LookupId(unnamed); err == nil {
		t.Fatalf("uid %s has a name here; pick another for the test", unnamed)
	}
	if err := l.CreateTap(ctx, "crltestn4", unnamed, ModeRouted, "", ""); err != nil {
		t.Fatal(err)
	}
	if k, _ := l.Link(ctx, "crltestn4"); k == nil || k.Owner != unnamed {
		t.Fatalf("tap owned by an unnamed uid = %+v", k)
	}
	if err := l.CreateTap(ctx, "crltestn4", unnamed, ModeRouted, "", ""); err != nil {
		t.Fatalf("repeated CreateTap with a numeric owner: %v", err)
	}
	if err := l.CreateTap(ctx, "crltestn4", "4000000", ModeRouted, "", ""); ecode.ClassOf(err) != ecode.Exists {
		t.Fatalf("CreateTap with another numeric owner: %v", err)
	}
	if err := l.CreateTap(ctx, "crltestn5", "0", ModeRouted, "", ""); err != nil {
		t.Fatal(err)
	}
	if k, _ := l.Link(ctx, "crltestn5"); k == nil || k.Owner != "root" {
		t.Fatalf("tap owned by uid 0 = %+v", k)
	}
	if err := l.CreateTap(ctx, "crltestn5", "root", ModeRouted, "", ""); err != nil {
		t.Fatalf("CreateTap by name over the same uid: %v", err)
	}
	for _, name := range []string{"crltestn4", "crltestn5"} {
		if err := l.DeleteTap(ctx, name); err != nil {
			t.Fatal(err)
		}
	}

	if err := l.DeleteTap(ctx, "br0"); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("DeleteTap of a bridge: %v", err)
	}
	if k, _ := l.Link(ctx, "br0"); k == nil {
		t.Fatal("the bridge was deleted")
	}
}
