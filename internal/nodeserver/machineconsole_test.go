package nodeserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/baremetal/driver"
	"github.com/corral/corral/internal/bmc/bmctest"
	"github.com/corral/corral/internal/nodeapi"
)

// consoleClient runs the machine_console handler on one end of a pipe and
// returns the other end, as the rpc server hands the handler its
// connection.
func consoleClient(t *testing.T, s *Server, a nodeapi.MachineConsoleArgs) (net.Conn, chan error) {
	t.Helper()
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- s.machineConsole(context.Background(), raw, server)
		server.Close()
	}()
	t.Cleanup(func() { client.Close() })
	return client, done
}

func TestMachineConsoleRefusesWhatCannotStream(t *testing.T) {
	s, _ := newMachineServer(t, MachineMediaOptions{})
	for _, a := range []nodeapi.MachineConsoleArgs{
		{MachineBMC: fakeBMC("2f0c5e1e-6a59-4c45-9a51-d1c1c3a5a001"), ConsoleInterface: "no-console"},
		{MachineBMC: fakeBMC("2f0c5e1e-6a59-4c45-9a51-d1c1c3a5a001"), ConsoleInterface: consoleIPMIToolSOL},
		{MachineBMC: nodeapi.MachineBMC{Machine: "2f0c5e1e-6a59-4c45-9a51-d1c1c3a5a001", Driver: driver.DriverIPMI,
			DriverInfo: map[string]any{"ipmi_password": "-bad host"}}, ConsoleInterface: consoleIPMIToolSOL},
	} {
		client, done := consoleClient(t, s, a)
		said, _ := io.ReadAll(client)
		if err := <-done; err == nil {
			t.Errorf("%s/%s: the console opened", a.Driver, a.ConsoleInterface)
		}
		if !bytes.Contains(said, []byte("cannot be opened")) {
			t.Errorf("%s/%s: the client was not told why: %q", a.Driver, a.ConsoleInterface, said)
		}
		if bytes.Contains(said, []byte("-bad host")) {
			t.Errorf("the stream shows the password: %q", said)
		}
	}
}

// readUntil reads the console until want shows, failing after d.
func readUntil(t *testing.T, c net.Conn, seen *bytes.Buffer, want string, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for !strings.Contains(seen.String(), want) {
		n, err := c.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			t.Fatalf("%q did not come over the console: %v; it said:\n%s", want, err, seen.String())
		}
	}
}

// TestMachineConsoleOverSOLInQemu boots the tiny guest behind ipmi_sim
// with Serial-over-LAN and uses its shell through the machine_console
// handler: ipmitool sol activate <-> ipmi_sim <-> corral-bmc sol-bridge <->
// qemu's serial port.
func TestMachineConsoleOverSOLInQemu(t *testing.T) {
	m := bmctest.NewMachine(t, "sol1")
	bin := bmctest.CorralBMC(t)
	sim := bmctest.StartIPMISim(t, bin, m, bmctest.WithSOL())
	s, _ := newMachineServer(t, MachineMediaOptions{})
	b := nodeapi.MachineBMC{Machine: "7d1e2c4b-3f5a-4e6d-8c9b-0a1b2c3d4e5f", Driver: driver.DriverIPMI, DriverInfo: map[string]any{
		"ipmi_address": "127.0.0.1", "ipmi_port": strconv.Itoa(sim.Port), "ipmi_username": sim.User,
		"ipmi_password": sim.Password, "ipmi_cipher_suite": "3",
	}}
	a := nodeapi.MachineConsoleArgs{MachineBMC: b, ConsoleInterface: consoleIPMIToolSOL}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The console opens on the machine while it is off and shows its boot.
	client, done := consoleClient(t, s, a)
	var seen bytes.Buffer
	readUntil(t, client, &seen, "SOL Session operational", 30*time.Second)
	if _, err := s.machinePower(ctx, nodeapi.MachinePowerArgs{MachineBMC: b, Action: driver.PowerOn, Timeout: 30}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, client, &seen, "CORRAL-GUEST-BOOTED", 60*time.Second)
	readUntil(t, client, &seen, "# ", 30*time.Second)
	if _, err := client.Write([]byte("echo SOL-OK-$((6*7))\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, client, &seen, "SOL-OK-42", 30*time.Second)

	// The client goes: the handler ends and the BMC's session is freed,
	// so a second console opens at once and reaches the same shell.
	client.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("console handler: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the console handler did not end when its client left")
	}
	client2, done2 := consoleClient(t, s, a)
	var seen2 bytes.Buffer
	readUntil(t, client2, &seen2, "SOL Session operational", 30*time.Second)
	// ipmi_sim keeps the last sequence number it accepted across
	// sessions and takes a new session's packet with that number for a
	// resend, dropping it: type again until the shell answers, as a
	// person would.
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(seen2.String(), "AGAIN-42") {
		if time.Now().After(deadline) {
			t.Fatalf("the second console got no answer; it said:\n%s", seen2.String())
		}
		client2.Write([]byte("echo AGAIN-$((7*6))\r"))
		client2.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 4096)
		for {
			n, err := client2.Read(buf)
			seen2.Write(buf[:n])
			if err != nil || strings.Contains(seen2.String(), "AGAIN-42") {
				break
			}
		}
	}
	client2.Close()
	<-done2
}
