package pki

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestNewDomainSecret(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{40}$`)
	a, b := NewDomainSecret(), NewDomainSecret()
	if !re.MatchString(a.Reveal()) {
		t.Fatalf("domain secret %q is not 40 lowercase hex characters", a.Reveal())
	}
	if a == b {
		t.Fatal("two domain secrets are equal")
	}
}

func TestSecretFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster-domain-secret")
	s := NewDomainSecret()
	if err := WriteSecretFile(path, s); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o400)
	raw, _ := os.ReadFile(path)
	if string(raw) != s.Reveal()+"\n" {
		t.Fatalf("file holds %q", raw)
	}
	got, err := ReadSecretFile(path)
	if err != nil || got != s {
		t.Fatalf("ReadSecretFile = %v, %v", got, err)
	}
	// Replacing a read-only secret works (rename, not rewrite).
	s2 := NewDomainSecret()
	if err := WriteSecretFile(path, s2); err != nil {
		t.Fatal(err)
	}
	if got, _ := ReadSecretFile(path); got != s2 {
		t.Fatal("second write did not replace the secret")
	}
	if err := WriteSecretFile(path, "two\nlines"); err == nil {
		t.Fatal("multi-line secret written")
	}
	if err := WriteSecretFile(path, ""); err == nil {
		t.Fatal("empty secret written")
	}
}

func TestReadSecretFileFormats(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		content string
		want    string
		ok      bool
	}{
		{"abc\n", "abc", true},
		{"  abc \r\n", "abc", true},
		{"abc", "abc", true},
		{"abc\nsecond line\n", "abc", true},
		{"", "", false},
		{"\n\n", "", false},
	}
	for i, tc := range tests {
		path := filepath.Join(dir, "s"+string(rune('a'+i)))
		os.WriteFile(path, []byte(tc.content), 0o600)
		got, err := ReadSecretFile(path)
		if (err == nil) != tc.ok || got.Reveal() != tc.want {
			t.Errorf("ReadSecretFile(%q) = %q, %v", tc.content, got.Reveal(), err)
		}
	}
	if _, err := ReadSecretFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing file read")
	}
}
