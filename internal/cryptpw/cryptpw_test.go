package cryptpw

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

// specVectors are the test vectors published with the SHA-crypt
// specification (setting, password, result).
var specVectors = []struct{ setting, password, want string }{
	{"$5$saltstring", "Hello world!",
		"$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5"},
	{"$5$rounds=10000$saltstringsaltstring", "Hello world!",
		"$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA"},
	{"$5$rounds=5000$toolongsaltstring", "This is just a test",
		"$5$rounds=5000$toolongsaltstrin$Un/5jzAHMgOGZ5.mWJpuVolil07guHPvOW8mGRcvxa5"},
	{"$5$rounds=1400$anotherlongsaltstring", "a very much longer text to encrypt.  This one even stretches over morethan one line.",
		"$5$rounds=1400$anotherlongsalts$Rx.j8H.h8HjEDGomFU8bDkXm3XIUnzyxf12oP84Bnq1"},
	{"$5$rounds=77777$short", "we have a short salt string but not a short password",
		"$5$rounds=77777$short$JiO1O3ZpDAxGJeaDIuqCoEFysAe1mZNJRs3pw0KQRd/"},
	{"$5$rounds=123456$asaltof16chars..", "a short string",
		"$5$rounds=123456$asaltof16chars..$gP3VQ/6X7UUEW3HkBn2w1/Ptq2jxPyzV/cZKmF/wJvD"},
	{"$5$rounds=10$roundstoolow", "the minimum number is still observed",
		"$5$rounds=1000$roundstoolow$yfvwcWrQ8l/K0DAWyuPMDNHpIVlTQebY9l/gL972bIC"},

	{"$6$saltstring", "Hello world!",
		"$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1"},
	{"$6$rounds=10000$saltstringsaltstring", "Hello world!",
		"$6$rounds=10000$saltstringsaltst$OW1/O6BYHV6BcXZu8QVeXbDWra3Oeqh0sbHbbMCVNSnCM/UrjmM0Dp8vOuZeHBy/YTBmSK6H9qs/y3RnOaw5v."},
	{"$6$rounds=5000$toolongsaltstring", "This is just a test",
		"$6$rounds=5000$toolongsaltstrin$lQ8jolhgVRVhY4b5pZKaysCLi0QBxGoNeKQzQ3glMhwllF7oGDZxUhx1yxdYcz/e1JSbq3y6JMxxl8audkUEm0"},
	{"$6$rounds=1400$anotherlongsaltstring", "a very much longer text to encrypt.  This one even stretches over morethan one line.",
		"$6$rounds=1400$anotherlongsalts$POfYwTEok97VWcjxIiSOjiykti.o/pQs.wPvMxQ6Fm7I6IoYN3CmLs66x9t0oSwbtEW7o7UmJEiDwGqd8p4ur1"},
	{"$6$rounds=77777$short", "we have a short salt string but not a short password",
		"$6$rounds=77777$short$WuQyW2YR.hBNpjjRhpYD/ifIw05xdfeEyQoMxIXbkvr0gge1a1x3yRULJ5CCaUeOxFmtlcGZelFl5CxtgfiAc0"},
	{"$6$rounds=123456$asaltof16chars..", "a short string",
		"$6$rounds=123456$asaltof16chars..$BtCwjqMJGx5hrJhZywWvt0RLE8uZ4oPwcelCjmw2kSYu.Ec6ycULevoBK25fs2xXgMNrCzIMVcgEJAstJeonj1"},
	{"$6$rounds=10$roundstoolow", "the minimum number is still observed",
		"$6$rounds=1000$roundstoolow$kUMsbe306n21p9R.FRkW3IGn.S9NPN0x50YhH1xhLsPuWGsUSklZt58jaTfF4ZEQpyUNGc0dqbpBYYBaHHrsX."},
}

