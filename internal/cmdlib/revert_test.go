package cmdlib

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
)

// dyingStore lets a set number of writes through once armed, then fails
// every write, as a master that dies at that point would leave the store.
type dyingStore struct {
	store.Store
	mu    sync.Mutex
	armed bool
	left  int
}

var errDied = errors.New("the master died")

func (d *dyingStore) arm(writes int) {
	d.mu.Lock()
	if !d.armed {
		d.armed, d.left = true, writes
	}
	d.mu.Unlock()
}

func (d *dyingStore) Txn(ctx context.Context, cmps []store.Cmp, then, els []store.Op) (store.TxnResult, error) {
	d.mu.Lock()
	if d.armed {
		if d.left == 0 {
			d.mu.Unlock()
			return store.TxnResult{}, errDied
		}
		d.left--
	}
	d.mu.Unlock()
	return d.Store.Txn(ctx, cmps, then, els)
}

// A create whose disk step fails reverts: the node removes the disk and
// the reservation goes from the configuration. The master dies during
// the revert, after the node removed the disk, with 0 or 1 more writes
// reaching the store. After the restart the job and the configuration
// must tell the same story: the op failed and the instance is gone, or
// the op resumed and created the instance, whose disks then exist.
// Committed apart from the job record, the revert's delete could land
// while the op stayed running; the resumed op then recreated the disks of
// an instance the configuration no longer had.
func TestCreateRevertCommitsWithOutcome(t *testing.T) {
	for _, writes := range []int{0, 1, 2} {
		path := filepath.Join(t.TempDir(), "s.db")
		bolt, err := boltstore.Open(path, boltstore.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		ds := &dyingStore{Store: bolt}
		node := newNodeDouble()
		node.fail = map[string]error{nodeapi.DiskCreate: errors.New("disk create failed on the node")}
		node.called = func(method string) {
			if method == nodeapi.DiskRemove {
				ds.arm(writes)
			}
		}
		e := openEnvOn(t, ds, path, node, true)
		raw, _ := json.Marshal(create("web1", map[string]any{"start": false}))
		id, err := e.q.Submit(context.Background(), []json.RawMessage{raw})
		if err != nil {
			t.Fatal(err)
		}
		// The job either fails (its outcome reached the store) or stalls
		// when the store dies under it.
		deadline := time.Now().Add(20 * time.Second)
		for node.count(nodeapi.DiskRemove) == 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if node.count(nodeapi.DiskRemove) == 0 {
			t.Fatalf("writes %d: the create never reverted: %v", writes, node.calls)
		}
		time.Sleep(200 * time.Millisecond) // let the writes that may happen happen
		e.close()

		node2 := newNodeDouble()
		e2 := openEnv(t, path, node2, false)
		status, res := e2.wait(t, id)
		_, present := e2.cfg.Instance("web1")
		created := node2.count(nodeapi.DiskCreate)
		removed := node2.count(nodeapi.DiskRemove)
		switch {
		case status == "error" && !present && created == removed:
		case status == "success" && present && created == 1:
		default:
			t.Errorf("%d writes after the node removed the disk: job %s %v, instance in the configuration %v, "+
				"disks created %d and removed %d after the restart", writes, status, fmtResult(res), present, created, removed)
		}
		e2.close()
	}
}

func fmtResult(res []any) string {
	b, _ := json.Marshal(res)
	return string(b)
}
