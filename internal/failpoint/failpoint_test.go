package failpoint

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	known := append(MasterPoints(), NodePoints()...)
	tests := []struct {
		spec    string
		want    string // String() of the set; "" for none armed
		wantErr string // part of the error message
	}{
		{spec: "", want: ""},
		{spec: "   ", want: ""},
		{spec: "step-committed=3", want: "step-committed=3"},
		{spec: "step-committed=3,rpc-returned=1", want: "rpc-returned=1,step-committed=3"},
		{spec: " rpc-returned = 2 , step-committed=1 ", want: "rpc-returned=2,step-committed=1"},
		{spec: "step-began=2,step-committed=1", want: "step-began=2,step-committed=1"},
		{spec: "node-instance-started=1073741824", want: "node-instance-started=1073741824"},
		{spec: "no-such-point=1", wantErr: `unknown failpoint "no-such-point"`},
		{spec: "step-committed", wantErr: "has no count"},
		{spec: "step-committed=", wantErr: "is not a whole number"},
		{spec: "step-committed=0", wantErr: "is not a whole number"},
		{spec: "step-committed=-2", wantErr: "is not a whole number"},
		{spec: "step-committed=1x", wantErr: "is not a whole number"},
		{spec: "step-committed=1073741825", wantErr: "is not a whole number"},
		{spec: "step-committed=1,step-committed=2", wantErr: "given twice"},
		{spec: "step-committed=1,", wantErr: "empty entry"},
		{spec: ",step-committed=1", wantErr: "empty entry"},
		{spec: "=1", wantErr: `unknown failpoint ""`},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			s, err := Parse(tc.spec, known...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Parse(%q) = %v, %v; want error containing %q", tc.spec, s, err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), EnvVar) {
					t.Fatalf("error %q does not name %s", err, EnvVar)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.spec, err)
			}
			if got := s.String(); got != tc.want {
				t.Fatalf("Parse(%q).String() = %q, want %q", tc.spec, got, tc.want)
			}
			if s.Armed() != (tc.want != "") {
				t.Fatalf("Parse(%q).Armed() = %v", tc.spec, s.Armed())
			}
		})
	}
}

// A daemon rejects the other daemon's points: they would never fire.
func TestParseKnownPerDaemon(t *testing.T) {
	if _, err := Parse("node-instance-start=1", MasterPoints()...); err == nil {
		t.Fatal("corrald accepted a node failpoint")
	}
	if _, err := Parse("step-committed=1", NodePoints()...); err == nil {
		t.Fatal("corral-node accepted a master failpoint")
	}
}

func TestLoad(t *testing.T) {
	env := map[string]string{EnvVar: "rpc-returned=4"}
	s, err := Load(func(k string) string { return env[k] }, MasterPoints()...)
	if err != nil {
		t.Fatal(err)
	}
	if s.String() != "rpc-returned=4" {
		t.Fatalf("loaded %q", s)
	}
	s, err = Load(func(string) string { return "" }, MasterPoints()...)
	if err != nil || s.Armed() {
		t.Fatalf("empty environment: %v armed=%v", err, s.Armed())
	}
}

// testSet parses spec and records kills instead of dying.
func testSet(t *testing.T, spec string) (*Set, *[]string, *bytes.Buffer) {
	t.Helper()
	s, err := Parse(spec, MasterPoints()...)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kills []string
	out := &bytes.Buffer{}
	s.out = out
	s.die = func() {
		mu.Lock()
		kills = append(kills, out.String())
		mu.Unlock()
	}
	return s, &kills, out
}

