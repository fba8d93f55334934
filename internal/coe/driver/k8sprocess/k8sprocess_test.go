package k8sprocess

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/secret"
)

var errParked = errors.New("parked")

// testEnv records the node calls and parks.
type testEnv struct {
	nodes  []*config.Node
	calls  []string
	args   []any
	ports  nodeapi.COEControlPlanePorts
	parked time.Time
	// subnets counts the pod subnets handed out.
	subnets int
}

func (e *testEnv) Nodes() []*config.Node { return e.nodes }

func (e *testEnv) RPC(ctx context.Context, n *config.Node, method string, args, reply any) error {
	e.calls = append(e.calls, n.Name+" "+method)
	e.args = append(e.args, args)
	if method == nodeapi.COEControlPlaneReserve {
		b, _ := json.Marshal(e.ports)
		return json.Unmarshal(b, reply)
	}
	return nil
}

func (e *testEnv) Logf(ctx context.Context, format string, args ...any) {}

// PodSubnet hands out the next /24 of 10.244.0.0/16, as corrald would
// on an empty node.
func (e *testEnv) PodSubnet(host *config.Node, owner string) (netip.Prefix, error) {
	e.subnets++
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(e.subnets), 0}), 24), nil
}

func (e *testEnv) Park(ctx context.Context, until time.Time) error {
	e.parked = until
	return errParked
}

func node(name, ip string) *config.Node {
	n := &config.Node{PrimaryIP: ip, VMCapable: true}
	n.Name, n.UUID = name, "uuid-"+name
	return n
}

func testCluster(masters int) *driver.Cluster {
	c := &config.COECluster{CreateTimeout: 1, Labels: map[string]string{}}
	c.Name, c.UUID = "c1", "5f0e3c1e-1111-4222-8333-444455556666"
	mg := &config.COENodeGroup{Role: config.COERoleMaster, IsDefault: true, NodeCount: masters}
	mg.Name = "default-master"
	return &driver.Cluster{COECluster: c, Template: &config.COETemplate{}, Groups: []*config.COENodeGroup{mg}}
}

func testDriver(t *testing.T) *Driver {
	keys, err := certs.NewSealer(secret.Secret("a sealing key of the test, long enough"))
	if err != nil {
		t.Fatal(err)
	}
	return New(keys)
}

// TestCreateStepsPlaceOnceAndSealTheCA: the CA's key is stored sealed
// and opens again; the control plane goes to an undrained node, which
// keeps it when run again whatever the other nodes do; api_address is the
// node's IP and the port it reserved.
func TestCreateStepsPlaceOnceAndSealTheCA(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	steps := d.CreateCluster(driver.Params{})
	e := &testEnv{nodes: []*config.Node{node("n1", "192.0.2.1"), node("n2", "192.0.2.2")},
		ports: nodeapi.COEControlPlanePorts{APIServer: 7001, EtcdClient: 7002, EtcdPeer: 7003}}
	e.nodes[0].Drained = true
	c := testCluster(1)
	if err := steps[0].Run(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	if c.CA == nil || c.CA.Generation != 1 || len(c.CA.KeySealed) == 0 || strings.Contains(string(c.CA.KeySealed), "PRIVATE KEY") {
		t.Fatalf("CA %+v", c.CA)
	}
	ca, err := LoadCA(d.keys, c.CA)
	if err != nil || string(ca.CertPEM()) != c.CA.CertPEM {
		t.Fatalf("the sealed CA key does not open: %v", err)
	}
	first := c.CA.CertPEM
	if err := steps[0].Run(ctx, e, c); err != nil || c.CA.CertPEM != first {
		t.Fatalf("the CA step run again changed the CA: %v", err)
	}
	if err := steps[1].Run(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	if c.APIAddress != "https://192.0.2.2:7001" || c.Placement[placeNode] != "uuid-n2" || c.MasterAddresses[0] != "192.0.2.2" {
		t.Fatalf("placed %q %v", c.APIAddress, c.Placement)
	}
	// Run again with n1 undrained: the cluster stays where it is.
	e.nodes[0].Drained = false
	if err := steps[1].Run(ctx, e, c); err != nil || c.Placement[placeNode] != "uuid-n2" {
		t.Fatalf("placed again: %v %v", c.Placement, err)
	}
	if strings.Join(e.calls, ",") != "n2 coe_controlplane_reserve,n2 coe_controlplane_reserve" {
		t.Fatalf("calls %v", e.calls)
	}
	// The placed node offline: the step says so.
	e.nodes = e.nodes[:1]
	if err := steps[1].Run(ctx, e, c); ecode.ClassOf(err) != ecode.Environ || !strings.Contains(err.Error(), "n2") {
		t.Fatalf("placed node gone: %v", err)
	}
	if err := steps[1].Run(ctx, &testEnv{nodes: []*config.Node{node("n3", "192.0.2.3")}}, testCluster(2)); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("two masters: %v", err)
	}
	if err := steps[1].Run(ctx, &testEnv{nodes: []*config.Node{e.nodes[0]}}, func() *driver.Cluster {
		e.nodes[0].Drained = true
		return testCluster(1)
	}()); ecode.ClassOf(err) != ecode.NoRes {
		t.Fatalf("no node: %v", err)
	}
}

// TestWaitForTheAPIParksThenFails: while the API server does not answer,
// the step parks until the next poll, at most until the deadline; past
// create_timeout it fails saying where and why.
func TestWaitForTheAPIParksThenFails(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	now := time.Unix(1_800_000_000, 0)
	d.Now = func() time.Time { return now }
	c := testCluster(1)
	e := &testEnv{}
	if err := d.newCA(c); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing answers there
	c.APIAddress = "https://127.0.0.1:" + strconv.Itoa(port)
	c.SetPlace(placeStartedAt, now.Unix())
	if err := d.waitAPI(ctx, e, c); !errors.Is(err, errParked) || !e.parked.Equal(now.Add(2*time.Second)) {
		t.Fatalf("first poll: %v, parked until %v", err, e.parked)
	}
	now = now.Add(time.Minute - time.Second)
	if err := d.waitAPI(ctx, e, c); !errors.Is(err, errParked) || !e.parked.Equal(time.Unix(1_800_000_000, 0).Add(time.Minute)) {
		t.Fatalf("last poll: %v, parked until %v (want the deadline)", err, e.parked)
	}
	now = now.Add(time.Second)
	err = d.waitAPI(ctx, e, c)
	if err == nil || errors.Is(err, errParked) || !strings.Contains(err.Error(), "create_timeout") || !strings.Contains(err.Error(), c.APIAddress) {
		t.Fatalf("past the deadline: %v", err)
	}
}

// TestRotateMakesTheNextCA: a rotation's CA replaces the stored one (same
// identity, next generation) with another key.
func TestRotateMakesTheNextCA(t *testing.T) {
	d := testDriver(t)
	c := testCluster(1)
	if err := d.newCA(c); err != nil {
		t.Fatal(err)
	}
	c.CA.UUID, c.CA.Serial = "ca-uuid", 7
	old := *c.CA
	if err := d.RotateCA(driver.Params{})[0].Run(context.Background(), &testEnv{}, c); err != nil {
		t.Fatal(err)
	}
	if c.CA.Generation != 2 || c.CA.UUID != "ca-uuid" || c.CA.Serial != 7 || c.CA.CertPEM == old.CertPEM || string(c.CA.KeySealed) == string(old.KeySealed) {
		t.Fatalf("rotated CA %+v", c.CA)
	}
}
