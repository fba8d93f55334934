package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// sxNow is the fixed "now" of tests that need no real clock; the checked-in
// fixture is valid then.
var sxNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// sxFixture is a certificate made by openssl and signed the way a Ganeti
// cluster signs, with rieTestCDS:
//
//	openssl req -x509 -newkey rsa:2048 -nodes -keyout k.pem -out c.pem \
//	    -subj /CN=node1.example.com -days 36500 -sha256
//	openssl x509 -in c.pem -outform PEM > canon.pem
//	H=$( (printf '%s' a1b2c3d4e5f60718; cat canon.pem) | openssl dgst -sha1 -hmac $CDS)
//	{ printf 'X-Ganeti-Signature: a1b2c3d4e5f60718/%s\n\n' $H; cat canon.pem; }
const sxFixture = "testdata/ganeti-signed-x509.pem"

// sxCert makes a quick self-signed P-256 certificate valid in
// [notBefore, notAfter], as PEM.
func sxCert(t testing.TB, cn string, notBefore, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(42),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return encodeCert(der)
}

// sxSplit returns the signed text's salt, digest and PEM, failing unless
// the text has exactly SignX509's layout.
func sxSplit(t testing.TB, signed string) (salt, digest, pemText string) {
	t.Helper()
	head, pemText, ok := strings.Cut(signed, "\n\n")
	if !ok {
		t.Fatalf("no empty line after the header in %q", signed)
	}
	v, ok := strings.CutPrefix(head, "X-Ganeti-Signature: ")
	if !ok {
		t.Fatalf("header %q", head)
	}
	salt, digest, ok = strings.Cut(v, "/")
	if !ok || !isHex(salt, 16) || !isHex(digest, 40) {
		t.Fatalf("header %q is not salt/hmac in lowercase hex", head)
	}
	return salt, digest, pemText
}

