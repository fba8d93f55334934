package master

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/rpc"
)

func TestRenewMasterCert(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("c1", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, key, err := pki.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	ip := net.IPv4(127, 0, 0, 2)
	certPEM, err := ca.Issue(pki.IssueRequest{CommonName: "node1", Role: pki.RoleMaster, DNSNames: []string{"node1"}, IPs: []net.IP{ip}, PublicKey: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	cp, kp := filepath.Join(dir, FileMasterCert), filepath.Join(dir, FileMasterKey)
	if err := pki.WriteKeyPair(cp, kp, certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	client, err := rpc.NewClient(certPEM, keyPEM, ca.CertPEM(), func() int64 { return 1 }, rpc.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	m := &masterCerts{ca: ca, client: client, certPath: cp, keyPath: kp}
	before := client.Certificate()

	serial, err := m.RenewMasterCert(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	newCert, _ := os.ReadFile(cp)
	newKey, _ := os.ReadFile(kp)
	pair, err := tls.X509KeyPair(newCert, newKey)
	if err != nil {
		t.Fatalf("master.pem and master.key do not match: %v", err)
	}
	leaf := pair.Leaf
	if leaf.SerialNumber.String() != serial {
		t.Errorf("reported serial %s, file holds %s", serial, leaf.SerialNumber)
	}
	old, _ := pki.ParseCertificatesPEM(certPEM)
	if leaf.SerialNumber.Cmp(old[0].SerialNumber) == 0 {
		t.Fatal("master.pem not renewed")
	}
	if role, _ := pki.RoleOf(leaf); role != pki.RoleMaster || leaf.Subject.CommonName != "node1" ||
		!slices.EqualFunc(leaf.IPAddresses, []net.IP{ip}, net.IP.Equal) || !slices.Contains(leaf.DNSNames, "node1") {
		t.Errorf("renewed as %s %v %v %v", leaf.Subject.CommonName, leaf.IPAddresses, leaf.DNSNames, role)
	}
	if now := client.Certificate(); now == before || now.Leaf.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
		t.Error("the RPC client does not present the renewed certificate")
	}
	if _, err := os.Stat(cp + ".new"); err == nil {
		t.Error("pending certificate left behind")
	}
}
