package nodeserver

import (
	"context"
	"os"
	"path/filepath"
	"sync"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/storage"
)

// migrationKeys are the private keys of migration certificates, by
// instance uuid, from the request until the hypervisor has loaded them. In
// memory only: a restarted daemon asks the master for a new certificate.
type migrationKeys struct {
	mu   sync.Mutex
	keys map[string][]byte
}

func (m *migrationKeys) put(uuid string, key []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.keys == nil {
		m.keys = map[string][]byte{}
	}
	m.keys[uuid] = key
}

func (m *migrationKeys) get(uuid string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys[uuid]
}

func (m *migrationKeys) drop(uuid string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, uuid)
}

func (s *Server) migrationRoutes() {
	handle(s, nodeapi.MigrationCSR, s.migrationCSR)
	handle(s, nodeapi.MigrationAccept, s.migrationAccept)
	handle(s, nodeapi.MigrationStart, s.migrationStart)
	handle(s, nodeapi.MigrationStatus, func(ctx context.Context, a nodeapi.InstanceArgs) (any, error) {
		m, err := s.migrator(a.Instance.Hypervisor)
		if err != nil {
			return nil, err
		}
		return m.MigrationStatus(ctx, a.Instance.Name)
	})
	handle(s, nodeapi.MigrationPostcopy, func(ctx context.Context, a nodeapi.InstanceArgs) (any, error) {
		m, err := s.migrator(a.Instance.Hypervisor)
		if err != nil {
			return nil, err
		}
		return nil, m.StartPostcopy(ctx, a.Instance.Name)
	})
	handle(s, nodeapi.MigrationCancel, func(ctx context.Context, a nodeapi.InstanceArgs) (any, error) {
		m, err := s.migrator(a.Instance.Hypervisor)
		if err != nil {
			return nil, err
		}
		s.migKeys.drop(a.Instance.UUID)
		return nil, m.CancelMigration(ctx, a.Instance.Name)
	})
	handle(s, nodeapi.MigrationFinish, func(ctx context.Context, a nodeapi.InstanceArgs) (any, error) {
		m, err := s.migrator(a.Instance.Hypervisor)
		if err != nil {
			return nil, err
		}
		s.migKeys.drop(a.Instance.UUID)
		return nil, m.FinishMigration(ctx, a.Instance.Name)
	})
	handle(s, nodeapi.MigrationDrop, s.migrationDrop)
	handle(s, nodeapi.SharedDirProbe, s.sharedDirProbe)
}

func (s *Server) migrator(name string) (hypervisor.Migrator, error) {
	h, err := s.hv(name)
	if err != nil {
		return nil, err
	}
	m, ok := h.(hypervisor.Migrator)
	if !ok {
		return nil, ecode.Errorf(ecode.Inval, "hypervisor %s cannot migrate instances", h.Name())
	}
	return m, nil
}

func (s *Server) migrationCSR(ctx context.Context, a nodeapi.MigrationCSRArgs) (any, error) {
	if !hypervisor.ValidUUID(a.InstanceUUID) {
		return nil, ecode.Errorf(ecode.Inval, "invalid instance uuid %q", a.InstanceUUID)
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		return nil, err
	}
	csr, err := pki.NewCSR(key, s.name)
	if err != nil {
		return nil, err
	}
	s.migKeys.put(a.InstanceUUID, keyPEM)
	return nodeapi.MigrationCSRReply{CSR: string(csr)}, nil
}

// migrationTLS puts the signed certificate with the key this node made for
// it and the cluster CA this node trusts.
func (s *Server) migrationTLS(uuid, certPEM string) (hypervisor.MigrationTLS, error) {
	key := s.migKeys.get(uuid)
	if key == nil {
		return hypervisor.MigrationTLS{}, ecode.Errorf(ecode.State, "node %s has no migration key for instance %s (restarted?): start the migration again", s.name, uuid)
	}
	ca, err := os.ReadFile(filepath.Join(s.opts.StateDir, FileCA))
	if err != nil {
		return hypervisor.MigrationTLS{}, ecode.ExecErrorf("reading the cluster CA: %w", err)
	}
	return hypervisor.MigrationTLS{CAPEM: ca, CertPEM: []byte(certPEM), KeyPEM: key}, nil
}

func (s *Server) migrationAccept(ctx context.Context, a nodeapi.MigrationAcceptArgs) (any, error) {
	m, err := s.migrator(a.Instance.Hypervisor)
	if err != nil {
		return nil, err
	}
	tls, err := s.migrationTLS(a.Instance.UUID, a.CertPEM)
	if err != nil {
		return nil, err
	}
	if err := s.startInstance(ctx, a.Instance, true); err != nil {
		return nil, err
	}
	in := hypervisor.MigrationIncoming{Address: a.Address, Port: a.Port, TLS: tls, Postcopy: a.Postcopy}
	if err := m.AcceptMigration(ctx, a.Instance.Name, in); err != nil {
		return nil, err
	}
	return nil, nil
}

func (s *Server) migrationStart(ctx context.Context, a nodeapi.MigrationStartArgs) (any, error) {
	m, err := s.migrator(a.Instance.Hypervisor)
	if err != nil {
		return nil, err
	}
	tls, err := s.migrationTLS(a.Instance.UUID, a.CertPEM)
	if err != nil {
		return nil, err
	}
	out := hypervisor.MigrationOutgoing{Address: a.Address, Port: a.Port, TLSHostname: a.TLSHostname, TLS: tls,
		Live: a.Live, BandwidthMiB: a.BandwidthMiB, DowntimeMS: a.DowntimeMS, Postcopy: a.Postcopy}
	return nil, m.StartMigration(ctx, a.Instance.Name, out)
}

// migrationDrop kills the instance's process here. Its disks stay as they
// are: the other node uses them.
func (s *Server) migrationDrop(ctx context.Context, a nodeapi.InstanceArgs) (any, error) {
	in := a.Instance
	h, err := s.hv(in.Hypervisor)
	if err != nil {
		return nil, err
	}
	s.migKeys.drop(in.UUID)
	if err := h.Stop(ctx, in.Name, 0, true); err != nil {
		return nil, err
	}
	if spec, err := s.hvSpec(in); err == nil {
		s.deleteTaps(spec)
	}
	if b, err := s.backend(in.DiskTemplate, in.SharedFileDir); err == nil {
		if at, ok := b.(storage.Attacher); ok {
			for _, d := range in.Disks {
				if err := at.Detach(ctx, in.UUID, diskOf(in.DiskTemplate, d)); err != nil {
					s.log.Warn("cannot detach disk", "instance", in.Name, "disk", d.Index, "err", err)
				}
			}
		}
	}
	s.log.Info("instance process dropped after migration", "instance", in.Name)
	return nil, nil
}

// attachDisks makes an instance's disks usable here for templates that
// need it (shared storage): visible on this node, and owned by qemu.
func (s *Server) attachDisks(ctx context.Context, in nodeapi.InstanceSpec, owner qemuOwner) error {
	b, err := s.backend(in.DiskTemplate, in.SharedFileDir)
	if err != nil {
		return err
	}
	at, ok := b.(storage.Attacher)
	if !ok {
		return nil
	}
	o := storage.KeepOwner()
	if owner.uid >= 0 && os.Geteuid() == 0 && in.Hypervisor == hypervisor.KVM {
		o = storage.Owner{UID: owner.uid, GID: owner.gid}
	}
	for _, d := range in.Disks {
		if _, err := at.Attach(ctx, in.UUID, diskOf(in.DiskTemplate, d), o); err != nil {
			return err
		}
	}
	return nil
}