func TestSignX509RoundTrip(t *testing.T) {
	certPEM := sxCert(t, "node1", sxNow.Add(-time.Hour), sxNow.Add(time.Hour))
	signed, err := SignX509(rieTestCDS, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	salt, digest, pemText := sxSplit(t, signed)
	if pemText != string(certPEM) {
		t.Fatalf("signed PEM differs from the canonical one:\n%s", pemText)
	}
	if digest != Sha1Hmac(rieTestCDS, pemText, salt) {
		t.Fatal("HMAC is not over salt + canonical PEM")
	}
	cert, err := LoadSignedX509(rieTestCDS, signed, sxNow)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Subject.CommonName != "node1" {
		t.Fatalf("CN = %q", cert.Subject.CommonName)
	}
	again, err := SignX509(rieTestCDS, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	if again == signed {
		t.Fatal("two signatures share a salt")
	}
}

func TestSignX509SignsCanonicalForm(t *testing.T) {
	certPEM := sxCert(t, "node1", sxNow.Add(-time.Hour), sxNow.Add(time.Hour))
	messy := "a comment\r\n" + strings.ReplaceAll(string(certPEM), "\n", "\r\n")
	signed, err := SignX509(rieTestCDS, []byte(messy))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, pemText := sxSplit(t, signed); pemText != string(certPEM) {
		t.Fatalf("signed text is not canonical:\n%q", pemText)
	}
	for _, bad := range []string{"", "no pem here", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"} {
		_, err := SignX509(rieTestCDS, []byte(bad))
		if err == nil || ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("SignX509(%q) = %v, want an Inval error", bad, err)
		}
	}
}

func TestLoadSignedX509(t *testing.T) {
	notBefore, notAfter := sxNow.Add(-time.Hour), sxNow.Add(time.Hour)
	certPEM := sxCert(t, "node1", notBefore, notAfter)
	signed, err := SignX509(rieTestCDS, certPEM)
	if err != nil {
		t.Fatal(err)
	}
	salt, digest, pemText := sxSplit(t, signed)
	header := "X-Ganeti-Signature: " + salt + "/" + digest
	lines := strings.Split(strings.TrimSuffix(pemText, "\n"), "\n")
	// Change one base64 character in the certificate's own signature (the
	// last full line before END): the DER still parses, the HMAC must not
	// match.
	sigLine := len(lines) - 3
	tampered := append([]string(nil), lines...)
	tampered[sigLine] = flipBase64(tampered[sigLine], 10)
	tamperedPEM := strings.Join(tampered, "\n") + "\n"
	if _, err := x509.ParseCertificate(mustDecodePEM(t, tamperedPEM)); err != nil {
		t.Fatalf("tampered certificate no longer parses, the test needs another byte: %v", err)
	}
	otherPEM := sxCert(t, "node2", notBefore, notAfter)

	ok := []struct {
		name   string
		signed string
		now    time.Time
	}{
		{"as signed", signed, sxNow},
		{"uppercase hex digest", "X-Ganeti-Signature: " + salt + "/" + strings.ToUpper(digest) + "\n\n" + pemText, sxNow},
		// An uppercase salt is a different salt: it verifies only because
		// the salt was uppercase when signed, which this case recreates.
		{"uppercase salt signed", "X-Ganeti-Signature: ABCDEF01/" + Sha1Hmac(rieTestCDS, pemText, "ABCDEF01") + "\n\n" + pemText, sxNow},
		{"lowercase header name, no space", "x-ganeti-signature:" + salt + "/" + digest + "\n\n" + pemText, sxNow},
		{"indented header and trailing blanks", "  " + header + " \t\n" + pemText, sxNow},
		{"other headers first", "Subject: node1\nX-Other: 1\n" + header + "\n\n" + pemText, sxNow},
		{"CRLF", strings.ReplaceAll(header+"\n\n"+pemText, "\n", "\r\n"), sxNow},
		{"no newline at end", header + "\n\n" + strings.TrimSuffix(pemText, "\n"), sxNow},
		{"old block label", header + "\n\n" + strings.ReplaceAll(pemText, "CERTIFICATE", "X509 CERTIFICATE"), sxNow},
		{"at NotAfter", signed, notAfter},
		{"starts within the clock skew", signed, notBefore.Add(-signedX509ClockSkew + time.Second)},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			cert, err := LoadSignedX509(rieTestCDS, c.signed, c.now)
			if err != nil {
				t.Fatalf("LoadSignedX509: %v", err)
			}
			if !bytes.Equal(encodeCert(cert.Raw), certPEM) {
				t.Fatal("loaded another certificate")
			}
		})
	}

	bad := []struct {
		name   string
		cds    string
		signed string
		now    time.Time
		want   string
	}{
		{"wrong secret", "other", signed, sxNow, "X509 certificate signature is invalid: the clusters may not share the same domain secret"},
		{"missing header", "", pemText, sxNow, "X509 certificate signature is missing"},
		{"header after BEGIN", "", pemText + header + "\n", sxNow, "signature is missing"},
		{"header after a --- line", "", "--- note\n" + header + "\n\n" + pemText, sxNow, "signature is missing"},
		{"header without salt", "", "X-Ganeti-Signature: /" + digest + "\n\n" + pemText, sxNow, "signature is missing"},
		{"header with hyphenated salt", "", "X-Ganeti-Signature: a-b/" + digest + "\n\n" + pemText, sxNow, "signature is missing"},
		{"header with trailing text", "", header + " x\n\n" + pemText, sxNow, "signature is missing"},
		{"tampered PEM byte", "", header + "\n\n" + tamperedPEM, sxNow, "signature is invalid"},
		{"tampered salt", "", "X-Ganeti-Signature: " + flipHex(salt, 3) + "/" + digest + "\n\n" + pemText, sxNow, "signature is invalid"},
		{"tampered hmac", "", "X-Ganeti-Signature: " + salt + "/" + flipHex(digest, 20) + "\n\n" + pemText, sxNow, "signature is invalid"},
		{"truncated hmac", "", "X-Ganeti-Signature: " + salt + "/" + digest[:39] + "\n\n" + pemText, sxNow, "signature is invalid"},
		{"another certificate", "", header + "\n\n" + string(otherPEM), sxNow, "signature is invalid"},
		{"no certificate", "", header + "\n\nnothing here\n", sxNow, "no PEM X509 certificate"},
		{"not a certificate", "", header + "\n\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", sxNow, "Invalid X509 certificate"},
		{"expired", "", signed, notAfter.Add(time.Second), "X509 certificate expired at " + notAfter.Format(time.RFC3339)},
		{"not yet valid", "", signed, notBefore.Add(-signedX509ClockSkew - time.Second), "not valid before " + notBefore.Format(time.RFC3339)},
		{"too long", "", header + "\n" + strings.Repeat("x", maxSignedX509Len) + "\n" + pemText, sxNow, "too long"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			cds := rieTestCDS
			if c.cds == "other" {
				cds = rieOtherCDS
			}
			cert, err := LoadSignedX509(cds, c.signed, c.now)
			if cert != nil {
				t.Error("certificate returned with an error")
			}
			wantInval(t, err, c.want)
		})
	}
}

