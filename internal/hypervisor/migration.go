package hypervisor

import (
	"context"
	"time"
)

// MigrationTLS is what one end of a migration proves itself with: a
// short-lived certificate from the cluster CA (role "migration") with its
// key, and the CA that the peer's certificate must chain to. The key is a
// secret: it is written only where the hypervisor process reads it, and
// removed once read.
type MigrationTLS struct {
	CAPEM   []byte
	CertPEM []byte
	KeyPEM  []byte
}

// MigrationIncoming prepares the destination, after the instance was started
// there with InstanceSpec.Incoming set.
type MigrationIncoming struct {
	// Address and Port are where the destination listens (the target node's
	// primary address and the migration_port hvparam).
	Address string
	Port    int
	TLS     MigrationTLS
	// Postcopy must be set on both ends when the source may switch to
	// post-copy.
	Postcopy bool
}

// MigrationOutgoing starts the migration on the source.
type MigrationOutgoing struct {
	Address string
	Port    int
	// TLSHostname is the name the destination's certificate must carry.
	TLSHostname string
	TLS         MigrationTLS
	// Live keeps the guest running while memory is copied; otherwise it is
	// paused first (Ganeti's non-live mode).
	Live         bool
	BandwidthMiB int // MiB/s
	DowntimeMS   int // the longest pause qemu may plan for the final copy
	Postcopy     bool
}

// Migration states, qemu's MigrationStatus names where they exist.
const (
	MigrationNone      = "none"
	MigrationSetup     = "setup"
	MigrationActive    = "active"
	MigrationPostcopy  = "postcopy-active"
	MigrationCompleted = "completed"
	MigrationFailed    = "failed"
	MigrationCancelled = "cancelled"
)

// MigrationStatus is the source's view of a migration.
type MigrationStatus struct {
	Status string `json:"status"`
	// TotalMS is the time since the migration started (or its whole
	// duration once completed); DowntimeMS the measured pause of the guest,
	// known once completed.
	TotalMS        int64  `json:"total_ms"`
	DowntimeMS     int64  `json:"downtime_ms"`
	TransferredMiB int64  `json:"transferred_mib"`
	RemainingMiB   int64  `json:"remaining_mib"`
	TotalMiB       int64  `json:"total_mib"`
	DirtySyncs     int64  `json:"dirty_syncs"` // memory passes done
	Error          string `json:"error,omitempty"`
}

// Finished reports whether the migration has ended, well or not.
func (s MigrationStatus) Finished() bool {
	switch s.Status {
	case MigrationCompleted, MigrationFailed, MigrationCancelled:
		return true
	}
	return false
}

// Migrator is implemented by hypervisors that move running instances between
// nodes. The source keeps running until the destination has everything;
// every call is safe to repeat, and the migration's state lives in the
// hypervisor (qemu), not in the caller, so a caller that crashed can ask
// again.
type Migrator interface {
	// AcceptMigration makes the destination (started with Incoming) listen
	// for the source.
	AcceptMigration(ctx context.Context, name string, in MigrationIncoming) error
	// StartMigration starts sending the instance; it returns once the
	// transfer runs.
	StartMigration(ctx context.Context, name string, out MigrationOutgoing) error
	// MigrationStatus reports the source's progress.
	MigrationStatus(ctx context.Context, name string) (MigrationStatus, error)
	// StartPostcopy switches a running migration to post-copy.
	StartPostcopy(ctx context.Context, name string) error
	// CancelMigration stops a running migration; the source keeps (or
	// resumes) running.
	CancelMigration(ctx context.Context, name string) error
	// FinishMigration runs the destination once the transfer completed.
	FinishMigration(ctx context.Context, name string) error
}

// MigrationPollInterval is how often callers ask for a migration's status.
const MigrationPollInterval = 200 * time.Millisecond
