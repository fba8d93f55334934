package kvm

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/corral/corral/internal/hypervisor"
)

func TestParseMigrationInfo(t *testing.T) {
	raw := []byte(`{"status":"completed","total-time":2150,"downtime":23,"ram":{"transferred":270532608,"remaining":0,"total":285212672,"dirty-sync-count":4}}`)
	st, err := parseMigrationInfo(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := hypervisor.MigrationStatus{Status: "completed", TotalMS: 2150, DowntimeMS: 23, TransferredMiB: 258, TotalMiB: 272, DirtySyncs: 4}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}
	for in, want := range map[string]string{`{}`: hypervisor.MigrationNone, `{"status":"cancelling"}`: hypervisor.MigrationActive,
		`{"status":"postcopy-paused"}`: hypervisor.MigrationPostcopy, `{"status":"failed","error-desc":"x"}`: hypervisor.MigrationFailed} {
		st, err := parseMigrationInfo([]byte(in))
		if err != nil || st.Status != want {
			t.Errorf("%s: %+v, %v; want %s", in, st, err, want)
		}
	}
	if _, err := parseMigrationInfo([]byte(`[`)); err == nil {
		t.Error("bad JSON accepted")
	}
}

func TestIncomingCommandWaitsForQMP(t *testing.T) {
	spec := hypervisor.InstanceSpec{Name: "i", UUID: "12345678-1234-1234-1234-123456789abc", MemoryMiB: 128, VCPUs: 1, Incoming: true}
	rt := Runtime{Binary: "qemu", QMPSocket: "/r/q", PIDFile: "/r/p", SerialSocket: "/r/s", SerialLog: "/r/l"}
	argv, err := BuildCommand(spec, rt)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(argv, "-incoming")
	if i < 0 || argv[i+1] != "defer" {
		t.Fatalf("argv %v lacks -incoming defer", argv)
	}
	spec.Incoming = false
	argv, _ = BuildCommand(spec, rt)
	if slices.Contains(argv, "-incoming") {
		t.Fatalf("argv %v of a normal start has -incoming", argv)
	}
}

func TestMigrationTLSFilesAreOwnedAndPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tls")
	tls := hypervisor.MigrationTLS{CAPEM: []byte("ca"), CertPEM: []byte("cert"), KeyPEM: []byte("key")}
	if err := writeTLSDir(dir, "client", tls, 4243); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ca-cert.pem", "client-cert.pem", "client-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o400 {
			t.Errorf("%s has mode %v", f, st.Mode())
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && sys.Uid != 4243 {
			t.Errorf("%s belongs to uid %d, want qemu's 4243", f, sys.Uid)
		}
	}
}
