package sshkeys

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	keygen, _ := exec.LookPath("ssh-keygen")
	for _, tc := range []struct {
		typ  string
		bits int
		algo string
	}{
		{TypeRSA, 2048, "ssh-rsa"},
		{TypeECDSA, 0, "ecdsa-sha2-nistp256"},
		{TypeECDSA, 384, "ecdsa-sha2-nistp384"},
		{TypeECDSA, 521, "ecdsa-sha2-nistp521"},
		{TypeED25519, 0, "ssh-ed25519"},
	} {
		t.Run(tc.algo, func(t *testing.T) {
			p, err := Generate(tc.typ, tc.bits, "root@node1")
			if err != nil {
				t.Fatal(err)
			}
			k, err := ParsePublic(p.Public)
			if err != nil {
				t.Fatal(err)
			}
			if k.Algo != tc.algo || k.Comment != "root@node1" {
				t.Fatalf("public key %q: algo %s comment %q", p.Public, k.Algo, k.Comment)
			}
			fromPriv, err := PublicFromPrivate(p.Private)
			if err != nil {
				t.Fatal(err)
			}
			if !SameKey(fromPriv, p.Public) {
				t.Fatalf("private key holds %q, public is %q", fromPriv, p.Public)
			}
			if keygen == "" {
				return
			}
			dir := t.TempDir()
			priv := filepath.Join(dir, FileName(tc.typ))
			if err := os.WriteFile(priv, p.Private, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(priv+".pub", []byte(p.Public+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			// ssh-keygen must derive the same public key from our private
			// key, and fingerprint the public one as we do.
			out, err := exec.Command(keygen, "-y", "-f", priv).CombinedOutput()
			if err != nil {
				t.Fatalf("ssh-keygen -y: %v: %s", err, out)
			}
			if !SameKey(strings.TrimSpace(string(out)), p.Public) {
				t.Fatalf("ssh-keygen -y gives %q, want %q", out, p.Public)
			}
			out, err = exec.Command(keygen, "-l", "-E", "sha256", "-f", priv+".pub").CombinedOutput()
			if err != nil {
				t.Fatalf("ssh-keygen -l: %v: %s", err, out)
			}
			if !strings.Contains(string(out), k.Fingerprint()) {
				t.Fatalf("ssh-keygen -l gives %q, we compute %s", out, k.Fingerprint())
			}
		})
	}
}

func TestCheckType(t *testing.T) {
	for _, tc := range []struct {
		typ  string
		bits int
		want int
		err  string
	}{
		{"rsa", 0, 2048, ""},
		{"rsa", 4096, 4096, ""},
		{"rsa", 1024, 0, "2048 to 16384"},
		{"ecdsa", 0, 256, ""},
		{"ecdsa", 300, 0, "256, 384 or 521"},
		{"ed25519", 0, 256, ""},
		{"ed25519", 1024, 0, "fixed size"},
		{"dsa", 1024, 0, "not supported"},
		{"blowfish", 0, 0, "unknown SSH key type"},
	} {
		got, err := CheckType(tc.typ, tc.bits)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s/%d: error %v, want %q", tc.typ, tc.bits, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s/%d: %d, %v; want %d", tc.typ, tc.bits, got, err, tc.want)
		}
	}
}

func TestParsePublicRejects(t *testing.T) {
	ed, _ := Generate(TypeED25519, 0, "")
	blob := strings.Fields(ed.Public)[1]
	for _, line := range []string{
		"", "ssh-ed25519", "ssh-foo " + blob, "ssh-rsa " + blob, "ssh-ed25519 !!!", "ssh-ed25519 AAAA",
	} {
		if _, err := ParsePublic(line); err == nil {
			t.Errorf("%q parsed", line)
		}
	}
}

func FuzzParsePublic(f *testing.F) {
	ed, _ := Generate(TypeED25519, 0, "root@n1")
	f.Add(ed.Public)
	f.Add("ssh-rsa AAAAB3NzaC1yc2E= x")
	f.Add("ecdsa-sha2-nistp256 AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, line string) {
		k, err := ParsePublic(line)
		if err != nil {
			return
		}
		// What parses must parse again from its canonical form to the
		// same key.
		k2, err := ParsePublic(k.Line())
		if err != nil || k2.Line() != k.Line() {
			t.Fatalf("%q: canonical %q does not round-trip: %v", line, k.Line(), err)
		}
	})
}

func FuzzPublicFromPrivate(f *testing.F) {
	ed, _ := Generate(TypeED25519, 0, "c")
	f.Add(ed.Private)
	f.Add([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEA\n-----END OPENSSH PRIVATE KEY-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = PublicFromPrivate(data) // must not panic
	})
}
