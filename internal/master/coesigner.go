package master

import (
	"context"
	"fmt"

	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/coe/driver/k8sprocess"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/pki"
)

// coeKeyPurpose names the key that seals COE clusters' CA keys in the
// store. It is derived from the Corral CA's key, which every master
// candidate holds, so any master can open what another sealed.
const coeKeyPurpose = "corral coe private keys v1"

// coeKeys is the sealer of COE clusters' CA keys.
func coeKeys(ca *pki.CA) (*certs.Sealer, error) {
	k, err := ca.PurposeKey(coeKeyPurpose)
	if err != nil {
		return nil, fmt.Errorf("deriving the COE key sealing key: %w", err)
	}
	return certs.NewSealer(k)
}

// coeSigner signs with a cluster's CA, its key opened from the store.
type coeSigner struct{ keys *certs.Sealer }

// SignCSR implements COESigner.
func (s coeSigner) SignCSR(ctx context.Context, ca *config.COECertificate, csrPEM string) (string, error) {
	if _, err := certs.ParseCSR([]byte(csrPEM)); err != nil {
		return "", err
	}
	c, err := k8sprocess.LoadCA(s.keys, ca)
	if err != nil {
		return "", err
	}
	pem, err := c.SignCSR([]byte(csrPEM))
	if err != nil {
		return "", err
	}
	return string(pem), nil
}
