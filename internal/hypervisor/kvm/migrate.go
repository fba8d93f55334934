package kvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

// Live migration through QMP. The destination qemu is started with
// "-incoming defer" (InstanceSpec.Incoming), then told where to listen; the
// source is told where to send. Both ends authenticate with qemu's TLS
// migration (tls-creds-x509): certificates from the cluster CA, never plain
// TCP. qemu keeps the migration's state, so every call here only asks or
// tells qemu and can be repeated after a crash of the caller.

var _ hypervisor.Migrator = (*Hypervisor)(nil)

// migrationTLSID is the QOM id of the TLS credentials object.
const migrationTLSID = "corral-migration-tls"

// dirMigrationTLS holds the TLS files while qemu reads them.
const dirMigrationTLS = "migration-tls"

// AcceptMigration makes the destination listen for the source.
func (h *Hypervisor) AcceptMigration(ctx context.Context, name string, in hypervisor.MigrationIncoming) error {
	rec, _, err := h.running(name)
	if err != nil {
		return err
	}
	sock := rec.path(fileQMP)
	st, err := queryStatus(ctx, sock)
	if err != nil {
		return ecode.ExecErrorf("migration of %s: %w", name, err)
	}
	if st.Status != "inmigrate" {
		return ecode.Errorf(ecode.State, "instance %s is not waiting for a migration (state %s)", name, st.Status)
	}
	if mig, err := h.MigrationStatus(ctx, name); err == nil && mig.Status != hypervisor.MigrationNone {
		return nil // already listening (a repeated call)
	}
	if err := h.loadMigrationTLS(ctx, rec, "server", in.TLS); err != nil {
		return err
	}
	if err := setMigrationCaps(ctx, sock, in.Postcopy); err != nil {
		return err
	}
	if _, err := qmpDo(ctx, sock, "migrate-set-parameters", map[string]any{"tls-creds": migrationTLSID}); err != nil {
		return ecode.ExecErrorf("migration of %s: tls parameters: %w", name, err)
	}
	uri := "tcp:" + net.JoinHostPort(in.Address, strconv.Itoa(in.Port))
	if _, err := qmpDo(ctx, sock, "migrate-incoming", map[string]any{"uri": uri}); err != nil {
		return ecode.ExecErrorf("migration of %s: listening on %s: %w", name, uri, err)
	}
	h.log.Info("waiting for migration", "instance", name, "uri", uri)
	return nil
}

// StartMigration starts sending the instance to the destination.
func (h *Hypervisor) StartMigration(ctx context.Context, name string, out hypervisor.MigrationOutgoing) error {
	rec, _, err := h.running(name)
	if err != nil {
		return err
	}
	sock := rec.path(fileQMP)
	if mig, err := h.MigrationStatus(ctx, name); err != nil {
		return err
	} else if !mig.Finished() && mig.Status != hypervisor.MigrationNone {
		return nil // already under way
	} else if mig.Status == hypervisor.MigrationCompleted {
		return ecode.Errorf(ecode.State, "instance %s has already been migrated away", name)
	}
	if err := h.loadMigrationTLS(ctx, rec, "client", out.TLS); err != nil {
		return err
	}
	if err := setMigrationCaps(ctx, sock, out.Postcopy); err != nil {
		return err
	}
	params := map[string]any{
		"tls-creds":      migrationTLSID,
		"tls-hostname":   out.TLSHostname,
		"max-bandwidth":  int64(out.BandwidthMiB) << 20,
		"downtime-limit": out.DowntimeMS,
	}
	if _, err := qmpDo(ctx, sock, "migrate-set-parameters", params); err != nil {
		return ecode.ExecErrorf("migration of %s: parameters: %w", name, err)
	}
	if !out.Live {
		if _, err := qmpDo(ctx, sock, "stop", nil); err != nil {
			return ecode.ExecErrorf("migration of %s: pausing the guest: %w", name, err)
		}
	}
	uri := "tcp:" + net.JoinHostPort(out.Address, strconv.Itoa(out.Port))
	if _, err := qmpDo(ctx, sock, "migrate", map[string]any{"uri": uri}); err != nil {
		if !out.Live {
			_, _ = qmpDo(ctx, sock, "cont", nil)
		}
		return ecode.ExecErrorf("migration of %s to %s: %w", name, uri, err)
	}
	h.log.Info("migration started", "instance", name, "uri", uri, "live", out.Live)
	return nil
}

// qmpMigrationInfo is the part of query-migrate's reply Corral uses.
type qmpMigrationInfo struct {
	Status    string `json:"status"`
	TotalTime int64  `json:"total-time"`
	Downtime  int64  `json:"downtime"`
	ErrorDesc string `json:"error-desc"`
	RAM       *struct {
		Transferred    int64 `json:"transferred"`
		Remaining      int64 `json:"remaining"`
		Total          int64 `json:"total"`
		DirtySyncCount int64 `json:"dirty-sync-count"`
	} `json:"ram"`
}

