package pki

import (
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/corral/corral/internal/secret"
)

// purposeKeySalt separates purpose keys from every other key derived
// from the CA key (the domain secret's sealing key has its own salt).
const purposeKeySalt = "corral-purpose-key"

// PurposeKey derives a 32-byte key bound to purpose from the CA's private
// key with HKDF-SHA256, as the domain secret's sealing key is: every
// master candidate holds the CA key, so every candidate derives the same
// key, and nobody without the CA key can. Different purposes get
// unrelated keys; purpose names what the key protects (e.g. "coe private
// keys v1") and never changes once data is sealed under it.
func (ca *CA) PurposeKey(purpose string) (secret.Secret, error) {
	if purpose == "" {
		return "", errors.New("pki: a purpose key needs a purpose")
	}
	der, err := x509.MarshalPKCS8PrivateKey(ca.key)
	if err != nil {
		return "", fmt.Errorf("pki: encode the CA key: %w", err)
	}
	k, err := hkdf.Key(sha256.New, der, []byte(purposeKeySalt), purpose, 32)
	if err != nil {
		return "", fmt.Errorf("pki: derive the %s key: %w", purpose, err)
	}
	return secret.Secret(k), nil
}
