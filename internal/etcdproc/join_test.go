package etcdproc

import (
	"slices"
	"strings"
	"testing"
)

func TestInitialCluster(t *testing.T) {
	ms := []MemberInfo{
		{ID: 1, Name: "m0", PeerURLs: []string{"https://10.0.0.1:2380"}},
		{ID: 2, PeerURLs: []string{"https://10.0.0.2:2380"}}, // added elsewhere, not started
		{ID: 3, PeerURLs: []string{"https://10.0.0.3:2380", "https://10.0.1.3:2380"}},
	}
	got := InitialCluster(ms, 3, "n3")
	want := "m0=https://10.0.0.1:2380,=https://10.0.0.2:2380,n3=https://10.0.0.3:2380,n3=https://10.0.1.3:2380"
	if got != want {
		t.Fatalf("InitialCluster = %q, want %q", got, want)
	}
}

func TestJoinSpecCheck(t *testing.T) {
	ok := JoinSpec{Name: "n2", Dir: "/x/n2", ClientURL: "https://10.0.0.2:2379", PeerURL: "https://10.0.0.2:2380",
		InitialCluster: "m0=https://10.0.0.1:2380,n2=https://10.0.0.2:2380"}
	for _, tc := range []struct {
		name string
		mod  func(*JoinSpec)
		err  string
	}{
		{"valid", func(*JoinSpec) {}, ""},
		{"no name", func(j *JoinSpec) { j.Name = "" }, "required"},
		{"no dir", func(j *JoinSpec) { j.Dir = "" }, "required"},
		{"bad client URL", func(j *JoinSpec) { j.ClientURL = "10.0.0.2:2379" }, "bad URL"},
		{"bad peer scheme", func(j *JoinSpec) { j.PeerURL = "unix:///s" }, "bad URL"},
		{"not in the initial cluster", func(j *JoinSpec) { j.InitialCluster = "m0=https://10.0.0.1:2380" }, "does not name it"},
		{"in it under another name", func(j *JoinSpec) { j.InitialCluster = "m0=https://10.0.0.1:2380,x=https://10.0.0.2:2380" }, "does not name it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := ok
			tc.mod(&j)
			err := j.check()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("check() = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestJoinArgs(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), Binary: "/bin/true"}
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	m := &Member{Name: "n2", Dir: cfg.Dir + "/n2", ClientURL: "https://10.0.0.2:2379", PeerURL: "https://10.0.0.2:2380"}
	args := joinArgs(&cfg, m, "m0=https://10.0.0.1:2380,n2=https://10.0.0.2:2380")
	for _, want := range []string{"--initial-cluster-state=existing", "--name=n2", "--initial-cluster=m0=https://10.0.0.1:2380,n2=https://10.0.0.2:2380",
		"--listen-peer-urls=https://10.0.0.2:2380", "--data-dir=" + cfg.Dir + "/n2/data"} {
		if !slices.Contains(args, want) {
			t.Errorf("join args %q lack %q", args, want)
		}
	}
	if slices.Contains(args, "--initial-cluster-state=new") {
		t.Errorf("join args %q would start a new cluster", args)
	}
}
