package controlplane

import (
	"github.com/corral/corral/internal/coe/certs"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/secret"
)

// The roles of a bundle's key pairs on the wire.
const (
	wireAPIServer         = "apiserver"
	wireAPIServerKubelet  = "apiserver-kubelet-client"
	wireAPIServerEtcd     = "apiserver-etcd-client"
	wireEtcdServer        = "etcd-server"
	wireEtcdPeer          = "etcd-peer"
	wireAdmin             = "admin"
	wireControllerManager = "controller-manager"
	wireScheduler         = "scheduler"
	wireKwok              = "kwok"
)

func bundlePairs(b *certs.Bundle) map[string]*certs.KeyPair {
	return map[string]*certs.KeyPair{
		wireAPIServer: &b.APIServer, wireAPIServerKubelet: &b.APIServerKubeletClient,
		wireAPIServerEtcd: &b.APIServerEtcdClient, wireEtcdServer: &b.EtcdServer, wireEtcdPeer: &b.EtcdPeer,
		wireAdmin: &b.Admin, wireControllerManager: &b.ControllerManager, wireScheduler: &b.Scheduler, wireKwok: &b.Kwok,
	}
}

// WireBundle is a bundle as the start RPC carries it: the CA's
// certificate without its key, every pair with its key.
func WireBundle(b *certs.Bundle) nodeapi.COECertBundle {
	w := nodeapi.COECertBundle{CACert: string(b.CA.CertPEM()), Pairs: map[string]nodeapi.COEKeyPair{},
		ServiceAccount: nodeapi.COEKeyPair{Cert: string(b.ServiceAccount.PublicPEM), Key: b.ServiceAccount.PrivatePEM.Reveal()}}
	for role, kp := range bundlePairs(b) {
		w.Pairs[role] = nodeapi.COEKeyPair{Cert: string(kp.CertPEM), Key: kp.KeyPEM.Reveal()}
	}
	return w
}

// BundleFromWire reads a bundle back from the start RPC; its CA is a
// trust anchor only. A pair missing is an Inval error.
func BundleFromWire(w nodeapi.COECertBundle) (*certs.Bundle, error) {
	ca, err := certs.TrustAnchor([]byte(w.CACert))
	if err != nil {
		return nil, err
	}
	b := &certs.Bundle{CA: ca, Nodes: map[string]certs.KeyPair{}}
	for role, dst := range bundlePairs(b) {
		kp, ok := w.Pairs[role]
		if !ok || kp.Cert == "" || kp.Key == "" {
			return nil, ecode.Errorf(ecode.Inval, "controlplane: the certificate bundle has no %s pair", role)
		}
		*dst = certs.KeyPair{CertPEM: []byte(kp.Cert), KeyPEM: secret.Secret(kp.Key)}
	}
	if w.ServiceAccount.Cert == "" || w.ServiceAccount.Key == "" {
		return nil, ecode.Errorf(ecode.Inval, "controlplane: the certificate bundle has no service account key")
	}
	b.ServiceAccount = certs.ServiceAccountKey{PublicPEM: []byte(w.ServiceAccount.Cert), PrivatePEM: secret.Secret(w.ServiceAccount.Key)}
	return b, nil
}
