package nodeapi

// Node RPCs that renew a node daemon's TLS certificate. The new private key
// is made on the node and never leaves it: the node answers a certificate
// request, the master signs it with the cluster CA and sends the
// certificate back, and the node switches to it for new connections.
const (
	// NodeCertCSR makes a new key beside the current one (or reuses the
	// one already staged) and returns a certificate request for it, with
	// the certificate in use.
	NodeCertCSR = "node_cert_csr"
	// NodeCertInstall checks a signed certificate against the staged key
	// and the node's CA bundle, records it as node.pem/node.key and serves
	// it from the next connection on.
	NodeCertInstall = "node_cert_install"
)

// NodeCertCSRReply is the node's request for a new certificate.
type NodeCertCSRReply struct {
	// CSR is a PEM certificate request signed by the staged key.
	CSR string `json:"csr"`
	// Current is the certificate the node serves now (PEM): the master
	// renews it for the same name, role and addresses.
	Current string `json:"current"`
}

// NodeCertInstallArgs carries the signed certificate (PEM).
type NodeCertInstallArgs struct {
	Cert string `json:"cert"`
}

// NodeCertInstallReply reports the certificate now served.
type NodeCertInstallReply struct {
	Serial string `json:"serial"`
	// Installed is false when the certificate was in place already (a
	// repeated call).
	Installed bool `json:"installed"`
}
