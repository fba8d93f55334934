package nodeserver

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/sshkeys"
)

// FilePubKeys is the public-key file of potential master candidates in
// the node's state directory (Ganeti's ganeti_pub_keys), root-only.
const FilePubKeys = "ssh_pub_keys"

// DefaultSSHDir is root's SSH directory, where a production node keeps its
// key pair and authorized_keys. Tests give each node daemon its own.
const DefaultSSHDir = "/root/.ssh"

// sshKeys carries out the SSH RPCs. One mutex orders them: two writes of
// authorized_keys must not interleave their read-modify-write.
type sshKeys struct {
	dir     string // "" when this daemon manages no SSH files
	pubFile string
	node    string
	mu      sync.Mutex
}

func (s *Server) sshRoutes() {
	k := &sshKeys{dir: s.opts.SSHDir, pubFile: filepath.Join(s.opts.StateDir, FilePubKeys), node: s.name}
	handle(s, nodeapi.SSHKeyEnsure, k.ensure)
	handle(s, nodeapi.SSHKeyCommit, k.commit)
	handle(s, nodeapi.SSHFilesRead, k.read)
	handle(s, nodeapi.SSHFilesWrite, k.write)
}

func (k *sshKeys) keyPath(typ string, staged bool) string {
	p := filepath.Join(k.dir, sshkeys.FileName(typ))
	if staged {
		p += ".new"
	}
	return p
}

// ensure returns the node's public key, making the pair if needed. A pair
// already there (an administrator's or one made before) is kept: the
// master must not cut off whoever uses it.
func (k *sshKeys) ensure(ctx context.Context, a nodeapi.SSHKeyArgs) (any, error) {
	if k.dir == "" {
		return nodeapi.SSHKeyReply{}, nil
	}
	bits, err := sshkeys.CheckType(a.Type, a.Bits)
	if err != nil {
		return nil, ecode.Errorf(ecode.Inval, "%v", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	path := k.keyPath(a.Type, a.Stage)
	if !a.Stage {
		if pub, err := readPublic(path); err == nil {
			return nodeapi.SSHKeyReply{Managed: true, PublicKey: pub}, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, ecode.Errorf(ecode.Environ, "reading the SSH key %s: %v", path, err)
		}
	}
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "creating %s: %v", k.dir, err)
	}
	pair, err := sshkeys.Generate(a.Type, bits, "root@"+k.node)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "making an SSH key: %v", err)
	}
	// The private key first: a public key file never names a pair whose
	// private half is missing.
	if err := atomicfile.WriteFile(path, pair.Private, 0o600); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "writing %s: %v", path, err)
	}
	if err := atomicfile.WriteFile(path+".pub", []byte(pair.Public+"\n"), 0o644); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "writing %s.pub: %v", path, err)
	}
	return nodeapi.SSHKeyReply{Managed: true, PublicKey: pair.Public, Created: true}, nil
}

// readPublic reads a pair's public key, from its .pub file or else from
// the private key itself.
func readPublic(priv string) (string, error) {
	privData, err := os.ReadFile(priv)
	if err != nil {
		return "", err
	}
	if b, err := os.ReadFile(priv + ".pub"); err == nil {
		line := strings.TrimSpace(string(b))
		if _, err := sshkeys.ParsePublic(line); err == nil {
			return line, nil
		}
	}
	return sshkeys.PublicFromPrivate(privData)
}

// commit moves a staged pair into place; done again, it answers the key
// in place.
func (k *sshKeys) commit(ctx context.Context, a nodeapi.SSHKeyArgs) (any, error) {
	if k.dir == "" {
		return nodeapi.SSHKeyReply{}, nil
	}
	if _, err := sshkeys.CheckType(a.Type, a.Bits); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "%v", err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	staged, final := k.keyPath(a.Type, true), k.keyPath(a.Type, false)
	if _, err := os.Stat(staged); err == nil {
		// The public half moves last: until then the old .pub names the
		// old pair, and readPublic falls back to the private key.
		if err := os.Rename(staged, final); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "installing the new SSH key: %v", err)
		}
		if err := os.Rename(staged+".pub", final+".pub"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, ecode.Errorf(ecode.Environ, "installing the new SSH public key: %v", err)
		}
	}
	pub, err := readPublic(final)
	if err != nil {
		return nil, ecode.Errorf(ecode.Environ, "reading the SSH key %s: %v", final, err)
	}
	return nodeapi.SSHKeyReply{Managed: true, PublicKey: pub}, nil
}

