package pki

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/corral/corral/internal/atomicfile"
	"github.com/corral/corral/internal/secret"
)

// NewDomainSecret makes a cluster domain secret in Ganeti's format: 20 random
// bytes as 40 lowercase hex characters. Clusters that move instances between
// them share it as the HMAC key of their handshakes.
func NewDomainSecret() secret.Secret {
	var b [20]byte
	rand.Read(b[:]) // crypto/rand.Read never fails (it aborts the program instead)
	return secret.Secret(hex.EncodeToString(b[:]))
}

// WriteSecretFile stores s as one line, mode 0400, atomically.
func WriteSecretFile(path string, s secret.Secret) error {
	v := s.Reveal()
	if v == "" || strings.ContainsAny(v, "\r\n") {
		return errors.New("pki: secret must be one non-empty line")
	}
	if err := atomicfile.WriteFile(path, []byte(v+"\n"), 0o400); err != nil {
		return fmt.Errorf("pki: write secret file: %w", err)
	}
	return nil
}

// ReadSecretFile reads a secret written by WriteSecretFile, or Ganeti's
// cluster-domain-secret file: the first line, stripped of white space.
func ReadSecretFile(path string) (secret.Secret, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("pki: read secret file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSpace(line)
	if line == "" {
		return "", fmt.Errorf("pki: secret file %s is empty", path)
	}
	return secret.Secret(line), nil
}