func TestSpecVectors(t *testing.T) {
	for _, v := range specVectors {
		got, err := Crypt(v.password, v.setting)
		if err != nil || got != v.want {
			t.Errorf("Crypt(%q, %q) = %q, %v\nwant %q", v.password, v.setting, got, err, v.want)
			continue
		}
		if strings.Contains(v.setting, "rounds=77777") || strings.Contains(v.setting, "rounds=123456") {
			continue // costly to repeat; the cheaper vectors check Verify
		}
		if !Verify(v.want, v.password) {
			t.Errorf("Verify(%q) of its own password = false", v.want)
		}
		if Verify(v.want, v.password+"x") || Verify(v.want, "") {
			t.Errorf("Verify(%q) accepts another password", v.want)
		}
		if strings.Contains(v.setting, "rounds=10$") && Verify(v.setting+"$"+got[strings.LastIndexByte(got, '$')+1:], v.password) {
			t.Errorf("Verify accepts %q, which is not the canonical string", v.setting)
		}
	}
}

func TestHashRoundTrips(t *testing.T) {
	for _, alg := range []Algorithm{SHA256, SHA512} {
		h1, err := Hash(alg, "s3cret pw")
		if err != nil {
			t.Fatal(err)
		}
		h2, _ := Hash(alg, "s3cret pw")
		if h1 == h2 {
			t.Errorf("two hashes of one password share a salt: %q", h1)
		}
		parts := strings.Split(h1, "$")
		wantLen := map[Algorithm]int{SHA256: 43, SHA512: 86}[alg]
		if got, _ := AlgorithmOf(h1); got != alg || len(parts) != 4 || len(parts[2]) != MaxSaltLen || len(parts[3]) != wantLen {
			t.Errorf("Hash(%s) = %q: want $id$<16 salt chars>$<%d chars>", alg, h1, wantLen)
		}
		if strings.Trim(parts[2]+parts[3], b64) != "" {
			t.Errorf("Hash(%s) = %q uses characters outside the crypt alphabet", alg, h1)
		}
		if !Verify(h1, "s3cret pw") || Verify(h1, "s3cret pW") || Verify(h1, "s3cret p") {
			t.Errorf("Verify(%q) does not tell the password apart", h1)
		}
		hr, err := HashRounds(alg, "pw", 1234)
		if err != nil || !strings.Contains(hr, "$rounds=1234$") || !Verify(hr, "pw") {
			t.Errorf("HashRounds(%s, 1234) = %q, %v", alg, hr, err)
		}
		hr, _ = HashRounds(alg, "pw", 3)
		if !strings.Contains(hr, "$rounds=1000$") || !Verify(hr, "pw") {
			t.Errorf("HashRounds(%s, 3) = %q, want clamped to 1000", alg, hr)
		}
	}
}

func TestRefusals(t *testing.T) {
	if _, err := Hash("md5", "pw"); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("Hash(md5) = %v, want an invalid-input error", err)
	}
	if _, err := ParseAlgorithm("SHA256"); err == nil {
		t.Error("ParseAlgorithm accepts SHA256 (Ironic's names are lower case)")
	}
	if a, err := ParseAlgorithm(""); a != SHA256 || err != nil {
		t.Errorf("ParseAlgorithm(\"\") = %q, %v", a, err)
	}
	if a, err := ParseAlgorithm("sha512"); a != SHA512 || err != nil {
		t.Errorf("ParseAlgorithm(sha512) = %q, %v", a, err)
	}
	long := strings.Repeat("a", MaxPasswordLen+1)
	for _, pw := range []string{long, "a\x00b"} {
		_, err := Hash(SHA256, pw)
		var ee *ecode.Error
		if !errors.As(err, &ee) || ee.Class != ecode.Inval || strings.Contains(ee.Msg, pw) {
			t.Errorf("Hash of a refused password: %v", err)
		}
	}
	if _, err := Hash(SHA256, long[1:]); err != nil {
		t.Errorf("Hash of %d bytes: %v", MaxPasswordLen, err)
	}
	good, _ := Crypt("pw", "$5$abc")
	for _, setting := range []string{
		"", "$1$abc", "$5", "$7$abc", "5$abc", "$5$ab!c", "$5$ab:c$", "$5$rounds=$abc",
		"$5$rounds=12", "$5$rounds=x$abc", "$5$rounds=-5$abc", "$5$rounds= 5$abc", "$5$rounds=+5$abc",
	} {
		if got, err := Crypt("pw", setting); err == nil {
			t.Errorf("Crypt(pw, %q) = %q, want refused", setting, got)
		} else if ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("Crypt(pw, %q): %v is not invalid input", setting, err)
		}
		if Verify(setting, "pw") {
			t.Errorf("Verify(%q) = true", setting)
		}
	}
	for _, bad := range []string{"$5$abc", "$5$abc$", good + "x", good[:len(good)-1], strings.Replace(good, "$5$", "$6$", 1)} {
		if Verify(bad, "pw") {
			t.Errorf("Verify(%q, pw) = true", bad)
		}
	}
}