func flipBase64(s string, i int) string {
	b := []byte(s)
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func mustDecodePEM(t testing.TB, s string) []byte {
	t.Helper()
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		t.Fatalf("no PEM block in %q", s)
	}
	return block.Bytes
}

func TestLoadSignedX509GanetiFixture(t *testing.T) {
	data, err := os.ReadFile(sxFixture)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := LoadSignedX509(rieTestCDS, string(data), sxNow)
	if err != nil {
		t.Fatalf("fixture signed with openssl does not verify: %v", err)
	}
	if cert.Subject.CommonName != "node1.example.com" {
		t.Fatalf("CN = %q", cert.Subject.CommonName)
	}
	if _, err := LoadSignedX509(rieOtherCDS, string(data), sxNow); err == nil {
		t.Fatal("fixture verifies with another secret")
	}
	// The same signature over a reformatted PEM: CRLF line ends and a
	// comment before BEGIN. The HMAC covers the canonical form, so it holds.
	crlf := strings.ReplaceAll(string(data), "\n", "\r\n")
	head, body, _ := strings.Cut(string(data), "\n\n")
	commented := head + "\nIssued for a test\n  (any text)\n" + body
	for name, s := range map[string]string{"CRLF": crlf, "comment": commented} {
		if _, err := LoadSignedX509(rieTestCDS, s, sxNow); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// And our own signature over the same certificate is what openssl made
	// but for the salt.
	salt, _, _ := strings.Cut(strings.TrimPrefix(head, "X-Ganeti-Signature: "), "/")
	if got := head[strings.Index(head, "/")+1:]; got != Sha1Hmac(rieTestCDS, body, salt) {
		t.Fatalf("fixture HMAC %s differs from Sha1Hmac over salt + PEM", got)
	}
}

func requireOpenSSL(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not in PATH")
	}
}

