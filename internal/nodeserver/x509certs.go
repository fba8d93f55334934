package nodeserver

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
)

// Transfer keys: one directory per key under <StateDir>/crypto, named like
// Ganeti's x509-<unix>-<random>, holding "key" and "cert".
const (
	transferKeyDirMode  = 0o700
	transferKeyFileMode = 0o400
	transferKeyFile     = "key"
	transferCertFile    = "cert"
	// maxTransferValidity is Ganeti's cap on a transfer certificate.
	maxTransferValidity = 7 * 24 * time.Hour
	// defaultTransferValidity is Ganeti's RIE_CERT_VALIDITY, used when the
	// caller asks for none.
	defaultTransferValidity = 24 * time.Hour
)

// transferKeyRE is the only shape of key name the node accepts: the name
// becomes a path component, so nothing else may get through.
var transferKeyRE = regexp.MustCompile(`^x509-[0-9]+-[0-9a-f]+$`)

// certGenerator makes a self-signed transfer certificate and its key.
type certGenerator func(cn string, validity time.Duration, now time.Time) (certPEM, keyPEM []byte, err error)

// certStore keeps the node's transfer keys. The private keys never leave
// the node; only certificates are returned.
type certStore struct {
	dir string // <StateDir>/crypto
	cn  string // the node's name
	gen certGenerator
	now func() time.Time
	log *slog.Logger
}

func newCertStore(dir, cn string, gen certGenerator, log *slog.Logger) *certStore {
	return &certStore{dir: dir, cn: cn, gen: gen, now: time.Now, log: log}
}

func checkKeyName(name string) error {
	if len(name) > 64 || !transferKeyRE.MatchString(name) {
		return ecode.Errorf(ecode.Inval, "invalid transfer key name %q", name)
	}
	return nil
}

// create makes a new key and certificate valid for validity (capped at 7
// days) and returns the key's name and the certificate. Expired keys are
// swept first, so a node that never gets a cleanup call still does not
// accumulate them.
func (c *certStore) create(validity time.Duration) (string, []byte, error) {
	if validity < 0 {
		return "", nil, ecode.Errorf(ecode.Inval, "invalid certificate validity %s", validity)
	}
	if validity == 0 {
		validity = defaultTransferValidity
	}
	validity = min(validity, maxTransferValidity)
	now := c.now()
	c.sweep(now)
	if err := os.MkdirAll(c.dir, transferKeyDirMode); err != nil {
		return "", nil, ecode.Errorf(ecode.Environ, "creating %s: %v", c.dir, err)
	}
	if c.gen == nil {
		return "", nil, ecode.Errorf(ecode.Environ, "transfer certificates are not available on node %s", c.cn)
	}
	certPEM, keyPEM, err := c.gen(c.cn, validity, now)
	if err != nil {
		return "", nil, ecode.Errorf(ecode.Environ, "creating a transfer certificate: %v", err)
	}
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("x509-%d-%s", now.Unix(), hex.EncodeToString(rnd[:]))
	// Build the directory under a hidden name and rename it in: a key name
	// that exists always has both files.
	tmp, err := os.MkdirTemp(c.dir, ".tmp-x509-")
	if err != nil {
		return "", nil, ecode.Errorf(ecode.Environ, "creating a key directory: %v", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := os.Chmod(tmp, transferKeyDirMode); err != nil {
		return "", nil, err
	}
	if err := writeSynced(filepath.Join(tmp, transferKeyFile), keyPEM, transferKeyFileMode); err != nil {
		return "", nil, ecode.Errorf(ecode.Environ, "writing the transfer key: %v", err)
	}
	if err := writeSynced(filepath.Join(tmp, transferCertFile), certPEM, transferKeyFileMode); err != nil {
		return "", nil, ecode.Errorf(ecode.Environ, "writing the transfer certificate: %v", err)
	}
	if err := os.Rename(tmp, filepath.Join(c.dir, name)); err != nil {
		return "", nil, ecode.Errorf(ecode.Environ, "installing the transfer key: %v", err)
	}
	syncDir(c.dir)
	c.log.Info("transfer certificate created", "key", name, "validity", validity)
	return name, certPEM, nil
}

// remove deletes a key; a key already gone is success.
func (c *certStore) remove(name string) error {
	if err := checkKeyName(name); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(c.dir, name)); err != nil {
		return ecode.Errorf(ecode.Environ, "removing transfer key %s: %v", name, err)
	}
	c.log.Info("transfer certificate removed", "key", name)
	return nil
}

// load returns the key and certificate for TLS. The error never quotes the
// files' content.
func (c *certStore) load(name string) (tls.Certificate, error) {
	if err := checkKeyName(name); err != nil {
		return tls.Certificate{}, err
	}
	dir := filepath.Join(c.dir, name)
	certPEM, err := os.ReadFile(filepath.Join(dir, transferCertFile))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return tls.Certificate{}, ecode.Errorf(ecode.Inval, "transfer key %s does not exist on node %s", name, c.cn)
		}
		return tls.Certificate{}, ecode.Errorf(ecode.Environ, "reading transfer certificate %s: %v", name, err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, transferKeyFile))
	if err != nil {
		return tls.Certificate{}, ecode.Errorf(ecode.Inval, "transfer key %s is incomplete on node %s", name, c.cn)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, ecode.Errorf(ecode.Inval, "transfer key %s is unusable (key and certificate do not load)", name)
	}
	return cert, nil
}

// sweep removes keys whose certificate has expired, and leftovers of
// creations that died half-way. Failures are logged only: sweeping is
// housekeeping, never a reason to refuse a new key.
func (c *certStore) sweep(now time.Time) {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(c.dir, name)
		switch {
		case strings.HasPrefix(name, ".tmp-x509-"):
			if info, err := e.Info(); err == nil && now.Sub(info.ModTime()) > time.Hour {
				os.RemoveAll(p)
			}
			continue
		case !e.IsDir() || !transferKeyRE.MatchString(name):
			continue
		}
		if !certExpired(p, name, now) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			c.log.Warn("cannot remove expired transfer key", "key", name, "err", err)
			continue
		}
		c.log.Info("expired transfer certificate removed", "key", name)
	}
}

// certExpired reads the key directory's certificate; one that cannot be
// read counts as expired once the creation time in its name is further back
// than any certificate can live.
func certExpired(dir, name string, now time.Time) bool {
	data, err := os.ReadFile(filepath.Join(dir, transferCertFile))
	if err == nil {
		if certs, err := pki.ParseCertificatesPEM(data); err == nil && len(certs) > 0 {
			return now.After(certs[0].NotAfter)
		}
	}
	ts, err := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(name, "x509-"), "-", 2)[0], 10, 64)
	if err != nil {
		return false
	}
	return now.Sub(time.Unix(ts, 0)) > maxTransferValidity+time.Hour
}

// writeSynced creates path exclusively with perm and makes it durable.
func writeSynced(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir makes renames in dir durable; failure only weakens durability.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

func (s *Server) x509CertCreate(ctx context.Context, a nodeapi.X509CertCreateArgs) (any, error) {
	validity := a.Validity
	if validity > int64(maxTransferValidity/time.Second) {
		validity = int64(maxTransferValidity / time.Second) // no overflow below
	}
	name, certPEM, err := s.certs.create(time.Duration(validity) * time.Second)
	if err != nil {
		return nil, err
	}
	return nodeapi.X509CertCreateReply{Name: name, CertPEM: string(certPEM)}, nil
}

func (s *Server) x509CertRemove(ctx context.Context, a nodeapi.X509CertRemoveArgs) (any, error) {
	return nil, s.certs.remove(a.Name)
}
