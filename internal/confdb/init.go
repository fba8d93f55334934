package confdb

import (
	"context"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/store"
)

// Bootstrap writes a new cluster (with its default group and master node) to
// an empty store. It refuses when a cluster already exists.
func Bootstrap(ctx context.Context, st store.Store, c *config.Cluster, g *config.NodeGroup, master *config.Node) (*DB, error) {
	db := &DB{st: st}
	db.now = nowFunc
	db.reset()
	tx := db.Begin()
	tx.PutGroup(g)
	master.Group = g.UUID
	tx.PutNode(master)
	c.MasterNode = master.UUID
	c.Touch(db.now())
	tx.cmp(store.Missing(keyCluster))
	tx.put(keyCluster, c)
	tx.cluster = c
	res, err := st.Txn(ctx, tx.Cmps(), tx.Ops(), nil)
	if err != nil {
		return nil, err
	}
	if !res.Succeeded {
		return nil, ecode.Errorf(ecode.Exists, "a cluster is already initialised in this store")
	}
	db.Apply(tx, res.Revision)
	return db, nil
}