func runOpenSSL(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("openssl", args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// opensslCert makes an RSA certificate with openssl req and returns it as
// openssl writes it and as openssl re-dumps it (Ganeti's canonical form).
func opensslCert(t *testing.T) (reqPEM, canonical []byte) {
	t.Helper()
	dir := t.TempDir()
	certPath := filepath.Join(dir, "cert.pem")
	runOpenSSL(t, nil, "req", "-x509", "-newkey", "rsa:2048", "-nodes",
		"-keyout", filepath.Join(dir, "key.pem"), "-out", certPath,
		"-subj", "/CN=node9.example.com", "-days", "2")
	reqPEM, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatal(err)
	}
	canonical = runOpenSSL(t, nil, "x509", "-in", certPath, "-outform", "PEM")
	return reqPEM, canonical
}

// opensslHmac is `printf '%s' "<salt><msg>" | openssl dgst -sha1 -hmac <cds>`.
func opensslHmac(t *testing.T, salt, msg string) string {
	t.Helper()
	out := strings.TrimSpace(string(runOpenSSL(t, []byte(salt+msg), "dgst", "-sha1", "-hmac", rieTestCDS.Reveal())))
	i := strings.LastIndex(out, "= ")
	if i < 0 {
		t.Fatalf("unexpected openssl dgst output %q", out)
	}
	return out[i+2:]
}

func TestSignX509MatchesOpenSSL(t *testing.T) {
	requireOpenSSL(t)
	reqPEM, canonical := opensslCert(t)
	signed, err := SignX509(rieTestCDS, reqPEM)
	if err != nil {
		t.Fatal(err)
	}
	salt, digest, pemText := sxSplit(t, signed)
	if pemText != string(canonical) {
		t.Fatalf("our canonical PEM differs from openssl's:\n%s\nvs\n%s", pemText, canonical)
	}
	if want := opensslHmac(t, salt, string(canonical)); digest != want {
		t.Fatalf("HMAC = %s, openssl dgst says %s", digest, want)
	}
}

func TestLoadSignedX509OpenSSLSigned(t *testing.T) {
	requireOpenSSL(t)
	reqPEM, canonical := opensslCert(t)
	const salt = "0a1b2c3d4e5f6789"
	header := "X-Ganeti-Signature: " + salt + "/" + opensslHmac(t, salt, string(canonical))
	// openssl x509 -text prints a dump of the certificate before its PEM: a
	// non-canonical text the signature must survive.
	textDump := runOpenSSL(t, reqPEM, "x509", "-text")
	now := time.Now()
	for name, s := range map[string]string{
		"canonical":   header + "\n\n" + string(canonical),
		"as req made": header + "\n\n" + string(reqPEM),
		"CRLF":        strings.ReplaceAll(header+"\n\n"+string(canonical), "\n", "\r\n"),
		"text dump":   header + "\n" + string(textDump),
	} {
		cert, err := LoadSignedX509(rieTestCDS, s, now)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if cert.Subject.CommonName != "node9.example.com" {
			t.Errorf("%s: CN = %q", name, cert.Subject.CommonName)
		}
	}
	if _, err := LoadSignedX509(rieOtherCDS, header+"\n\n"+string(canonical), now); err == nil {
		t.Fatal("openssl-signed certificate verifies with another secret")
	}
}

func TestNewTransferCert(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	cases := []struct {
		cn       string
		validity time.Duration
		wantLife time.Duration
		ip       net.IP
	}{
		{"node1.example.com", 24 * time.Hour, 24 * time.Hour, nil},
		{"192.0.2.7", 30 * 24 * time.Hour, 7 * 24 * time.Hour, net.ParseIP("192.0.2.7")},
	}
	for _, c := range cases {
		t.Run(c.cn, func(t *testing.T) {
			certPEM, keyPEM, err := NewTransferCert(c.cn, c.validity, now)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := x509.ParseCertificate(mustDecodePEM(t, string(certPEM)))
			if err != nil {
				t.Fatal(err)
			}
			if cert.Subject.CommonName != c.cn || cert.Issuer.CommonName != c.cn {
				t.Errorf("subject %q issuer %q, want CN %q", cert.Subject, cert.Issuer, c.cn)
			}
			pub, ok := cert.PublicKey.(*rsa.PublicKey)
			if !ok || pub.N.BitLen() != 2048 {
				t.Errorf("public key %T is not RSA 2048", cert.PublicKey)
			}
			if cert.SignatureAlgorithm != x509.SHA256WithRSA {
				t.Errorf("signature algorithm %v", cert.SignatureAlgorithm)
			}
			if err := cert.CheckSignature(cert.SignatureAlgorithm, cert.RawTBSCertificate, cert.Signature); err != nil {
				t.Errorf("not self-signed: %v", err)
			}
			if cert.SerialNumber.Int64() != now.Unix() {
				t.Errorf("serial %v, want %d", cert.SerialNumber, now.Unix())
			}
			if !cert.NotBefore.Equal(now.Add(-time.Minute)) || !cert.NotAfter.Equal(now.Add(c.wantLife)) {
				t.Errorf("valid %s to %s, want %s to %s", cert.NotBefore, cert.NotAfter, now.Add(-time.Minute), now.Add(c.wantLife))
			}
			// The first name is the node's; the second is the one Ganeti
			// 3.0's exporter checks.
			if !slices.Equal(cert.DNSNames, []string{c.cn, GanetiTransferName}) {
				t.Errorf("DNS names %v", cert.DNSNames)
			}
			if !IsCorralTransferCert(cert) {
				t.Errorf("unit %v does not mark Corral's stream", cert.Subject.OrganizationalUnit)
			}
			if c.ip != nil && (len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(c.ip)) || c.ip == nil && len(cert.IPAddresses) != 0 {
				t.Errorf("IP addresses %v, want %v", cert.IPAddresses, c.ip)
			}
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Errorf("key does not match: %v", err)
			}
			// The peer pins the certificate itself as its only root and
			// uses it for both ends of the connection.
			pool := x509.NewCertPool()
			pool.AddCert(cert)
			for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
				_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: c.cn, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{usage}})
				if err != nil {
					t.Errorf("verify for usage %v: %v", usage, err)
				}
			}
			// It travels signed, and arrives intact.
			signed, err := SignX509(rieTestCDS, certPEM)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := LoadSignedX509(rieTestCDS, signed, now); err != nil {
				t.Errorf("signed transfer certificate does not load: %v", err)
			}
		})
	}
}