// parseMigrationInfo turns query-migrate's reply into a MigrationStatus.
func parseMigrationInfo(raw json.RawMessage) (hypervisor.MigrationStatus, error) {
	var mi qmpMigrationInfo
	if err := json.Unmarshal(raw, &mi); err != nil {
		return hypervisor.MigrationStatus{}, fmt.Errorf("kvm: query-migrate: %w", err)
	}
	st := hypervisor.MigrationStatus{Status: mi.Status, TotalMS: mi.TotalTime, DowntimeMS: mi.Downtime, Error: mi.ErrorDesc}
	switch mi.Status {
	case "":
		st.Status = hypervisor.MigrationNone
	case "cancelling", "pre-switchover", "device", "wait-unplug":
		st.Status = hypervisor.MigrationActive
	case "postcopy-paused", "postcopy-recover":
		st.Status = hypervisor.MigrationPostcopy
	}
	if mi.RAM != nil {
		st.TransferredMiB = mi.RAM.Transferred >> 20
		st.RemainingMiB = mi.RAM.Remaining >> 20
		st.TotalMiB = mi.RAM.Total >> 20
		st.DirtySyncs = mi.RAM.DirtySyncCount
	}
	return st, nil
}

// MigrationStatus asks qemu how the migration goes.
func (h *Hypervisor) MigrationStatus(ctx context.Context, name string) (hypervisor.MigrationStatus, error) {
	rec, _, err := h.running(name)
	if err != nil {
		return hypervisor.MigrationStatus{}, err
	}
	raw, err := qmpDo(ctx, rec.path(fileQMP), "query-migrate", nil)
	if err != nil {
		return hypervisor.MigrationStatus{}, ecode.ExecErrorf("migration status of %s: %w", name, err)
	}
	st, err := parseMigrationInfo(raw)
	if err != nil || st.Status != hypervisor.MigrationCompleted {
		return st, err
	}
	// qemu also reports "completed" for the migration that brought the
	// instance here. Only a sent-away guest stays in "postmigrate".
	run, err := queryStatus(ctx, rec.path(fileQMP))
	if err != nil {
		return hypervisor.MigrationStatus{}, ecode.ExecErrorf("migration status of %s: %w", name, err)
	}
	if run.Status != "postmigrate" {
		return hypervisor.MigrationStatus{Status: hypervisor.MigrationNone}, nil
	}
	return st, nil
}

// StartPostcopy switches to post-copy: the destination runs at once and
// fetches the pages it still lacks from the source.
func (h *Hypervisor) StartPostcopy(ctx context.Context, name string) error {
	rec, _, err := h.running(name)
	if err != nil {
		return err
	}
	if _, err := qmpDo(ctx, rec.path(fileQMP), "migrate-start-postcopy", nil); err != nil {
		return ecode.ExecErrorf("post-copy of %s: %w", name, err)
	}
	return nil
}

// CancelMigration stops the migration and lets the source run again.
func (h *Hypervisor) CancelMigration(ctx context.Context, name string) error {
	rec, _, err := h.running(name)
	if err != nil {
		return err
	}
	sock := rec.path(fileQMP)
	mig, err := h.MigrationStatus(ctx, name)
	if err != nil {
		return err
	}
	switch mig.Status {
	case hypervisor.MigrationCompleted:
		return ecode.Errorf(ecode.State, "the migration of %s has completed: the destination runs it", name)
	case hypervisor.MigrationPostcopy:
		// The destination already runs the guest; the source alone cannot
		// take it back.
		return ecode.Errorf(ecode.State, "the migration of %s is in post-copy and cannot be cancelled", name)
	}
	if !mig.Finished() && mig.Status != hypervisor.MigrationNone {
		if _, err := qmpDo(ctx, sock, "migrate_cancel", nil); err != nil {
			return ecode.ExecErrorf("cancelling the migration of %s: %w", name, err)
		}
	}
	// A non-live migration paused the guest; qemu resumes a live one itself.
	st, err := queryStatus(ctx, sock)
	if err != nil {
		return ecode.ExecErrorf("migration of %s: %w", name, err)
	}
	if st.Status == "paused" || st.Status == "postmigrate" {
		if _, err := qmpDo(ctx, sock, "cont", nil); err != nil {
			return ecode.ExecErrorf("resuming %s after the migration stopped: %w", name, err)
		}
	}
	return nil
}

