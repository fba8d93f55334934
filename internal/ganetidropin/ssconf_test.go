package ganetidropin

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/config"
)

func testSnapshot() Snapshot {
	c := &config.Cluster{
		Meta:               config.Meta{UUID: "c-uuid", Tags: []string{"b", "a"}},
		ClusterName:        "cluster1.example.com",
		MasterNode:         "n1-uuid",
		EnabledHypervisors: []string{"kvm", "fake"},
		HVParams: map[string]config.Params{
			"fake": {"migration_mode": "live", "zeta": float64(3), "acpi": true, "cpus": []any{"1", "2"}, "off": false},
		},
		NDParams:       config.Params{"ssh_port": float64(2222)},
		FileStorageDir: "/srv/ganeti/file-storage",
		UIDPool:        [][2]uint32{{2000, 2099}, {3000, 3000}},
	}
	g1 := &config.NodeGroup{Meta: config.Meta{UUID: "g1-uuid", Name: "default"}}
	g2 := &config.NodeGroup{Meta: config.Meta{UUID: "g2-uuid", Name: "rack10"}, NDParams: config.Params{"ssh_port": float64(22)}}
	g3 := &config.NodeGroup{Meta: config.Meta{UUID: "g3-uuid", Name: "rack9"}}
	nodes := []*config.Node{
		{Meta: config.Meta{UUID: "n10-uuid", Name: "node10"}, PrimaryIP: "192.0.2.10", SecondaryIP: "198.51.100.10", Group: "g2-uuid", VMCapable: true},
		{Meta: config.Meta{UUID: "n1-uuid", Name: "node1"}, PrimaryIP: "192.0.2.1", SecondaryIP: "192.0.2.1", Group: "g1-uuid", VMCapable: true, MasterCandidate: true},
		{Meta: config.Meta{UUID: "n2-uuid", Name: "node2"}, PrimaryIP: "192.0.2.2", SecondaryIP: "192.0.2.2", Group: "g1-uuid", MasterCandidate: true, Offline: true, NDParams: config.Params{"ssh_port": float64(24)}},
	}
	insts := []*config.Instance{{Meta: config.Meta{Name: "web10"}}, {Meta: config.Meta{Name: "web2"}}, {Meta: config.Meta{Name: "db1"}}}
	nets := []*config.Network{{Meta: config.Meta{UUID: "net2-uuid", Name: "lan"}}, {Meta: config.Meta{UUID: "net1-uuid", Name: "dmz"}}}
	return Snapshot{Cluster: c, Nodes: nodes, Groups: []*config.NodeGroup{g2, g3, g1}, Instances: insts, Networks: nets, MasterIP: "192.0.2.1", Release: "1.2.3"}
}

// The values follow src/Ganeti/WConfd/Ssconf.hs (mkSSConf) and the file
// format of lib/ssconf.py (WriteFiles).
func TestValues(t *testing.T) {
	v := Values(testSnapshot())
	want := map[string]string{
		"cluster_name":            "cluster1.example.com\n",
		"cluster_tags":            "a\nb\n",
		"file_storage_dir":        "/srv/ganeti/file-storage\n",
		"shared_file_storage_dir": "",
		"master_node":             "node1\n",
		"master_ip":               "192.0.2.1\n",
		"master_netmask":          "32\n",
		"master_candidates":       "node1\nnode2\n",
		"master_candidates_ips":   "192.0.2.1\n192.0.2.2\n",
		"master_candidates_certs": "",
		"node_list":               "node1\nnode2\nnode10\n",
		"node_primary_ips":        "node1 192.0.2.1\nnode2 192.0.2.2\nnode10 192.0.2.10\n",
		"node_secondary_ips":      "node1 192.0.2.1\nnode2 192.0.2.2\nnode10 198.51.100.10\n",
		"node_vm_capable":         "node1=True\nnode2=False\nnode10=True\n",
		"offline_nodes":           "node2\n",
		"online_nodes":            "node1\nnode10\n",
		"instance_list":           "db1\nweb2\nweb10\n",
		"hypervisor_list":         "kvm\nfake\n",
		"uid_pool":                "2000-2099\n3000\n",
		"nodegroups":              "g1-uuid default\ng3-uuid rack9\ng2-uuid rack10\n",
		"networks":                "net1-uuid dmz\nnet2-uuid lan\n",
		"ssh_ports":               "node1=2222\nnode2=24\nnode10=22\n",
		"primary_ip_family":       "2\n",
		"release_version":         "1.2.3\n",
		"maintain_node_health":    "False\n",
		"enabled_user_shutdown":   "False\n",
		"hvparams_fake":           "acpi=True\ncpus=[\"1\",\"2\"]\nmigration_mode=live\noff=False\nzeta=3\n",
		"hvparams_kvm":            "",
		"hvparams_xen-pvm":        "",
	}
	for k, w := range want {
		if got, ok := v[k]; !ok || got != w {
			t.Errorf("%s = %q, want %q", k, got, w)
		}
	}
	// Every key Ganeti defines is written, and no other.
	var keys []string
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, Keys()) {
		t.Errorf("keys %v, want %v", keys, Keys())
	}
	if len(Keys()) != 34 {
		t.Errorf("%d keys; Ganeti 3.0 defines 34", len(Keys()))
	}
}

