package pki

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/corral/corral/internal/atomicfile"
)

// switchSuffix names the file that holds a new certificate while a key
// pair is replaced (see SwitchKeyPair).
const switchSuffix = ".new"

// SwitchKeyPair replaces the pair at certPath and keyPath, which a daemon
// reads at start, with a new one. The two files cannot be replaced in one
// atomic step, so the new certificate is first recorded beside the old
// one: a process stopped between the key and the certificate leaves a
// state RecoverKeyPairSwitch completes. The pair is checked first.
func SwitchKeyPair(certPath, keyPath string, certPEM, keyPEM []byte) error {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return fmt.Errorf("pki: certificate and key do not form a pair: %w", err)
	}
	pending := certPath + switchSuffix
	if err := atomicfile.WriteFile(pending, certPEM, 0o644); err != nil {
		return fmt.Errorf("pki: record the new certificate: %w", err)
	}
	if err := WriteKeyPair(certPath, keyPath, certPEM, keyPEM); err != nil {
		return err
	}
	if err := os.Remove(pending); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// RecoverKeyPairSwitch completes or forgets a SwitchKeyPair that was
// interrupted: when the key at keyPath is already the new one, the
// certificate becomes the new one too; otherwise the old pair is intact
// and stays. It returns whether the new pair was completed.
func RecoverKeyPairSwitch(certPath, keyPath string) (completed bool, err error) {
	pending := certPath + switchSuffix
	certPEM, err := os.ReadFile(pending)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pki: %w", err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return false, fmt.Errorf("pki: %w", err)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err == nil {
		if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
			return false, fmt.Errorf("pki: finish the certificate switch: %w", err)
		}
		completed = true
	}
	if err := os.Remove(pending); err != nil {
		return completed, fmt.Errorf("pki: %w", err)
	}
	return completed, nil
}
