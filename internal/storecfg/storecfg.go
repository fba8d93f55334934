// Package storecfg is the record of which store backend a cluster runs on:
// <state-dir>/master/store.json, read by corrald at start and rewritten
// only by `corrald migrate-store`. A cluster without the file runs on the
// embedded bbolt store (every cluster made before the etcd backend existed).
//
// The package only reads and writes the record. Opening the store it names
// lives in storecfg/backend, which links the etcd client: the CLI reads the
// record (to tell an operator where the store is) but must never link etcd.
package storecfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
)

// FileName is the record in the master state directory.
const FileName = "store.json"

// FileBolt is the bbolt store file in the master state directory.
const FileBolt = "config.db"

// Backends.
const (
	BackendBolt = "bbolt"
	BackendEtcd = "etcd"
)

// Files of corrald's etcd client identity in the master state directory,
// the defaults of Config.CertFile and KeyFile; the CA defaults to the
// cluster CA (ca.pem).
const (
	FileEtcdClientCert = "etcd-client.pem"
	FileEtcdClientKey  = "etcd-client.key"
	FileClusterCA      = "ca.pem"
)

// maxFileBytes bounds what Load reads: the record is a few hundred bytes,
// and a huge file there is a mistake, not a configuration.
const maxFileBytes = 64 << 10

// Config is the content of store.json.
type Config struct {
	// Backend is BackendBolt or BackendEtcd.
	Backend string `json:"backend"`
	// Endpoints are the etcd members' client URLs (etcd only).
	Endpoints []string `json:"endpoints,omitempty"`
	// Prefix is put in front of every key in etcd, so that several
	// clusters can share one etcd; it starts and ends with "/".
	Prefix string `json:"prefix,omitempty"`
	// CertFile and KeyFile are corrald's client certificate and key, and
	// CAFile the CA bundle the members' certificates must chain to (etcd
	// with https endpoints only). A relative path is relative to the
	// master state directory, so the state directory can move.
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	CAFile   string `json:"ca_file,omitempty"`
	// Managed, when set, says Corral runs this cluster's etcd members:
	// promoting a node to master candidate adds a member on it, and
	// demoting one removes it. Without it the members are the operator's
	// and are never touched.
	Managed *ManagedMembers `json:"managed_members,omitempty"`
}

// ManagedMembers describes the members a node daemon runs for a cluster
// whose etcd membership follows the master candidates: each listens on
// its node's primary IP at these ports and is named after its node.
type ManagedMembers struct {
	ClientPort int `json:"client_port"`
	PeerPort   int `json:"peer_port"`
}

func (m *ManagedMembers) validate() error {
	for _, p := range []int{m.ClientPort, m.PeerPort} {
		if p < 1 || p > 65535 {
			return fmt.Errorf("store record: managed etcd member port %d out of range", p)
		}
	}
	if m.ClientPort == m.PeerPort {
		return errors.New("store record: managed etcd members need different client and peer ports")
	}
	return nil
}

// Bolt is the configuration of a cluster on the embedded store.
func Bolt() Config { return Config{Backend: BackendBolt} }

// DefaultPrefix is the etcd key prefix of a cluster named clusterName.
func DefaultPrefix(clusterName string) string { return "/corral/" + clusterName + "/" }

// Path is the record's path in the master state directory.
func Path(masterDir string) string { return filepath.Join(masterDir, FileName) }