func TestValuesWithoutMaster(t *testing.T) {
	s := testSnapshot()
	s.Cluster.MasterNode = "gone"
	if got := Values(s)["master_node"]; got != "NO MASTER\n" {
		t.Fatalf("master_node = %q, want Ganeti's NO MASTER", got)
	}
}

func TestNiceCompare(t *testing.T) {
	in := []string{"node10", "node2", "a", "node1", "node01a", "node1b", "b10c2", "b10c10", "b9", "", "10", "9x"}
	slices.SortFunc(in, NiceCompare)
	want := []string{"", "9x", "10", "a", "b9", "b10c2", "b10c10", "node1", "node01a", "node1b", "node2", "node10"}
	if !slices.Equal(in, want) {
		t.Fatalf("sorted %q, want %q", in, want)
	}
}

func FuzzNiceCompare(f *testing.F) {
	for _, s := range []string{"node1", "node10", "a0b", "", "007", "x"} {
		f.Add(s, "node2")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ab, ba := NiceCompare(a, b), NiceCompare(b, a)
		if (ab < 0) != (ba > 0) || (ab == 0) != (ba == 0) {
			t.Fatalf("not antisymmetric: %q vs %q: %d, %d", a, b, ab, ba)
		}
		if NiceCompare(a, a) != 0 {
			t.Fatalf("%q differs from itself", a)
		}
	})
}

func TestSsconfWriter(t *testing.T) {
	l := Layout{Root: t.TempDir()}
	if err := Prepare(l, -1, -1); err != nil {
		t.Fatal(err)
	}
	w := NewSsconfWriter(l)
	vals := Values(testSnapshot())
	if err := w.Write(vals); err != nil {
		t.Fatal(err)
	}
	for k, v := range vals {
		fi, err := os.Stat(l.SsconfPath(k))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != SsconfFileMode {
			t.Errorf("%s: mode %v, want %v", k, fi.Mode().Perm(), os.FileMode(SsconfFileMode))
		}
		if b, _ := os.ReadFile(l.SsconfPath(k)); string(b) != v {
			t.Errorf("%s holds %q, want %q", k, b, v)
		}
	}
	// A change rewrites only the files whose content changed.
	before := inode(t, l.SsconfPath("cluster_name"))
	vals["instance_list"] = "web1\n"
	if err := w.Write(vals); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(l.SsconfPath("instance_list")); string(b) != "web1\n" {
		t.Fatalf("instance_list not rewritten: %q", b)
	}
	if inode(t, l.SsconfPath("cluster_name")) != before {
		t.Error("an unchanged file was rewritten")
	}
	// A new writer (a restarted master) rewrites a file changed behind its
	// back, and leaves equal ones alone.
	if err := os.Chmod(l.SsconfPath("master_node"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.SsconfPath("master_node"), []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewSsconfWriter(l).Write(vals); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(l.SsconfPath("master_node")); string(b) != "node1\n" {
		t.Fatalf("master_node = %q after a restart", b)
	}
	if inode(t, l.SsconfPath("cluster_name")) != before {
		t.Error("a restarted writer rewrote an unchanged file")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(l.DataDir())
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), SsconfPrefix) {
			t.Errorf("stray file %s", e.Name())
		}
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return statIno(fi)
}

func TestPrepare(t *testing.T) {
	l := Layout{Root: filepath.Join(t.TempDir(), "node1")}
	if err := Prepare(l, -1, -1); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{l.DataDir(), 0o755 | os.ModeSetgid}, {l.SocketDir(), 0o750 | os.ModeSetgid}, {l.RunDir(), 0o755}} {
		fi, err := os.Stat(d.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode() & (os.ModePerm | os.ModeSetgid); got != d.mode {
			t.Errorf("%s: mode %v, want %v", d.path, got, d.mode)
		}
	}
	// Never over a real Ganeti cluster.
	if err := os.WriteFile(filepath.Join(l.DataDir(), ConfigFileName), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Prepare(l, -1, -1); err == nil || !strings.Contains(err.Error(), "a Ganeti cluster is configured") {
		t.Fatalf("Prepare over a Ganeti cluster: %v", err)
	}
}

func TestCleanRoot(t *testing.T) {
	for in, want := range map[string]string{"": "", "/": "", "/tmp/x/node1/": "/tmp/x/node1", "/a//b/../c": "/a/c"} {
		if got, err := CleanRoot(in); err != nil || got != want {
			t.Errorf("CleanRoot(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := CleanRoot("relative/node1"); err == nil {
		t.Error("a relative root was accepted")
	}
	if got := (Layout{}).QuerySocket(); got != "/var/run/ganeti/socket/ganeti-query" {
		t.Errorf("default query socket %s", got)
	}
	if got := (Layout{Root: "/r/node1"}).SsconfPath("master_node"); got != "/r/node1/var/lib/ganeti/ssconf_master_node" {
		t.Errorf("ssconf path %s", got)
	}
}