func TestHitKillsOnTheNthHit(t *testing.T) {
	s, kills, _ := testSet(t, "step-committed=3,rpc-returned=1")
	s.Hit(StepCommitted)
	s.Hit(StepCommitted)
	s.Hit(NodeInstanceStart) // not armed here: ignored
	if len(*kills) != 0 {
		t.Fatalf("killed before the third hit: %q", *kills)
	}
	s.Hit(StepCommitted)
	if len(*kills) != 1 || (*kills)[0] != "failpoint step-committed hit 3: killing the process\n" {
		t.Fatalf("third hit: kills %q", *kills)
	}
	s.Hit(StepCommitted) // a later hit never kills again
	s.Hit(RPCReturned)
	if len(*kills) != 2 || !strings.HasSuffix((*kills)[1], "failpoint rpc-returned hit 1: killing the process\n") {
		t.Fatalf("rpc-returned: kills %q", *kills)
	}
}

func TestHitConcurrentKillsOnce(t *testing.T) {
	s, kills, _ := testSet(t, "rpc-returned=50")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				s.Hit(RPCReturned)
			}
		}()
	}
	wg.Wait()
	if len(*kills) != 1 {
		t.Fatalf("200 concurrent hits of a point armed at 50 killed %d times", len(*kills))
	}
}

func TestNilSetIsInert(t *testing.T) {
	var s *Set
	s.Hit(StepCommitted)
	if s.Armed() || s.String() != "" {
		t.Fatal("nil set reports armed points")
	}
}

// childEnv makes the test binary act as a process that hits a failpoint.
const childEnv = "CORRAL_FAILPOINT_TEST_CHILD"

// TestMain lets the test binary run as the child of TestHitKillsTheProcess.
func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		os.Exit(child(dir))
	}
	os.Exit(m.Run())
}

// child hits step-committed until the armed hit kills it. A deferred write
// and a buffered one show whether anything ran after the kill.
func child(dir string) int {
	s, err := Load(os.Getenv, MasterPoints()...)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 3
	}
	defer os.WriteFile(filepath.Join(dir, "deferred"), nil, 0o600)
	for i := 1; i <= 5; i++ {
		if err := os.WriteFile(filepath.Join(dir, "hit"), []byte{byte('0' + i)}, 0o600); err != nil {
			return 4
		}
		s.Hit(StepCommitted)
	}
	return 0
}

func TestHitKillsTheProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, EnvVar+"=step-committed=2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v (stderr %q)", err, stderr.String())
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended %v, want killed by SIGKILL (stderr %q)", ee, stderr.String())
	}
	if got := stderr.String(); got != "failpoint step-committed hit 2: killing the process\n" {
		t.Fatalf("child stderr %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "hit")); err != nil || string(b) != "2" {
		t.Fatalf("child got to hit %q (%v), want 2", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "deferred")); err == nil {
		t.Fatal("a deferred function ran after the kill")
	}
}

// A bad spec in the environment stops the child before any work.
func TestBadSpecStopsTheProcess(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+t.TempDir(), EnvVar+"=step-commited=2")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), `unknown failpoint "step-commited"`) {
		t.Fatalf("child: %v %q", err, out)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "step-committed=3", "step-committed=3,rpc-returned=1", " rpc-returned = 2 ",
		"node-instance-stopped=1", "x=1", "step-committed=0", "step-committed=1,,", "=", ",", "step-committed=+5",
		"step-committed=99999999999999999999", "rpc-returned=1,rpc-returned=1"} {
		f.Add(s)
	}
	known := append(MasterPoints(), NodePoints()...)
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec, known...)
		if err != nil {
			if s != nil {
				t.Fatalf("Parse(%q) returned a set with error %v", spec, err)
			}
			return
		}
		// What parses renders to a spec that parses to the same set.
		again, err := Parse(s.String(), known...)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", spec, s.String(), err)
		}
		if again.String() != s.String() {
			t.Fatalf("round trip of %q: %q then %q", spec, s.String(), again.String())
		}
		for name, p := range s.points {
			if !slices.Contains(known, name) || p.at < 1 || p.at > maxCount {
				t.Fatalf("Parse(%q) armed %s at %d", spec, name, p.at)
			}
		}
	})
}