func TestOverflowingRoundsClamp(t *testing.T) {
	_, _, rounds, custom, err := parseSetting("$5$rounds=99999999999999999999999$a")
	if err != nil || rounds != MaxRounds || !custom {
		t.Errorf("parseSetting of an overflowing rounds = %d, %v, %v", rounds, custom, err)
	}
	_, salt, rounds, custom, err := parseSetting("$6$rounds=0042$abcdefghijklmnopqrstu$rest")
	if err != nil || rounds != MinRounds || !custom || salt != "abcdefghijklmnop" {
		t.Errorf("parseSetting = %q, %d, %v, %v", salt, rounds, custom, err)
	}
}

// TestAgainstOpenSSL compares with `openssl passwd -5/-6`, an independent
// implementation of the same specification.
func TestAgainstOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed")
	}
	cases := []struct {
		alg       Algorithm
		salt, pwd string
	}{
		{SHA256, "saltstring", "Hello world!"},
		{SHA256, "abcdefghijklmnop", "a"}, // openssl cannot hash an empty password
		{SHA256, "./09AZaz", "pässwörd with spaces and $ and :"},
		{SHA256, "x", strings.Repeat("0123456789", 10)},
		{SHA512, "saltstring", "Hello world!"},
		{SHA512, "Q", strings.Repeat("long", 40)},
		{SHA512, "abcdefghijklmnop", "p"},
	}
	for _, c := range cases {
		flag := map[Algorithm]string{SHA256: "-5", SHA512: "-6"}[c.alg]
		// -stdin keeps the password out of the process list.
		cmd := exec.Command(openssl, "passwd", flag, "-salt", c.salt, "-stdin")
		cmd.Stdin = strings.NewReader(c.pwd + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl passwd %s: %v", flag, err)
		}
		want := strings.TrimSpace(string(out))
		v, _ := variantOf(c.alg)
		got, err := crypt(v, c.pwd, c.salt, DefaultRounds, false)
		if err != nil || got != want {
			t.Errorf("%s salt %q: got %q, %v; openssl %q", c.alg, c.salt, got, err, want)
		}
		if !Verify(want, c.pwd) {
			t.Errorf("Verify(openssl's %q) = false", want)
		}
	}
}