func TestNewTransferCertRejects(t *testing.T) {
	cases := []struct {
		cn       string
		validity time.Duration
		now      time.Time
		want     string
	}{
		{"", time.Hour, sxNow, "neither a host name nor an IP address"},
		{"a b", time.Hour, sxNow, "neither a host name nor an IP address"},
		{"node1", 0, sxNow, "not positive"},
		{"node1", -time.Hour, sxNow, "not positive"},
		{"node1", time.Hour, time.Unix(0, 0), "before 1970"},
	}
	for _, c := range cases {
		_, _, err := NewTransferCert(c.cn, c.validity, c.now)
		wantInval(t, err, c.want)
	}
}

// FuzzLoadSignedX509 never panics, fails only with Inval errors, and
// whatever it accepts is a certificate that verifies again, both as given
// and once re-signed.
func FuzzLoadSignedX509(f *testing.F) {
	fixture, err := os.ReadFile(sxFixture)
	if err != nil {
		f.Fatal(err)
	}
	certPEM := sxCert(f, "node1", sxNow.Add(-time.Hour), sxNow.Add(time.Hour))
	signed, err := SignX509(rieTestCDS, certPEM)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(fixture))
	f.Add(signed)
	f.Add(strings.ReplaceAll(signed, "\n", "\r\n"))
	f.Add(strings.ToLower(signed[:60]) + signed[60:])
	f.Add(string(certPEM))
	f.Add("X-Ganeti-Signature: a/b\n\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	f.Add("X-Ganeti-Signature:\n---")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		cert, err := LoadSignedX509(rieTestCDS, s, sxNow)
		if err != nil {
			if cert != nil {
				t.Fatal("certificate returned with an error")
			}
			if ecode.ClassOf(err) != ecode.Inval {
				t.Fatalf("error class %s: %v", ecode.ClassOf(err), err)
			}
			return
		}
		again, err := LoadSignedX509(rieTestCDS, s, sxNow)
		if err != nil || !bytes.Equal(again.Raw, cert.Raw) {
			t.Fatalf("accepted once, then %v", err)
		}
		resigned, err := SignX509(rieTestCDS, encodeCert(cert.Raw))
		if err != nil {
			t.Fatalf("re-sign: %v", err)
		}
		back, err := LoadSignedX509(rieTestCDS, resigned, sxNow)
		if err != nil || !bytes.Equal(back.Raw, cert.Raw) {
			t.Fatalf("re-signed certificate does not verify: %v", err)
		}
	})
}