// FinishMigration runs the destination: a guest paused for a non-live
// migration arrives paused. The source reports completion as soon as it
// sent the last byte; the destination may still be loading the device
// state, so a destination still "inmigrate" is waited for.
func (h *Hypervisor) FinishMigration(ctx context.Context, name string) error {
	rec, _, err := h.running(name)
	if err != nil {
		return err
	}
	sock := rec.path(fileQMP)
	deadline := time.Now().Add(finishWait)
	for {
		st, err := queryStatus(ctx, sock)
		if err != nil {
			return ecode.ExecErrorf("migration of %s: %w", name, err)
		}
		switch st.Status {
		case "running":
			return nil
		case "paused", "postmigrate":
			if _, err := qmpDo(ctx, sock, "cont", nil); err != nil {
				return ecode.ExecErrorf("resuming %s after its migration: %w", name, err)
			}
			return nil
		case "inmigrate":
			if time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
				continue
			}
		}
		return ecode.Errorf(ecode.State, "instance %s has not received its state yet (state %s)", name, st.Status)
	}
}

// finishWait bounds how long the destination may take to load the state
// after the source sent it.
const finishWait = 30 * time.Second

func setMigrationCaps(ctx context.Context, sock string, postcopy bool) error {
	caps := []map[string]any{{"capability": hypervisor.CapPostcopy, "state": postcopy}}
	if _, err := qmpDo(ctx, sock, "migrate-set-capabilities", map[string]any{"capabilities": caps}); err != nil {
		return ecode.ExecErrorf("migration capabilities: %w", err)
	}
	return nil
}

// loadMigrationTLS gives qemu its TLS credentials: the files are written
// where qemu (unprivileged, maybe jailed) can read them, owned by its user,
// qemu loads them into a tls-creds-x509 object, and they are removed at
// once, so the key lies on disk only while qemu reads it and the jail is
// left empty.
func (h *Hypervisor) loadMigrationTLS(ctx context.Context, rec *record, endpoint string, tls hypervisor.MigrationTLS) error {
	if len(tls.CAPEM) == 0 || len(tls.CertPEM) == 0 || len(tls.KeyPEM) == 0 {
		return ecode.Errorf(ecode.Inval, "migration of %s: TLS credentials are missing (plain TCP is never used)", rec.Spec.Name)
	}
	sock := rec.path(fileQMP)
	// A repeated call replaces the object.
	_, _ = qmpDo(ctx, sock, "object-del", map[string]any{"id": migrationTLSID})

	hostDir, qemuDir := filepath.Join(rec.Dir, dirMigrationTLS), filepath.Join(rec.Dir, dirMigrationTLS)
	restore := func() {}
	if root := rec.Confinement.Chroot; root != "" {
		hostDir, qemuDir = filepath.Join(root, dirMigrationTLS), "/"+dirMigrationTLS
		// The jail is 0700 root: qemu's user needs to pass through it.
		if err := os.Chmod(root, 0o711); err != nil {
			return fmt.Errorf("kvm: %w", err)
		}
		restore = func() {
			if err := os.Chmod(root, 0o700); err != nil {
				h.log.Warn("cannot close the jail again", "dir", root, "err", err)
			}
		}
	}
	defer restore()
	defer func() {
		if err := os.RemoveAll(hostDir); err != nil {
			h.log.Warn("cannot remove migration TLS files", "dir", hostDir, "err", err)
		}
	}()
	if err := writeTLSDir(hostDir, endpoint, tls, rec.Confinement.UID); err != nil {
		return err
	}
	args := map[string]any{"qom-type": "tls-creds-x509", "id": migrationTLSID, "dir": qemuDir,
		"endpoint": endpoint, "verify-peer": true}
	if _, err := qmpDo(ctx, sock, "object-add", args); err != nil {
		return ecode.ExecErrorf("migration of %s: loading TLS credentials: %w", rec.Spec.Name, err)
	}
	return nil
}

// writeTLSDir writes qemu's x509 credential files for endpoint ("server" or
// "client"): readable by uid only.
func writeTLSDir(dir, endpoint string, tls hypervisor.MigrationTLS, uid int) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	if err := os.Mkdir(dir, 0o500); err != nil {
		return fmt.Errorf("kvm: %w", err)
	}
	files := []struct {
		name string
		data []byte
	}{{"ca-cert.pem", tls.CAPEM}, {endpoint + "-cert.pem", tls.CertPEM}, {endpoint + "-key.pem", tls.KeyPEM}}
	var errs []error
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		errs = append(errs, os.WriteFile(p, f.data, 0o400))
		if uid > 0 && os.Geteuid() == 0 {
			errs = append(errs, os.Chown(p, uid, -1))
		}
	}
	if uid > 0 && os.Geteuid() == 0 {
		errs = append(errs, os.Chown(dir, uid, -1))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kvm: migration TLS files: %w", err)
	}
	return nil
}
