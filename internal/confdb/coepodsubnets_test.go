package confdb

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestCOEPodSubnetsNeverCollide has jobs of several clusters hand out and
// record pod subnets on one Corral node side by side: every subnet is
// different, the index refuses a second cluster committing a subnet the
// node already has, another node may have the same, a reload keeps them
// taken, and the node's own address is never inside one.
func TestCOEPodSubnetsNeverCollide(t *testing.T) {
	ctx := context.Background()
	db, _ := open(t)
	const clusters, workers = 8, 4
	hostA, hostB := config.NewUUID(), config.NewUUID()
	var ids []string
	tx := db.Begin()
	for i := range clusters {
		c := &config.COECluster{Meta: config.Meta{Name: fmt.Sprintf("k%d", i)}}
		tx.PutCOECluster(c)
		ids = append(ids, c.UUID)
	}
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	// The node's address is in the first subnet of the network.
	avoid := []netip.Addr{netip.MustParseAddr("10.244.0.7")}

	var wg sync.WaitGroup
	errs := make(chan error, clusters*workers)
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w := range workers {
				node := fmt.Sprintf("w%d", w)
				p, err := db.FreeCOEPodSubnet(hostA, id+"/"+node, avoid)
				if err != nil {
					errs <- err
					return
				}
				c, _ := db.COECluster(id)
				c.PodSubnets = append(c.PodSubnets, config.COEPodSubnet{Node: node, Host: hostA, Subnet: p.String()})
				tx := db.Begin()
				tx.PutCOECluster(c)
				if err := db.Commit(ctx, tx); err != nil {
					errs <- fmt.Errorf("cluster %s worker %s: %w", id, node, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, c := range db.COEClusters() {
		if len(c.PodSubnets) != workers {
			t.Fatalf("cluster %s has %d pod subnets, want %d", c.Name, len(c.PodSubnets), workers)
		}
		for _, ps := range c.PodSubnets {
			if other, dup := seen[ps.Subnet]; dup {
				t.Fatalf("%s is both %s's and %s/%s's", ps.Subnet, other, c.Name, ps.Node)
			}
			seen[ps.Subnet] = c.Name + "/" + ps.Node
			if p := netip.MustParsePrefix(ps.Subnet); p.Contains(avoid[0]) || !COEPodNetwork.Contains(p.Addr()) || p.Bits() != COEPodSubnetBits {
				t.Fatalf("pod subnet %s", ps.Subnet)
			}
		}
	}

	// A cluster committing a subnet the node has already is refused.
	c0, _ := db.COECluster(ids[0])
	c1, _ := db.COECluster(ids[1])
	c1.PodSubnets = append(c1.PodSubnets, config.COEPodSubnet{Node: "extra", Host: hostA, Subnet: c0.PodSubnets[0].Subnet})
	tx = db.Begin()
	tx.PutCOECluster(c1)
	if err := db.Commit(ctx, tx); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second cluster took %s on the same node: %v", c0.PodSubnets[0].Subnet, err)
	}
	// Another node may have it.
	c1, _ = db.COECluster(ids[1])
	c1.PodSubnets = append(c1.PodSubnets, config.COEPodSubnet{Node: "extra", Host: hostB, Subnet: c0.PodSubnets[0].Subnet})
	tx = db.Begin()
	tx.PutCOECluster(c1)
	if err := db.Commit(ctx, tx); err != nil {
		t.Fatalf("the same subnet on another node: %v", err)
	}
	// Asking again before the commit gives the same subnet.
	p1, err := db.FreeCOEPodSubnet(hostB, "k9/w0", nil)
	if err != nil {
		t.Fatal(err)
	}
	if p2, _ := db.FreeCOEPodSubnet(hostB, "k9/w0", nil); p2 != p1 {
		t.Fatalf("the same owner got %s, then %s", p1, p2)
	}

	// After a reload the taken subnets stay taken.
	re, err := Open(ctx, db.st, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := re.FreeCOEPodSubnet(hostA, "k9/w0", avoid)
	if err != nil {
		t.Fatal(err)
	}
	if owner, taken := seen[p.String()]; taken {
		t.Fatalf("after a reload %s was handed out again, though %s has it", p, owner)
	}
	// Removing a cluster frees its subnets on the node.
	tx = re.Begin()
	c0, _ = re.COECluster(ids[0])
	tx.DeleteCOECluster(c0)
	if err := re.Commit(ctx, tx); err != nil {
		t.Fatal(err)
	}
	c2, _ := re.COECluster(ids[2])
	c2.PodSubnets = append(c2.PodSubnets, config.COEPodSubnet{Node: "reuse", Host: hostA, Subnet: c0.PodSubnets[0].Subnet})
	tx = re.Begin()
	tx.PutCOECluster(c2)
	if err := re.Commit(ctx, tx); err != nil {
		t.Fatalf("a removed cluster's subnet is still taken: %v", err)
	}
}
