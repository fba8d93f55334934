package cli

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestHelpEveryCommand checks that --help teaches every command: a short
// description, an example, and a meaning for each flag.
func TestHelpEveryCommand(t *testing.T) {
	root := NewRoot(&Env{Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer)}, nil, nil)
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Name() == "help" {
			return
		}
		n++
		if c.Short == "" {
			t.Errorf("%s: no short description", c.CommandPath())
		}
		if c.Example == "" {
			t.Errorf("%s: no example", c.CommandPath())
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if strings.TrimSpace(f.Usage) == "" {
				t.Errorf("%s --%s: no usage text", c.CommandPath(), f.Name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 30 {
		t.Fatalf("only %d commands in the tree", n)
	}

	// And --help really prints it, with exit status 0.
	for _, args := range [][]string{{"--help"}, {"instance", "add", "--help"}, {"job", "list", "-h"}, {"cluster", "watcher", "pause", "--help"}} {
		var out, errw bytes.Buffer
		code := Execute(context.Background(), NewRoot(&Env{Stdout: &out, Stderr: &errw}, nil, nil), args)
		if code != 0 {
			t.Errorf("%v: exit %d, stderr %s", args, code, errw.String())
		}
		if !strings.Contains(out.String(), "Usage:") || !strings.Contains(out.String(), "Examples:") {
			t.Errorf("%v: help lacks usage or examples:\n%s", args, out.String())
		}
	}
}

func TestUsageErrors(t *testing.T) {
	f := newFake(t)
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"cluster", "bogus"},
		{"node", "list", "--bogus"},
		{"instance", "add", "-t", "file"},
		{"instance", "add", "-o", "debootstrap", "-s", "1G", "web1"},
		{"instance", "rename", "web1"},
		{"job", "watch"},
		{"job", "list", "--running", "--error"},
		{"job", "change-priority", "3"},
		{"debug", "delay", "--repeat", "x", "1"},
		{"cluster", "modify"},
		{"node", "modify", "node1"},
		{"instance", "modify", "web1"},
		{"cluster", "queue", "info", "extra"},
	} {
		r := f.run(t, args...)
		if r.code != ExitUsage {
			t.Errorf("%q: exit %d, want %d; stderr:\n%s", args, r.code, ExitUsage, r.stderr)
			continue
		}
		if !strings.HasPrefix(r.stderr, "Error: ") || !strings.Contains(r.stderr, "Usage:") {
			t.Errorf("%q: stderr lacks the error and usage:\n%s", args, r.stderr)
		}
	}
	if got := f.callsTo("SubmitJob"); len(got) != 0 {
		t.Fatalf("usage errors submitted jobs: %v", got)
	}
}

func TestPathResolution(t *testing.T) {
	tests := []struct {
		name                  string
		env                   map[string]string
		preset                Env
		args                  []string
		runDir, socket, stDir string
	}{
		{"defaults", nil, Env{}, nil, "/run/corral", "/run/corral/master/luxi.sock", "/var/lib/corral"},
		{"run-dir flag moves the socket", nil, Env{}, []string{"--run-dir", "/r"}, "/r", "/r/master/luxi.sock", "/var/lib/corral"},
		{"env", map[string]string{EnvRunDir: "/er", EnvStateDir: "/es"}, Env{}, nil, "/er", "/er/master/luxi.sock", "/es"},
		{"env socket", map[string]string{EnvSocket: "/s.sock"}, Env{}, nil, "/run/corral", "/s.sock", "/var/lib/corral"},
		{"flag beats env", map[string]string{EnvSocket: "/s.sock", EnvStateDir: "/es"}, Env{},
			[]string{"--socket", "/f.sock", "--state-dir", "/fs"}, "/run/corral", "/f.sock", "/fs"},
		{"preset is a default", nil, Env{Socket: "/p.sock", StateDir: "/ps"}, nil, "/run/corral", "/p.sock", "/ps"},
		{"env beats preset", map[string]string{EnvSocket: "/s.sock"}, Env{Socket: "/p.sock"}, nil, "/run/corral", "/s.sock", "/var/lib/corral"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.preset
			env.Stdout, env.Stderr = new(bytes.Buffer), new(bytes.Buffer)
			env.Getenv = func(k string) string { return tc.env[k] }
			var seen [3]string
			// One extra has its own persistent hook, which cobra would run
			// instead of the root's: the settings must be resolved anyway.
			hooked := false
			extra := &cobra.Command{Use: "dev", PersistentPreRunE: func(*cobra.Command, []string) error { hooked = true; return nil }}
			extra.AddCommand(&cobra.Command{Use: "show", RunE: func(*cobra.Command, []string) error {
				seen = [3]string{env.RunDir, env.Socket, env.StateDir}
				return nil
			}})
			code := Execute(context.Background(), NewRoot(&env, nil, []*cobra.Command{extra}), append(tc.args, "dev", "show"))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, env.Stderr)
			}
			if !hooked {
				t.Fatal("the extra's own hook did not run")
			}
			if want := [3]string{tc.runDir, tc.socket, tc.stDir}; seen != want {
				t.Fatalf("got %q, want %q", seen, want)
			}
		})
	}
}

func TestClusterExtrasGoUnderCluster(t *testing.T) {
	ran := false
	initCmd := &cobra.Command{Use: "init", RunE: func(*cobra.Command, []string) error { ran = true; return nil }}
	env := &Env{Stdout: new(bytes.Buffer), Stderr: new(bytes.Buffer), Getenv: func(string) string { return "" }}
	if code := Execute(context.Background(), NewRoot(env, []*cobra.Command{initCmd}, nil), []string{"cluster", "init"}); code != 0 || !ran {
		t.Fatalf("cluster init: exit %d, ran %v", code, ran)
	}
}

func TestConnectionFailure(t *testing.T) {
	var out, errw bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errw, Getenv: func(string) string { return "" }}
	code := Execute(context.Background(), NewRoot(env, nil, nil), []string{"--socket", t.TempDir() + "/none.sock", "job", "list"})
	if code != 7 {
		t.Fatalf("exit %d, want 7 (environment error); stderr %s", code, errw.String())
	}
	if !strings.Contains(errw.String(), "Cannot communicate with the master daemon") || !strings.Contains(errw.String(), "none.sock") {
		t.Fatalf("stderr: %s", errw.String())
	}
}

func TestConsole(t *testing.T) {
	f := newFake(t)
	r := f.run(t, "instance", "console", "web1")
	if r.code != ExitError || !strings.Contains(r.stderr, "console is not available") {
		t.Fatalf("no console: %+v", r)
	}
	var got string
	r = f.runEnv(t, func(e *Env) {
		e.Stdin = strings.NewReader("input")
		e.Console = func(_ context.Context, inst string, in io.Reader, out io.Writer) error {
			b := make([]byte, 5)
			n, _ := in.Read(b)
			got = inst + ":" + string(b[:n])
			_, err := out.Write([]byte("login: "))
			return err
		}
	}, "instance", "console", "web1")
	if r.code != 0 || got != "web1:input" || r.stdout != "login: " {
		t.Fatalf("console: %+v, got %q", r, got)
	}
}
