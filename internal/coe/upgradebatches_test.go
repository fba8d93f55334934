package coe

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/corral/corral/internal/config"
)

// TestUpgradeBatchesKeepEtcdsMajority: masters without kube nodes go by
// address, at most a minority at once whatever max_batch_size says;
// worker groups go max_batch_size nodes at a time.
func TestUpgradeBatchesKeepEtcdsMajority(t *testing.T) {
	masters := func(n int) *config.COENodeGroup {
		g := &config.COENodeGroup{Role: config.COERoleMaster}
		for i := 0; i < n; i++ {
			g.NodeAddresses = append(g.NodeAddresses, "192.0.2."+strconv.Itoa(i+1))
		}
		return g
	}
	for _, c := range []struct {
		g     *config.COENodeGroup
		batch int
		want  string
	}{
		{masters(1), 3, "[[192.0.2.1]]"},
		{masters(3), 3, "[[192.0.2.1] [192.0.2.2] [192.0.2.3]]"},
		{masters(5), 5, "[[192.0.2.1 192.0.2.2] [192.0.2.3 192.0.2.4] [192.0.2.5]]"},
		{masters(5), 1, "[[192.0.2.1] [192.0.2.2] [192.0.2.3] [192.0.2.4] [192.0.2.5]]"},
		{&config.COENodeGroup{Role: config.COERoleWorker, Nodes: []string{"a", "b", "c"}}, 2, "[[a b] [c]]"},
		{&config.COENodeGroup{Role: config.COERoleMaster, Nodes: []string{"m1", "m2"}, NodeAddresses: []string{"x", "y"}}, 2, "[[m1 m2]]"},
	} {
		if got := fmt.Sprint(upgradeBatches(c.g, c.batch)); got != c.want {
			t.Errorf("%s of %d/%d, batch %d: %s, want %s", c.g.Role, len(c.g.Nodes), len(c.g.NodeAddresses), c.batch, got, c.want)
		}
	}
}
