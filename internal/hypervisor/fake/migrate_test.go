package fake

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/pki"
)

func migrationTLS(t *testing.T, ca *pki.CA, name string) hypervisor.MigrationTLS {
	t.Helper()
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Issue(pki.IssueRequest{CommonName: name, Role: pki.RoleMigration, PublicKey: key.Public(), ValidFor: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return hypervisor.MigrationTLS{CAPEM: ca.CertPEM(), CertPEM: cert, KeyPEM: keyPEM}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func twoNodes(t *testing.T) (src, dst *Hypervisor, spec hypervisor.InstanceSpec) {
	capa := hypervisor.NodeResources{MemoryTotalMiB: 4096, MemoryFreeMiB: 4096, CPUs: 2}
	src, err := New(t.TempDir(), capa)
	if err != nil {
		t.Fatal(err)
	}
	dst, _ = New(t.TempDir(), capa)
	spec = hypervisor.InstanceSpec{Name: "inst1", UUID: "12345678-1234-1234-1234-123456789abc", MemoryMiB: 64, VCPUs: 1}
	if err := src.Start(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	in := spec
	in.Incoming = true
	if err := dst.Start(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return src, dst, spec
}

func waitMigration(t *testing.T, h *Hypervisor, name string) hypervisor.MigrationStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := h.MigrationStatus(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Finished() {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("migration did not finish")
	return hypervisor.MigrationStatus{}
}

func state(t *testing.T, h *Hypervisor, name string) hypervisor.State {
	ri, err := h.Info(context.Background(), name)
	if err != nil || ri == nil {
		t.Fatalf("info %s: %v, %v", name, ri, err)
	}
	return ri.State
}

func TestFakeMigrationBetweenTwoNodes(t *testing.T) {
	ctx := context.Background()
	ca, err := pki.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	src, dst, spec := twoNodes(t)
	port := freePort(t)
	if err := dst.AcceptMigration(ctx, spec.Name, hypervisor.MigrationIncoming{Address: "127.0.0.1", Port: port, TLS: migrationTLS(t, ca, "node2")}); err != nil {
		t.Fatal(err)
	}
	out := hypervisor.MigrationOutgoing{Address: "127.0.0.1", Port: port, TLSHostname: "node2", TLS: migrationTLS(t, ca, "node1"),
		Live: true, BandwidthMiB: 1024, DowntimeMS: 30}
	if err := src.StartMigration(ctx, spec.Name, out); err != nil {
		t.Fatal(err)
	}
	st := waitMigration(t, src, spec.Name)
	if st.Status != hypervisor.MigrationCompleted || st.DowntimeMS <= 0 || st.TransferredMiB != 64 {
		t.Fatalf("status %+v", st)
	}
	if err := dst.FinishMigration(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if s := state(t, dst, spec.Name); s != hypervisor.StateRunning {
		t.Fatalf("destination is %s", s)
	}
	if s := state(t, src, spec.Name); s != hypervisor.StatePaused {
		t.Fatalf("source is %s after the migration, want paused", s)
	}
	if err := src.CancelMigration(ctx, spec.Name); err == nil {
		t.Fatal("cancel after completion succeeded")
	}
}

// A source whose certificate is not from the cluster CA gets nowhere.
func TestFakeMigrationRefusesAForeignCertificate(t *testing.T) {
	ctx := context.Background()
	ca, _ := pki.NewCA("test", time.Hour)
	other, _ := pki.NewCA("other", time.Hour)
	src, dst, spec := twoNodes(t)
	port := freePort(t)
	if err := dst.AcceptMigration(ctx, spec.Name, hypervisor.MigrationIncoming{Address: "127.0.0.1", Port: port, TLS: migrationTLS(t, ca, "node2")}); err != nil {
		t.Fatal(err)
	}
	foreign := migrationTLS(t, other, "node1")
	foreign.CAPEM = ca.CertPEM()
	out := hypervisor.MigrationOutgoing{Address: "127.0.0.1", Port: port, TLSHostname: "node2", TLS: foreign, Live: true, BandwidthMiB: 1024}
	if err := src.StartMigration(ctx, spec.Name, out); err != nil {
		t.Fatal(err)
	}
	if st := waitMigration(t, src, spec.Name); st.Status != hypervisor.MigrationFailed {
		t.Fatalf("status %+v, want failed", st)
	}
	if s := state(t, src, spec.Name); s != hypervisor.StateRunning {
		t.Fatalf("source is %s", s)
	}
	if s := state(t, dst, spec.Name); s != hypervisor.StatePaused {
		t.Fatalf("destination is %s, want still waiting", s)
	}
}

func TestFakeMigrationCancelKeepsTheSourceRunning(t *testing.T) {
	ctx := context.Background()
	ca, _ := pki.NewCA("test", time.Hour)
	src, dst, spec := twoNodes(t)
	port := freePort(t)
	if err := dst.AcceptMigration(ctx, spec.Name, hypervisor.MigrationIncoming{Address: "127.0.0.1", Port: port, TLS: migrationTLS(t, ca, "node2")}); err != nil {
		t.Fatal(err)
	}
	// 64 MiB at 8 MiB/s: eight seconds, far longer than the cancel takes.
	out := hypervisor.MigrationOutgoing{Address: "127.0.0.1", Port: port, TLSHostname: "node2", TLS: migrationTLS(t, ca, "node1"),
		Live: false, BandwidthMiB: 8}
	if err := src.StartMigration(ctx, spec.Name, out); err != nil {
		t.Fatal(err)
	}
	if s := state(t, src, spec.Name); s != hypervisor.StatePaused {
		t.Fatalf("non-live source is %s during the copy, want paused", s)
	}
	if err := src.CancelMigration(ctx, spec.Name); err != nil {
		t.Fatal(err)
	}
	if st, _ := src.MigrationStatus(ctx, spec.Name); st.Status != hypervisor.MigrationCancelled {
		t.Fatalf("status %+v", st)
	}
	if s := state(t, src, spec.Name); s != hypervisor.StateRunning {
		t.Fatalf("source is %s after cancel", s)
	}
	if err := dst.FinishMigration(ctx, spec.Name); err == nil {
		t.Fatal("the destination finished without having received the instance")
	}
	if err := dst.Stop(ctx, spec.Name, 0, true); err != nil {
		t.Fatal(err)
	}
}
