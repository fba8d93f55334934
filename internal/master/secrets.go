package master

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// FileStagedDomainSecret is where `corral cluster renew-crypto
// --cluster-domain-secret FILE` puts the secret for the renew job to
// install (mode 0400, owned by corrald's user).
const FileStagedDomainSecret = "cluster-domain-secret.staged"

// fileSecrets keeps the cluster domain secret in the master's state
// directory, in Ganeti's file format.
type fileSecrets struct{ dir string }

func (f fileSecrets) DomainSecret() (secret.Secret, error) {
	return pki.ReadSecretFile(filepath.Join(f.dir, FileDomainSecret))
}

func (f fileSecrets) StagedDomainSecret() (secret.Secret, error) {
	s, err := pki.ReadSecretFile(filepath.Join(f.dir, FileStagedDomainSecret))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no domain secret is staged on this master (run corral cluster renew-crypto --cluster-domain-secret FILE here)")
	}
	return s, err
}

func (f fileSecrets) SetDomainSecret(s secret.Secret) error {
	if err := pki.WriteSecretFile(filepath.Join(f.dir, FileDomainSecret), s); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(f.dir, FileStagedDomainSecret)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
