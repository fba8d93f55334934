package nodeserver

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/corral/corral/internal/baremetal/agentapi"
	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/baremetal/provnet"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
)

// recordedNets stands for the provisioning networks (which need root and
// a namespace; the e2e test runs the real ones): it records the calls and
// dials every connection to dialTo.
type recordedNets struct {
	cfg    *provnet.Config
	dialTo string

	mu       sync.Mutex
	boots    map[string]string // MAC -> command line
	cleaned  []string
	attached []string // "port>network"
	dialled  []string
	failMAC  string
}

func newRecordedNets(t *testing.T) *recordedNets {
	t.Helper()
	cfg, err := provnet.ParseConfig([]byte(`{"netns": "corral-unit", "api_target": "127.0.0.1:6385", "api_port": 6390, "networks": [
	  {"name": "provisioning", "address": "10.231.0.1/24", "ipv6": "fd00:231::1/64", "boot": true},
	  {"name": "rescue", "address": "10.232.0.1/24", "boot": true},
	  {"name": "tenant", "address": "10.233.0.1/24"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return &recordedNets{cfg: cfg, boots: map[string]string{}}
}

func (r *recordedNets) Config() *provnet.Config         { return r.cfg }
func (r *recordedNets) Start(ctx context.Context) error { return nil }
func (r *recordedNets) Close() error                    { return nil }

func (r *recordedNets) PrepareBoot(mac, cmdline string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if mac == r.failMAC {
		return ecode.Errorf(ecode.Inval, "MAC address %q is not six hex pairs", mac)
	}
	r.boots[mac] = cmdline
	return nil
}

func (r *recordedNets) CleanUpBoot(mac string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.boots, mac)
	r.cleaned = append(r.cleaned, mac)
	return nil
}

func (r *recordedNets) Attach(ctx context.Context, portID, network string) error {
	if _, err := r.cfg.Network(network); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attached = append(r.attached, portID+">"+network)
	return nil
}

func (r *recordedNets) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	r.mu.Lock()
	r.dialled = append(r.dialled, addr)
	r.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, r.dialTo)
}

func newNetsServer(t *testing.T) (*Server, *recordedNets) {
	t.Helper()
	s, _ := newMachineServer(t, MachineMediaOptions{})
	nets := newRecordedNets(t)
	s.nets = nets
	return s, nets
}

const testPin = "3f2a0c9d8b7e6f5a4c3b2a1908f7e6d5c4b3a29180f7e6d5c4b3a2918070f6e5"

func TestPXEBootPrepareAndCleanUp(t *testing.T) {
	s, nets := newNetsServer(t)
	ctx := context.Background()
	m := fakeBMC("6c1d2e3f-pxe-prepare")
	ports := []nodeapi.MachinePortRef{{MAC: "52:54:00:aa:00:01", PortID: "bmt-p1"}, {MAC: "52:54:00:aa:00:02"}}
	for _, iface := range []string{"ipxe", "pxe"} {
		d, _ := driver.New(m.Driver, m.DriverInfo, driver.WithMachine(m.Machine))
		d.SetBootDevice(ctx, driver.BootDisk, true)
		_, err := s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{MachineBMC: m, BootInterface: iface,
			APIURL: "https://api.example:6385/", APICASHA256: testPin, KernelParams: "console=ttyS0 quiet",
			Ports: ports, Network: "rescue"})
		if err != nil {
			t.Fatalf("%s: %v", iface, err)
		}
		want := "ipa-api-url=https://10.232.0.1:6390 corral.api-ca-sha256=" + testPin + " console=ttyS0 quiet"
		for _, p := range ports {
			if got := nets.boots[p.MAC]; got != want {
				t.Fatalf("%s: command line of %s: %q, want %q", iface, p.MAC, got, want)
			}
		}
		if dev, _ := d.BootDevice(ctx); dev != driver.BootPXE {
			t.Fatalf("%s: boot device after prepare: %q", iface, dev)
		}
		if _, err := s.machineBootCleanUp(ctx, nodeapi.MachineBootCleanUpArgs{MachineBMC: m, BootInterface: iface, Ports: ports}); err != nil {
			t.Fatalf("%s clean up: %v", iface, err)
		}
		if len(nets.boots) != 0 || len(nets.cleaned) < 2 {
			t.Fatalf("%s: after clean up, prepared %v, cleaned %v", iface, nets.boots, nets.cleaned)
		}
		if dev, _ := d.BootDevice(ctx); dev != driver.BootDisk {
			t.Fatalf("%s: boot device after clean up: %q", iface, dev)
		}
	}
	// The scheme follows the conductor's URL; no pin without https.
	if _, err := s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{MachineBMC: m, BootInterface: "ipxe",
		APIURL: "http://api.example:6385", Ports: ports[:1], Network: "provisioning"}); err != nil {
		t.Fatal(err)
	}
	if got := nets.boots[ports[0].MAC]; got != "ipa-api-url=http://10.231.0.1:6390" {
		t.Fatalf("http command line %q", got)
	}
	prep := func(a nodeapi.MachineBootPrepareArgs) error {
		a.MachineBMC, a.BootInterface = m, "ipxe"
		_, err := s.machineBootPrepare(ctx, a)
		return err
	}
	wantClass(t, "an unknown network", prep(nodeapi.MachineBootPrepareArgs{APIURL: "http://a:1", Ports: ports, Network: "storage"}), ecode.Inval)
	wantClass(t, "a network that boots nothing", prep(nodeapi.MachineBootPrepareArgs{APIURL: "http://a:1", Ports: ports, Network: "tenant"}), ecode.Inval)
	wantClass(t, "no network", prep(nodeapi.MachineBootPrepareArgs{APIURL: "http://a:1", Ports: ports}), ecode.Inval)
	wantClass(t, "no ports", prep(nodeapi.MachineBootPrepareArgs{APIURL: "http://a:1", Network: "provisioning"}), ecode.Inval)
	wantClass(t, "an ftp API", prep(nodeapi.MachineBootPrepareArgs{APIURL: "ftp://a:1", Ports: ports, Network: "provisioning"}), ecode.Inval)
	wantClass(t, "a pin over http", prep(nodeapi.MachineBootPrepareArgs{APIURL: "http://a:1", APICASHA256: testPin, Ports: ports, Network: "provisioning"}), ecode.Inval)
	nets.failMAC = "nonsense"
	wantClass(t, "a bad MAC", prep(nodeapi.MachineBootPrepareArgs{APIURL: "http://a:1", Ports: []nodeapi.MachinePortRef{{MAC: "nonsense"}}, Network: "provisioning"}), ecode.Inval)
}

func TestPXEBootNeedsTheNetworks(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{})
	ctx := context.Background()
	m := fakeBMC("2f3e4d5c-pxe-nonets")
	ports := []nodeapi.MachinePortRef{{MAC: "52:54:00:aa:00:01", PortID: "bmt-p1"}}
	for _, iface := range []string{"pxe", "ipxe"} {
		_, err := s.machineBootPrepare(ctx, nodeapi.MachineBootPrepareArgs{MachineBMC: m, BootInterface: iface,
			APIURL: "http://10.0.0.1:6385", Ports: ports, Network: "provisioning"})
		wantClass(t, iface+" without networks", err, ecode.Environ)
		if !strings.Contains(err.Error(), "--baremetal-networks") {
			t.Fatalf("the error does not say what to do: %v", err)
		}
		_, err = s.machineBootCleanUp(ctx, nodeapi.MachineBootCleanUpArgs{MachineBMC: m, BootInterface: iface, Ports: ports})
		wantClass(t, iface+" clean up without networks", err, ecode.Environ)
	}
	_, err := s.machineNetwork(ctx, nodeapi.MachineNetworkArgs{Machine: m.Machine, Ports: ports, Network: "rescue"})
	wantClass(t, "a network move without networks", err, ecode.Environ)
	// Ports wired to no node need no networks.
	if _, err := s.machineNetwork(ctx, nodeapi.MachineNetworkArgs{Machine: m.Machine,
		Ports: []nodeapi.MachinePortRef{{MAC: "52:54:00:aa:00:01"}}, Network: "rescue"}); err != nil {
		t.Fatalf("unwired ports: %v", err)
	}
}

func TestMachineNetworkMovesWiredPorts(t *testing.T) {
	s, nets := newNetsServer(t)
	ctx := context.Background()
	ports := []nodeapi.MachinePortRef{{MAC: "52:54:00:aa:00:01", PortID: "bmt-p1"}, {MAC: "52:54:00:aa:00:02"},
		{MAC: "52:54:00:aa:00:03", PortID: "bmt-p3"}}
	for _, network := range []string{"rescue", "tenant"} {
		if _, err := s.machineNetwork(ctx, nodeapi.MachineNetworkArgs{Machine: "7a8b-net", Ports: ports, Network: network}); err != nil {
			t.Fatal(err)
		}
	}
	want := "bmt-p1>rescue bmt-p3>rescue bmt-p1>tenant bmt-p3>tenant"
	if got := strings.Join(nets.attached, " "); got != want {
		t.Fatalf("attached %q, want %q", got, want)
	}
	_, err := s.machineNetwork(ctx, nodeapi.MachineNetworkArgs{Machine: "7a8b-net", Ports: ports, Network: "storage"})
	wantClass(t, "an unknown network", err, ecode.Inval)
	_, err = s.machineNetwork(ctx, nodeapi.MachineNetworkArgs{Machine: "../x", Ports: ports, Network: "tenant"})
	wantClass(t, "a bad machine id", err, ecode.Inval)
	if len(nets.attached) != 4 {
		t.Fatalf("a refused move moved ports: %v", nets.attached)
	}
}

// TestAgentCommandDialsIntoTheNetworks: a callback URL in one of the
// provisioning networks is reached through their dialer (inside the
// namespace); any other directly.
func TestAgentCommandDialsIntoTheNetworks(t *testing.T) {
	s, nets := newNetsServer(t)
	ctx := context.Background()
	const token = "tok-9e8d7c6b5a4f"
	calls := 0
	agent := fakeAgent(t, token, func(req agentapi.CommandRequest) (int, any) {
		calls++
		return 200, map[string]any{"id": fmt.Sprint(calls), "command_status": "SUCCEEDED"}
	})
	nets.dialTo = agent.Listener.Addr().String()
	args := nodeapi.MachineAgentCommandArgs{Machine: "1c2d-agent-dial", Token: token, Name: agentapi.CmdFinalizeRescue, Wait: true}
	for _, cb := range []string{"http://10.232.0.150:9999", "http://[fd00:231::7]:9999"} {
		args.URL = cb
		if _, err := s.machineAgentCommand(ctx, args); err != nil {
			t.Fatalf("%s: %v", cb, err)
		}
	}
	args.URL = agent.URL // 127.0.0.1: the host's network
	if _, err := s.machineAgentCommand(ctx, args); err != nil {
		t.Fatal(err)
	}
	if want := "10.232.0.150:9999 [fd00:231::7]:9999"; strings.Join(nets.dialled, " ") != want || calls != 3 {
		t.Fatalf("dialled through the networks %v (%d calls), want %s", nets.dialled, calls, want)
	}
}

func TestMachineNetsNeedTheRamdisk(t *testing.T) {
	cfg := newRecordedNets(t).cfg
	_, err := openMachineNets(t.TempDir(), "", "", cfg, nil)
	wantClass(t, "booting networks without a ramdisk", err, ecode.Environ)
	if !strings.Contains(err.Error(), "--agent-ramdisk") {
		t.Fatalf("the error does not say what to do: %v", err)
	}
	if n, err := openMachineNets(t.TempDir(), "", "", nil, nil); n != nil || err != nil {
		t.Fatalf("no configuration: %v %v", n, err)
	}
}
