package k8sprocess

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

func TestWorkerKindFromTheGroupThenTheCluster(t *testing.T) {
	g := &config.COENodeGroup{Labels: map[string]string{}}
	for _, tc := range []struct{ group, cluster, want string }{
		{"", "", WorkersKwok}, {"", "kubelet", WorkersKubelet}, {"kwok", "kubelet", WorkersKwok}, {"kubelet", "", WorkersKubelet},
	} {
		g.Labels[LabelWorkerKind] = tc.group
		if got, err := workerKind(driver.Params{Workers: tc.cluster}, g); err != nil || got != tc.want {
			t.Errorf("group %q cluster %q: %q %v, want %q", tc.group, tc.cluster, got, err, tc.want)
		}
	}
	g.Labels[LabelWorkerKind] = "vm"
	if _, err := workerKind(driver.Params{}, g); ecode.ClassOf(err) != ecode.Inval {
		t.Fatalf("worker_kind vm: %v", err)
	}
}

// TestKubeletsStayOnTheirNodesWithCertificatesOfTheirOwn: each kube node
// of a kubelet group is started on a Corral node chosen once, with a
// client certificate of its own name and a serving certificate of its
// node's address; removing one stops and purges it there only.
func TestKubeletsStayOnTheirNodesWithCertificatesOfTheirOwn(t *testing.T) {
	ctx := context.Background()
	d := testDriver(t)
	c := testCluster(1)
	e := &testEnv{nodes: []*config.Node{node("n1", "192.0.2.1"), node("n2", "192.0.2.2"), node("n3", "192.0.2.3")}}
	if err := d.CreateCluster(driver.Params{})[0].Run(ctx, e, c); err != nil {
		t.Fatal(err)
	}
	c.APIAddress = "https://192.0.2.1:7001"
	g := &config.COENodeGroup{Role: "worker", NodeCount: 3, Labels: map[string]string{LabelWorkerKind: WorkersKubelet},
		Nodes: []string{"c1-w-1", "c1-w-2", "c1-w-3"}}
	g.Name = "w"
	c.Groups = append(c.Groups, g)
	if err := d.startKubelets(ctx, e, c, g); err != nil {
		t.Fatal(err)
	}
	hosts, subnets := map[string]string{}, map[string]string{}
	for i, a := range e.args {
		args := a.(nodeapi.COEKubeletStartArgs)
		host := e.nodes[slices.IndexFunc(e.nodes, func(n *config.Node) bool { return n.Name+" "+nodeapi.COEKubeletStart == e.calls[i] })]
		hosts[args.Node] = host.Name
		// The pod subnet is corrald's, recorded with the host it is on.
		rec := c.PodSubnets[slices.IndexFunc(c.PodSubnets, func(ps config.COEPodSubnet) bool { return ps.Node == args.Node })]
		if args.PodSubnet == "" || rec.Subnet != args.PodSubnet || rec.Host != host.UUID {
			t.Fatalf("pod subnet of %s: %q, recorded %+v", args.Node, args.PodSubnet, rec)
		}
		subnets[args.Node] = args.PodSubnet
		if args.BindAddress != host.PrimaryIP || args.Server != c.APIAddress || args.Labels[LabelNodeGroup] != "w" {
			t.Fatalf("start args of %s on %s: %+v", args.Node, host.Name, args)
		}
		client, serving := parseCert(t, args.Client.Cert), parseCert(t, args.Serving.Cert)
		if client.Subject.CommonName != "system:node:"+args.Node || client.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
			t.Fatalf("client certificate of %s: %v", args.Node, client.Subject)
		}
		if err := serving.VerifyHostname(host.PrimaryIP); err != nil || serving.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth {
			t.Fatalf("serving certificate of %s: %v", args.Node, err)
		}
	}
	if len(hosts) != 3 || len(g.NodeAddresses) == 0 {
		t.Fatalf("hosts %v, addresses %v", hosts, g.NodeAddresses)
	}
	// Run again with the nodes listed in another order: each stays.
	slices.Reverse(e.nodes)
	e.calls, e.args = nil, nil
	if err := d.startKubelets(ctx, e, c, g); err != nil {
		t.Fatal(err)
	}
	for i, a := range e.args {
		args := a.(nodeapi.COEKubeletStartArgs)
		if want := hosts[args.Node] + " " + nodeapi.COEKubeletStart; e.calls[i] != want || args.PodSubnet != subnets[args.Node] {
			t.Fatalf("run again: %s with %s, want %s with %s", e.calls[i], args.PodSubnet, want, subnets[args.Node])
		}
	}
	if e.subnets != 3 {
		t.Fatalf("%d pod subnets handed out for 3 kube nodes", e.subnets)
	}
	e.calls, e.args = nil, nil
	if err := d.removeKubelet(ctx, e, c, "c1-w-2"); err != nil {
		t.Fatal(err)
	}
	stop, _ := e.args[0].(nodeapi.COEKubeletStopArgs)
	if len(e.calls) != 1 || e.calls[0] != hosts["c1-w-2"]+" "+nodeapi.COEKubeletStop || stop.Node != "c1-w-2" || !stop.Purge {
		t.Fatalf("remove: %v %+v", e.calls, e.args)
	}
	if _, placed := c.Placement[placeKubeletPrefix+"c1-w-2"]; placed {
		t.Fatal("the removed kube node keeps its placement")
	}
	if slices.ContainsFunc(c.PodSubnets, func(ps config.COEPodSubnet) bool { return ps.Node == "c1-w-2" }) || len(c.PodSubnets) != 2 {
		t.Fatalf("pod subnets after the removal: %+v", c.PodSubnets)
	}
	// A kwok node (never placed) asks no node for anything.
	e.calls = nil
	if err := d.removeKubelet(ctx, e, c, "c1-kwok-1"); err != nil || len(e.calls) != 0 {
		t.Fatalf("removing a kwok node: %v %v", err, e.calls)
	}
}

func parseCert(t *testing.T, p string) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode([]byte(p))
	if b == nil {
		t.Fatal("no PEM")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
