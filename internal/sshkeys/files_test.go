package sshkeys

import (
	"slices"
	"strings"
	"testing"
)

func keys(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		p, err := Generate(TypeED25519, 0, "root@n")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Public)
	}
	return out
}

func TestPubKeysRoundTrip(t *testing.T) {
	k := keys(t, 3)
	in := "\nuuid-b " + k[1] + "\nuuid-a " + k[0] + "\nuuid-a " + k[2] + "\nuuid-a " + k[0] + "\n\n"
	p, err := ParsePubKeys(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(p["uuid-a"]) != 2 || len(p["uuid-b"]) != 1 {
		t.Fatalf("parsed %v", p)
	}
	want := "uuid-a " + k[0] + "\nuuid-a " + k[2] + "\nuuid-b " + k[1] + "\n"
	if p.String() != want {
		t.Fatalf("rendered %q, want %q", p.String(), want)
	}
	if !p.Has(strings.TrimSuffix(k[2], " root@n")) || p.Has(keys(t, 1)[0]) {
		t.Fatal("Has answers wrongly")
	}
	for _, bad := range []string{"uuid-only", "uuid ssh-rsa", "uuid not-a-key AAAA"} {
		if _, err := ParsePubKeys(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestSetBlock(t *testing.T) {
	k := keys(t, 4)
	admin := "ssh-ed25519 " + strings.Fields(k[3])[1] + " admin@laptop"
	cur := "# my keys\n" + admin + "\n"
	got := SetBlock(cur, k[:2], nil)
	if !strings.HasPrefix(got, cur) || !slices.Equal(Block(got), k[:2]) {
		t.Fatalf("first block:\n%s", got)
	}
	// Replacing the block keeps the administrator's lines, once.
	got = SetBlock(got, k[2:3], nil)
	if strings.Count(got, admin) != 1 || !slices.Equal(Block(got), k[2:3]) || strings.Contains(got, k[0]) {
		t.Fatalf("replaced block:\n%s", got)
	}
	// An empty set removes the block; a dropped key goes even outside it.
	got = SetBlock(got, nil, []string{k[3]})
	if got != "# my keys\n" {
		t.Fatalf("cleared:\n%q", got)
	}
	withOpts := `from="10.0.0.1" ` + k[0] + "\n"
	if got := SetBlock(withOpts, nil, []string{k[0]}); got != "" {
		t.Fatalf("a key with options was not dropped: %q", got)
	}
}

func FuzzParsePubKeys(f *testing.F) {
	p, _ := Generate(TypeED25519, 0, "root@n1")
	f.Add("uuid-1 " + p.Public + "\n")
	f.Add("\n\nx y\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, data string) {
		pk, err := ParsePubKeys(data)
		if err != nil {
			return
		}
		again, err := ParsePubKeys(pk.String())
		if err != nil || again.String() != pk.String() {
			t.Fatalf("%q does not round-trip: %v", data, err)
		}
	})
}

func FuzzSetBlock(f *testing.F) {
	p, _ := Generate(TypeED25519, 0, "root@n1")
	f.Add("# admin\n"+p.Public+"\n", p.Public)
	f.Add(BlockBegin+"\nx\n", "")
	f.Fuzz(func(t *testing.T, cur, key string) {
		if strings.ContainsAny(key, "\n\r") || strings.TrimSpace(key) == "" || key == BlockBegin || key == BlockEnd {
			return
		}
		out := SetBlock(cur, []string{key}, nil)
		if b := Block(out); !slices.Contains(b, key) {
			t.Fatalf("block of %q lacks %q: %q", out, key, b)
		}
		// Setting the same block again changes nothing.
		if again := SetBlock(out, []string{key}, nil); again != out {
			t.Fatalf("not idempotent: %q then %q", out, again)
		}
	})
}