func (k *sshKeys) read(ctx context.Context, _ struct{}) (any, error) {
	if k.dir == "" {
		return nodeapi.SSHFilesReply{}, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	r := nodeapi.SSHFilesReply{Managed: true}
	b, err := os.ReadFile(k.pubFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, ecode.Errorf(ecode.Environ, "reading %s: %v", k.pubFile, err)
	}
	r.PubKeys = string(b)
	auth, err := os.ReadFile(filepath.Join(k.dir, "authorized_keys"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, ecode.Errorf(ecode.Environ, "reading authorized_keys: %v", err)
	}
	r.Authorized = sshkeys.Block(string(auth))
	return r, nil
}

// write replaces the files. Keys reach authorized_keys only when they are
// in the public-key file (when the node has one): a master whose RPC
// credentials leaked still cannot plant a stranger's key on a potential
// master candidate.
func (k *sshKeys) write(ctx context.Context, a nodeapi.SSHFilesWriteArgs) (any, error) {
	if k.dir == "" {
		return nodeapi.SSHFilesReply{}, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var pub sshkeys.PubKeys
	if a.PubKeys != nil && *a.PubKeys != "" {
		var err error
		if pub, err = sshkeys.ParsePubKeys(*a.PubKeys); err != nil {
			return nil, ecode.Errorf(ecode.Inval, "public-key file: %v", err)
		}
	} else if a.PubKeys == nil {
		b, err := os.ReadFile(k.pubFile)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, ecode.Errorf(ecode.Environ, "reading %s: %v", k.pubFile, err)
		}
		if pub, err = sshkeys.ParsePubKeys(string(b)); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "%s: %v", k.pubFile, err)
		}
	}
	if a.Authorized != nil {
		for _, key := range *a.Authorized {
			if _, err := sshkeys.ParsePublic(key); err != nil || strings.ContainsAny(key, "\r\n") {
				return nil, ecode.Errorf(ecode.Inval, "authorized key %q: %v", key, err)
			}
			if len(pub) > 0 && !pub.Has(key) {
				return nil, ecode.Errorf(ecode.Inval, "refusing an authorized key that is not in the public-key file: %s", key)
			}
		}
	}
	for _, key := range a.Drop {
		if _, err := sshkeys.ParsePublic(key); err != nil {
			return nil, ecode.Errorf(ecode.Inval, "key to drop %q: %v", key, err)
		}
	}
	if a.PubKeys != nil {
		if *a.PubKeys == "" {
			if err := os.Remove(k.pubFile); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, ecode.Errorf(ecode.Environ, "removing %s: %v", k.pubFile, err)
			}
		} else if err := atomicfile.WriteFile(k.pubFile, []byte(pub.String()), 0o600); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "writing %s: %v", k.pubFile, err)
		}
	}
	if a.Authorized != nil || len(a.Drop) > 0 {
		path := filepath.Join(k.dir, "authorized_keys")
		cur, err := os.ReadFile(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, ecode.Errorf(ecode.Environ, "reading %s: %v", path, err)
		}
		keys := sshkeys.Block(string(cur))
		if a.Authorized != nil {
			keys = *a.Authorized
		}
		if err := os.MkdirAll(k.dir, 0o700); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "creating %s: %v", k.dir, err)
		}
		if err := atomicfile.WriteFile(path, []byte(sshkeys.SetBlock(string(cur), keys, a.Drop)), 0o600); err != nil {
			return nil, ecode.Errorf(ecode.Environ, "writing %s: %v", path, err)
		}
	}
	return nodeapi.SSHFilesReply{Managed: true}, nil
}
