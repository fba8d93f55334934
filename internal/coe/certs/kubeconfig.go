package certs

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/secret"
)

// Kubeconfig is a kubeconfig file (YAML, the shape Magnum's `cluster
// config` writes) with one cluster, one user and one context named after
// the cluster, everything embedded. The user is named after the client
// certificate's common name ("admin" for the admin certificate). It holds
// the client key, hence a Secret.
func Kubeconfig(cluster, server string, caPEM, certPEM []byte, keyPEM secret.Secret) (secret.Secret, error) {
	if cluster == "" {
		return "", ecode.Errorf(ecode.Inval, "kubeconfig: cluster name is empty")
	}
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", ecode.Errorf(ecode.Inval, "kubeconfig: server %q is not an https URL", server)
	}
	if _, err := pki.ParseCertificatesPEM(caPEM); err != nil {
		return "", ecode.Errorf(ecode.Inval, "kubeconfig: CA certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, []byte(keyPEM.Reveal()))
	if err != nil {
		return "", ecode.Errorf(ecode.Inval, "kubeconfig: client certificate and key: %w", err)
	}
	user := pair.Leaf.Subject.CommonName
	if user == "" {
		return "", ecode.Errorf(ecode.Inval, "kubeconfig: client certificate has no common name")
	}
	b64 := base64.StdEncoding.EncodeToString
	var sb strings.Builder
	w := func(indent, key string, val string) {
		sb.WriteString(indent + key + ": " + yamlString(val) + "\n")
	}
	sb.WriteString("apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n")
	w("    ", "certificate-authority-data", b64(caPEM))
	w("    ", "server", server)
	w("  ", "name", cluster)
	sb.WriteString("users:\n")
	w("- ", "name", user)
	sb.WriteString("  user:\n")
	w("    ", "client-certificate-data", b64(certPEM))
	w("    ", "client-key-data", b64([]byte(keyPEM.Reveal())))
	sb.WriteString("contexts:\n- context:\n")
	w("    ", "cluster", cluster)
	w("    ", "user", user)
	w("  ", "name", cluster)
	w("", "current-context", cluster)
	return secret.Secret(sb.String()), nil
}

// yamlString quotes s as a YAML double-quoted scalar: JSON's string syntax
// is a subset of it, so names with colons, quotes or newlines stay intact.
func yamlString(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return string(b)
}
