package confdb

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

var updateFixtures = flag.Bool("update", false, "rewrite testdata/store-format.json from the current code")

// formatFixture is what testdata/store-format.json holds: the compares and
// operations of each transaction of a fixed history (sorted, as the order
// within a transaction does not matter to the store), and the keys and
// values the store holds at its end.
type formatFixture struct {
	Txns  []fixtureTxn      `json:"transactions"`
	Final map[string]string `json:"final"`
}

type fixtureTxn struct {
	What string   `json:"what"`
	Cmps []string `json:"cmps"`
	Ops  []string `json:"ops"`
}

func fixedClock() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// writeFormatHistory runs a fixed history on a new store: bootstrap, nodes
// and groups added, renamed and removed, instances created, renamed (also
// in case only), given new MACs and removed, and disk removals recorded and
// dropped. Every uuid is fixed, and so is the clock.
func writeFormatHistory(t *testing.T) (*DB, formatFixture) {
	t.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "f.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	saved := nowFunc
	nowFunc = fixedClock
	t.Cleanup(func() { nowFunc = saved })
	db, err := Bootstrap(ctx, st,
		&config.Cluster{Meta: config.Meta{UUID: "c0", Name: "c"}, ClusterName: "c.example.com", MACPrefix: "aa:00:00"},
		&config.NodeGroup{Meta: config.Meta{UUID: "g0", Name: "default"}, AllocPolicy: "preferred"},
		&config.Node{Meta: config.Meta{UUID: "n0", Name: "node1"}, PrimaryIP: "192.0.2.1", MasterCandidate: true})
	if err != nil {
		t.Fatal(err)
	}
	var fx formatFixture
	step := func(what string, f func(tx *Tx)) {
		t.Helper()
		tx := db.Begin()
		f(tx)
		var rec fixtureTxn
		rec.What = what
		for _, c := range tx.Cmps() {
			rec.Cmps = append(rec.Cmps, fmt.Sprintf("%s target=%d op=%d rev=%d", c.Key, c.Target, c.Op, c.Rev))
		}
		for _, o := range tx.Ops() {
			rec.Ops = append(rec.Ops, fmt.Sprintf("%d %s %s", o.Type, o.Key, o.Value))
		}
		slices.Sort(rec.Cmps)
		slices.Sort(rec.Ops)
		fx.Txns = append(fx.Txns, rec)
		if err := db.Commit(ctx, tx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	instance := func(uuid, name string, macs ...string) *config.Instance {
		i := &config.Instance{Meta: config.Meta{UUID: uuid, Name: name}, PrimaryNode: "n0", OS: "noop",
			Hypervisor: "fake", AdminState: config.AdminUp, DiskTemplate: config.DTFile,
			BEParams: config.Params{"maxmem": float64(256)},
			Disks:    []config.Disk{{UUID: uuid + "-d0", SizeMiB: 1024, Mode: "rw"}}}
		for k, m := range macs {
			i.NICs = append(i.NICs, config.NIC{UUID: fmt.Sprintf("%s-nic%d", uuid, k), MAC: m, Mode: "bridged", Link: "br0"})
		}
		return i
	}
	step("add group and nodes", func(tx *Tx) {
		tx.PutGroup(&config.NodeGroup{Meta: config.Meta{UUID: "g1", Name: "Rack2"}, AllocPolicy: "last_resort"})
		tx.PutNode(&config.Node{Meta: config.Meta{UUID: "n1", Name: "Node2"}, Group: "g1", VMCapable: true})
		tx.PutNode(&config.Node{Meta: config.Meta{UUID: "n2", Name: "node3"}, Group: "g0"})
	})
	step("add instances", func(tx *Tx) {
		tx.PutInstance(instance("i1", "web1", "AA:00:00:00:00:01", "aa:00:00:00:00:02"))
		tx.PutInstance(instance("i2", "db1", "aa:00:00:00:00:03"))
		tx.PutInstance(instance("i3", "cache1"))
	})
	step("rename an instance in case only, change a MAC", func(tx *Tx) {
		i, _ := db.Instance("web1")
		i.Name = "Web1"
		i.NICs[1].MAC = "aa:00:00:00:00:04"
		tx.PutInstance(i)
	})
	step("rename an instance and a node, cluster change", func(tx *Tx) {
		i, _ := db.Instance("db1")
		i.Name = "db2"
		tx.PutInstance(i)
		n, _ := db.Node("node3")
		n.Name = "node4"
		n.Offline = true
		tx.PutNode(n)
		c := db.Cluster()
		c.Epoch++
		tx.PutCluster(c)
	})
	step("rename a group", func(tx *Tx) {
		g, _ := db.Group("Rack2")
		g.Name = "rack2"
		tx.PutGroup(g)
	})
	step("record disk removals", func(tx *Tx) {
		tx.AddDiskRemoval(DiskRemoval{NodeUUID: "n1", InstanceUUID: "i3", InstanceName: "cache1", Template: "file", DiskUUID: "i3-d0", SizeMiB: 1024, Mode: "rw"})
		tx.AddDiskRemoval(DiskRemoval{NodeUUID: "n1", InstanceUUID: "i3", InstanceName: "cache1", Template: "file", DiskUUID: "i3-d1", Index: 1, SizeMiB: 8, Mode: "rw"})
	})
	step("remove an instance, a node and a disk removal", func(tx *Tx) {
		i, _ := db.Instance("cache1")
		tx.DeleteInstance(i)
		n, _ := db.Node("node4")
		tx.DeleteNode(n)
		tx.DropDiskRemoval(DiskRemoval{NodeUUID: "n1", DiskUUID: "i3-d1"})
	})
	step("remove an instance with NICs", func(tx *Tx) {
		i, _ := db.Instance("web1")
		tx.DeleteInstance(i)
	})
	step("add one in its name and MAC", func(tx *Tx) {
		tx.PutInstance(instance("i4", "WEB1", "aa:00:00:00:00:01"))
	})
	kvs, _, err := st.Range(ctx, Prefix, store.RangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fx.Final = map[string]string{}
	for _, kv := range kvs {
		fx.Final[kv.Key] = string(kv.Value)
	}
	return db, fx
}

// TestStoreFormatUnchanged holds the keys and values confdb writes to the
// ones in testdata/store-format.json, written by an earlier version: a
// store written before must read the same, and one written now must be
// readable by that version.
func TestStoreFormatUnchanged(t *testing.T) {
	_, got := writeFormatHistory(t)
	path := filepath.Join("testdata", "store-format.json")
	b, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *updateFixtures {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		var w formatFixture
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		for i := range max(len(w.Txns), len(got.Txns)) {
			if i >= len(w.Txns) || i >= len(got.Txns) || !slices.Equal(w.Txns[i].Cmps, got.Txns[i].Cmps) || !slices.Equal(w.Txns[i].Ops, got.Txns[i].Ops) {
				gb, _ := json.MarshalIndent(got.Txns[min(i, len(got.Txns)-1)], "", "  ")
				t.Errorf("transaction %d differs from the fixture; now:\n%s", i, gb)
			}
		}
		t.Fatalf("store contents differ from %s", path)
	}
}

// TestStoreFixtureLoads loads the fixture's final store contents, as an
// earlier version wrote them, into an empty store and reads them back.
func TestStoreFixtureLoads(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("testdata", "store-format.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx formatFixture
	if err := json.Unmarshal(raw, &fx); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "l.db"), boltstore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var ops []store.Op
	for k, v := range fx.Final {
		ops = append(ops, store.Put(k, []byte(v)))
	}
	if _, err := st.Txn(ctx, nil, ops, nil); err != nil {
		t.Fatal(err)
	}
	db, err := Open(ctx, st, nil)
	if err != nil {
		t.Fatalf("fixture does not load: %v", err)
	}
	if c := db.Cluster(); c.ClusterName != "c.example.com" || c.Epoch != 1 || c.Serial != 2 {
		t.Errorf("cluster %+v", c)
	}
	var names []string
	for _, n := range db.Nodes() {
		names = append(names, n.Name+"/"+n.Group)
	}
	if !slices.Equal(names, []string{"Node2/g1", "node1/g0"}) {
		t.Errorf("nodes %v", names)
	}
	if n, ok := db.Node("NODE2"); !ok || n.UUID != "n1" {
		t.Errorf("NODE2: %v %v", n, ok)
	}
	if _, ok := db.Node("node4"); ok {
		t.Error("removed node4 found")
	}
	if g, ok := db.Group("rack2"); !ok || g.UUID != "g1" || g.Serial != 2 {
		t.Errorf("rack2: %+v %v", g, ok)
	}
	if _, ok := db.Group("Rack2"); ok {
		t.Error("old group name Rack2 found")
	}
	names = nil
	for _, i := range db.Instances() {
		names = append(names, i.Name+"/"+i.UUID)
	}
	if !slices.Equal(names, []string{"WEB1/i4", "db2/i2"}) {
		t.Errorf("instances %v", names)
	}
	if i, ok := db.Instance("web1"); !ok || i.UUID != "i4" {
		t.Errorf("web1: %v %v", i, ok)
	}
	for mac, want := range map[string]bool{"aa:00:00:00:00:01": true, "AA:00:00:00:00:03": true, "aa:00:00:00:00:02": false, "aa:00:00:00:00:04": false} {
		if db.MACInUse(mac) != want {
			t.Errorf("MACInUse(%s) = %v", mac, !want)
		}
	}
	rs, err := db.DiskRemovals(ctx)
	if err != nil || len(rs) != 1 || rs[0].DiskUUID != "i3-d0" || rs[0].InstanceName != "cache1" {
		t.Errorf("disk removals %+v %v", rs, err)
	}
	// The loaded store takes writes that its indexes refuse or allow.
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("DB2", "aa:00:00:00:09:01")) }); err == nil {
		t.Error("DB2 taken next to db2")
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutInstance(inst("x", "aa:00:00:00:00:03")) }); err == nil {
		t.Error("a MAC in use taken again")
	}
	if err := commit(t, db, func(tx *Tx) { tx.PutNode(&config.Node{Meta: config.Meta{Name: "node4"}}) }); err != nil {
		t.Errorf("removed node's name not free: %v", err)
	}
}
