package confdb

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// benchStore is a store holding a cluster of 50 nodes in 5 groups and
// 2,000 instances with two NICs each, written directly (as confdb would).
func benchStore(b *testing.B) store.Store {
	b.Helper()
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(b.TempDir(), "b.db"), boltstore.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	db, err := Bootstrap(ctx, st, &config.Cluster{Meta: config.Meta{Name: "c"}, ClusterName: "c"},
		&config.NodeGroup{Meta: config.Meta{Name: "default"}}, &config.Node{Meta: config.Meta{Name: "node0"}})
	if err != nil {
		b.Fatal(err)
	}
	tx := db.Begin()
	for g := 1; g < 5; g++ {
		tx.PutGroup(&config.NodeGroup{Meta: config.Meta{Name: fmt.Sprintf("rack%d", g)}})
	}
	for n := 1; n < 50; n++ {
		tx.PutNode(&config.Node{Meta: config.Meta{Name: fmt.Sprintf("node%d", n)}})
	}
	if err := db.Commit(ctx, tx); err != nil {
		b.Fatal(err)
	}
	for k := 0; k < 2000; k += 20 {
		tx := db.Begin()
		for i := k; i < k+20; i++ {
			in := &config.Instance{Meta: config.Meta{Name: fmt.Sprintf("Inst%04d.example.com", i)}, OS: "noop",
				BEParams: config.Params{"maxmem": float64(512)},
				Disks:    []config.Disk{{UUID: config.NewUUID(), SizeMiB: 1024, Mode: "rw"}},
				NICs: []config.NIC{{MAC: fmt.Sprintf("aa:00:00:00:%02x:%02x", i>>8, i&0xff), Mode: "bridged"},
					{MAC: fmt.Sprintf("aa:00:01:00:%02x:%02x", i>>8, i&0xff), Mode: "bridged"}}}
			tx.PutInstance(in)
		}
		if err := db.Commit(ctx, tx); err != nil {
			b.Fatal(err)
		}
	}
	return st
}

// BenchmarkOpen is a master's configuration load at start.
func BenchmarkOpen(b *testing.B) {
	st := benchStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := Open(ctx, st, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookup finds instances and nodes by name in another case and
// by uuid, and checks a MAC: what every opcode's prerequisites do.
func BenchmarkLookup(b *testing.B) {
	db, err := Open(context.Background(), benchStore(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	u, _ := db.Instance("inst1000.example.com")
	b.ReportAllocs()
	b.ResetTimer()
	for k := range b.N {
		if _, ok := db.Instance(fmt.Sprintf("inst%04d.example.com", k%2000)); !ok {
			b.Fatal("instance not found")
		}
		if _, ok := db.Instance(u.UUID); !ok {
			b.Fatal("instance not found by uuid")
		}
		if _, ok := db.Node("NODE7"); !ok {
			b.Fatal("node not found")
		}
		if !db.MACInUse("aa:00:00:00:01:00") {
			b.Fatal("MAC not in use")
		}
	}
}

// BenchmarkPutInstance builds and applies one instance change.
func BenchmarkPutInstance(b *testing.B) {
	db, err := Open(context.Background(), benchStore(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for k := range b.N {
		i, _ := db.Instance(fmt.Sprintf("inst%04d.example.com", k%2000))
		tx := db.Begin()
		tx.PutInstance(i)
		db.Apply(tx, int64(k+1000000))
	}
}