// TestAgainstSystemCrypt checks both ways against the system's crypt(3)
// through Python's crypt module, the library that verifies /etc/shadow
// entries: crypt(password, our hash) gives our hash back, and the hashes
// it makes verify here.
func TestAgainstSystemCrypt(t *testing.T) {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	if err := exec.Command(py, "-W", "ignore", "-c", "import crypt").Run(); err != nil {
		t.Skip("python3 has no crypt module")
	}
	// The script reads pairs of lines (password, setting) and prints
	// crypt(password, setting) for each.
	const script = `import crypt, sys
lines = sys.stdin.read().split("\n")
for i in range(0, len(lines) - 1, 2):
    print(crypt.crypt(lines[i], lines[i + 1]))
`
	type check struct {
		password, setting string
		ours              bool // setting is our full hash, else the system makes one
	}
	var checks []check
	pwds := []string{"Hello world!", "", "pässwörd", "with $ and : and spaces", strings.Repeat("x", MaxPasswordLen)}
	for _, alg := range []Algorithm{SHA256, SHA512} {
		for _, pw := range pwds {
			h, err := Hash(alg, pw)
			if err != nil {
				t.Fatal(err)
			}
			r, err := HashRounds(alg, pw, 1500)
			if err != nil {
				t.Fatal(err)
			}
			checks = append(checks, check{pw, h, true}, check{pw, r, true})
		}
	}
	for _, id := range []string{"$5$", "$6$"} {
		for _, pw := range pwds {
			checks = append(checks, check{pw, id + "SystemMadeSalt", false}, check{pw, id + "rounds=2000$SystemMadeSalt", false})
		}
	}
	var in strings.Builder
	for _, c := range checks {
		in.WriteString(c.password + "\n" + c.setting + "\n")
	}
	cmd := exec.Command(py, "-W", "ignore", "-c", script)
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python crypt: %v", err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(got) != len(checks) {
		t.Fatalf("python printed %d lines, want %d", len(got), len(checks))
	}
	for i, c := range checks {
		switch {
		case c.ours && got[i] != c.setting:
			t.Errorf("system crypt of our %q gives %q", c.setting, got[i])
		case !c.ours && (!strings.HasPrefix(got[i], c.setting[:3]) || !Verify(got[i], c.password)):
			t.Errorf("Verify(system crypt's %q) = false", got[i])
		}
	}
}

func FuzzCrypt(f *testing.F) {
	for _, v := range specVectors {
		if !strings.Contains(v.setting, "rounds=") || strings.Contains(v.setting, "rounds=1") {
			f.Add(v.password, v.setting)
		}
	}
	f.Add("", "$5$")
	f.Add("pw", "$6$rounds=1000$$")
	f.Add("pw", "$5$rounds=$")
	f.Fuzz(func(t *testing.T, password, setting string) {
		if _, _, rounds, _, err := parseSetting(setting); err == nil && rounds > 20000 {
			t.Skip("too many rounds for a fuzz run")
		}
		got, err := Crypt(password, setting)
		if err != nil {
			if got != "" || Verify(setting, password) {
				t.Fatalf("Crypt(%q, %q) failed with %v but gave %q or verified", password, setting, err, got)
			}
			return
		}
		alg, ok := AlgorithmOf(got)
		if want, _ := AlgorithmOf(setting); !ok || alg != want {
			t.Fatalf("Crypt(%q, %q) = %q changes the algorithm", password, setting, got)
		}
		again, err := Crypt(password, got)
		if err != nil || again != got {
			t.Fatalf("Crypt(%q, its own %q) = %q, %v", password, got, again, err)
		}
		if !Verify(got, password) {
			t.Fatalf("Verify(%q, %q) = false", got, password)
		}
		if Verify(got, password+"\x01") {
			t.Fatalf("Verify(%q) accepts another password", got)
		}
	})
}

func FuzzHashVerify(f *testing.F) {
	f.Add("Hello world!", true)
	f.Add("", false)
	f.Add(strings.Repeat("é", 200), true)
	f.Fuzz(func(t *testing.T, password string, sha512 bool) {
		alg := SHA256
		if sha512 {
			alg = SHA512
		}
		h, err := Hash(alg, password)
		valid := len(password) <= MaxPasswordLen && !strings.Contains(password, "\x00")
		if (err == nil) != valid {
			t.Fatalf("Hash(%d bytes) = %v", len(password), err)
		}
		if err != nil {
			return
		}
		if !Verify(h, password) {
			t.Fatalf("Verify(Hash(%q)) = false", password)
		}
		if Verify(h, password+"a") || (password != "" && Verify(h, password[1:])) {
			t.Fatalf("Verify(%q) accepts another password", h)
		}
	})
}

func BenchmarkHash(b *testing.B) {
	for _, alg := range []Algorithm{SHA256, SHA512} {
		b.Run(string(alg), func(b *testing.B) {
			for b.Loop() {
				if _, err := Hash(alg, "a rescue password"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