// Load reads the record of the cluster whose master state directory is
// masterDir. A missing record means bbolt.
func Load(masterDir string) (Config, error) {
	f, err := os.Open(Path(masterDir))
	if errors.Is(err, os.ErrNotExist) {
		return Bolt(), nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("storecfg: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return Config{}, fmt.Errorf("storecfg: reading %s: %w", f.Name(), err)
	}
	if len(b) > maxFileBytes {
		return Config{}, fmt.Errorf("storecfg: %s is larger than %d bytes", f.Name(), maxFileBytes)
	}
	c, err := Parse(b)
	if err != nil {
		return Config{}, fmt.Errorf("storecfg: %s: %w", f.Name(), err)
	}
	return c, nil
}

// Parse decodes and validates a record. Unknown fields are refused: a
// misspelt field would otherwise silently fall back to a default.
func Parse(b []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("invalid store record: %w", err)
	}
	if dec.More() {
		return Config{}, errors.New("invalid store record: data after the JSON object")
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Save validates c and replaces the record atomically (mode 0600).
func Save(masterDir string, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(Path(masterDir), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("storecfg: writing %s: %w", Path(masterDir), err)
	}
	return nil
}

// Validate checks that c names a backend and everything that backend needs.
func (c Config) Validate() error {
	switch c.Backend {
	case BackendBolt:
		if len(c.Endpoints) > 0 || c.Prefix != "" || c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" || c.Managed != nil {
			return errors.New("store record: the bbolt backend takes no etcd settings")
		}
		return nil
	case BackendEtcd:
	case "":
		return errors.New("store record: no backend")
	default:
		return fmt.Errorf("store record: unknown backend %q (want %s or %s)", c.Backend, BackendBolt, BackendEtcd)
	}
	if len(c.Endpoints) == 0 {
		return errors.New("store record: etcd needs at least one endpoint")
	}
	secure := 0
	for _, e := range c.Endpoints {
		https, err := CheckEndpoint(e)
		if err != nil {
			return fmt.Errorf("store record: %w", err)
		}
		if https {
			secure++
		}
	}
	if secure != 0 && secure != len(c.Endpoints) {
		return errors.New("store record: mixed http and https etcd endpoints")
	}
	if err := CheckPrefix(c.Prefix); err != nil {
		return fmt.Errorf("store record: %w", err)
	}
	files := 0
	for _, f := range []string{c.CertFile, c.KeyFile, c.CAFile} {
		if f != "" {
			files++
		}
	}
	switch {
	case secure > 0 && files != 3:
		return errors.New("store record: https etcd endpoints need the client certificate, key and CA files")
	case secure == 0 && files != 0:
		return errors.New("store record: TLS files given for plain http etcd endpoints")
	}
	if c.Managed != nil {
		if secure == 0 {
			// The members Corral starts always use the cluster CA.
			return errors.New("store record: managed etcd members need https endpoints")
		}
		if err := c.Managed.validate(); err != nil {
			return err
		}
	}
	return nil
}

// TLS reports whether c talks to etcd over TLS.
func (c Config) TLS() bool { return c.Backend == BackendEtcd && c.CertFile != "" }

// File resolves one of c's file names against the master state directory.
func File(masterDir, name string) string {
	if name == "" || filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(masterDir, name)
}

// CheckEndpoint checks an etcd client URL (scheme http or https, an
// explicit host and port, nothing else) and reports whether it is https.
func CheckEndpoint(e string) (https bool, err error) {
	u, err := url.Parse(e)
	if err != nil {
		return false, fmt.Errorf("etcd endpoint %q: %w", e, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, fmt.Errorf("etcd endpoint %q: scheme must be http or https", e)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false, fmt.Errorf("etcd endpoint %q: only scheme://host:port is allowed", e)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" || port == "" {
		return false, fmt.Errorf("etcd endpoint %q: want scheme://host:port", e)
	}
	return u.Scheme == "https", nil
}

// CheckPrefix checks an etcd key prefix: it starts and ends with "/" (so no
// cluster's keys fall inside another's), is not "/" alone (the whole
// keyspace is nobody's to take) and has no empty or dot path elements.
func CheckPrefix(p string) error {
	if !strings.HasPrefix(p, "/") || !strings.HasSuffix(p, "/") || len(p) < 3 {
		return fmt.Errorf("etcd prefix %q: must look like /corral/NAME/", p)
	}
	for _, el := range strings.Split(p[1:len(p)-1], "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("etcd prefix %q: empty or dot path element", p)
		}
	}
	for _, r := range p {
		if r < 0x21 || r == 0x7f {
			return fmt.Errorf("etcd prefix %q: spaces and control characters are not allowed", p)
		}
	}
	return nil
}
