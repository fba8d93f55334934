// Package backend opens the store a cluster's store.json names, and moves a
// cluster from the embedded bbolt store to etcd (Migrate). It links both
// backends, the etcd client among them, so only corrald imports it: the
// CLI runs `corrald migrate-store` instead of linking it.
package backend

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/store"
	"github.com/corral/corral/internal/store/boltstore"
	"github.com/corral/corral/internal/store/etcdstore"
	"github.com/corral/corral/internal/storecfg"
)

// Options tune Open.
type Options struct {
	Logger *slog.Logger
	// BoltOpenTimeout bounds the wait for the bbolt file lock (default
	// boltstore's 5 s).
	BoltOpenTimeout time.Duration
	// DialTimeout bounds the first contact with etcd (default etcdstore's).
	DialTimeout time.Duration
}

// Open opens the store named by the store.json in masterDir (bbolt when
// there is none) and returns it with the record.
func Open(ctx context.Context, masterDir string, o Options) (store.Store, storecfg.Config, error) {
	cfg, err := storecfg.Load(masterDir)
	if err != nil {
		return nil, cfg, err
	}
	st, err := OpenConfig(ctx, masterDir, cfg, o)
	return st, cfg, err
}

// OpenConfig opens the store cfg describes.
func OpenConfig(ctx context.Context, masterDir string, cfg storecfg.Config, o Options) (store.Store, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch cfg.Backend {
	case storecfg.BackendEtcd:
		tlsCfg, err := TLSConfig(masterDir, cfg)
		if err != nil {
			return nil, err
		}
		st, err := etcdstore.Open(ctx, etcdstore.Options{
			Endpoints: cfg.Endpoints, TLS: tlsCfg, Prefix: cfg.Prefix,
			DialTimeout: o.DialTimeout, Logger: o.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("opening the etcd store (prefix %s): %w", cfg.Prefix, err)
		}
		return st, nil
	default:
		path := filepath.Join(masterDir, storecfg.FileBolt)
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("no cluster store at %s (run 'corral cluster init' first): %w", path, err)
		}
		st, err := boltstore.Open(path, boltstore.Options{Logger: o.Logger, OpenTimeout: o.BoltOpenTimeout})
		if err != nil {
			return nil, fmt.Errorf("opening the store: %w", err)
		}
		return st, nil
	}
}

// TLSConfig is corrald's TLS configuration towards the etcd members of cfg,
// or nil for plain http endpoints. The members' certificates must chain to
// the CA bundle of cfg and carry the master-candidate role (Corral issues
// its members' certificates so); each is checked against the host of the
// endpoint it serves, which the etcd client fills in per connection.
func TLSConfig(masterDir string, cfg storecfg.Config) (*tls.Config, error) {
	if !cfg.TLS() {
		return nil, nil
	}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(storecfg.File(masterDir, name))
		if err != nil {
			return nil, fmt.Errorf("etcd client TLS: %w", err)
		}
		return b, nil
	}
	certPEM, err := read(cfg.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := read(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: key pair %s: %w", cfg.CertFile, err)
	}
	pool, _, err := pki.CAPool(caPEM)
	if err != nil {
		return nil, fmt.Errorf("etcd client TLS: CA %s: %w", cfg.CAFile, err)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		// Standard verification has checked the chain and the endpoint's
		// host; this adds the role, so that a node's certificate from the
		// same CA cannot pass for an etcd member.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("etcd member sent no certificate")
			}
			// A certificate without a Corral role comes from an etcd PKI
			// of the operator's (cluster init --etcd-ca-file ...).
			if role, ok := pki.RoleOf(cs.PeerCertificates[0]); ok && !slices.Contains(pki.EtcdMemberRoles(), role) {
				return fmt.Errorf("etcd member certificate %q has role %q, not %s", cs.PeerCertificates[0].Subject.CommonName, role, pki.RoleEtcdMember)
			}
			return nil
		},
	}, nil
}
