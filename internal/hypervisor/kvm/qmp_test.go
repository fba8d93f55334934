package kvm

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// startQMPServer serves f on a fresh unix socket and returns its path.
func startQMPServer(t *testing.T, f *fakeQMP) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "qmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "qmp.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			f.serve(conn)
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return sock
}

func TestQMPClient(t *testing.T) {
	ctx := context.Background()
	f := &fakeQMP{status: "paused"}
	sock := startQMPServer(t, f)

	st, err := queryStatus(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	if st.Status != "paused" || st.Running {
		t.Fatalf("query-status = %+v", st)
	}
	if _, err := qmpDo(ctx, sock, "system_powerdown", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := qmpDo(ctx, sock, "system_reset", nil); err != nil {
		t.Fatal(err)
	}
	_, err = qmpDo(ctx, sock, "no-such-command", map[string]any{"x": 1})
	var qe *QMPError
	if !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
		t.Fatalf("unknown command error = %v", err)
	}
	want := []string{
		"qmp_capabilities", "query-status",
		"qmp_capabilities", "system_powerdown",
		"qmp_capabilities", "system_reset",
		"qmp_capabilities", "no-such-command",
	}
	if got := f.seen(); !slices.Equal(got, want) {
		t.Fatalf("server saw %q, want %q", got, want)
	}
}

func TestQMPQuitHangup(t *testing.T) {
	f := &fakeQMP{status: "running", onQuit: func() {}}
	sock := startQMPServer(t, f)
	if err := quit(context.Background(), sock); err != nil {
		t.Fatalf("quit with hang-up: %v", err)
	}
	if got := f.seen(); !slices.Contains(got, "quit") {
		t.Fatalf("quit not sent: %q", got)
	}
}

func TestQMPTimeout(t *testing.T) {
	sock := startQMPServer(t, &fakeQMP{noGreeting: true})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := dialQMP(ctx, sock); err == nil {
		t.Fatal("dial succeeded without a greeting")
	}
}

func TestQMPCancel(t *testing.T) {
	sock := startQMPServer(t, &fakeQMP{noGreeting: true})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := dialQMP(ctx, sock)
		errc <- err
	}()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("dial succeeded after cancel")
	}
}

func TestQMPNoSocket(t *testing.T) {
	if _, err := queryStatus(context.Background(), filepath.Join(t.TempDir(), "missing.sock")); err == nil {
		t.Fatal("no error for a missing socket")
	}
}

func TestParseQMPMessage(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		kind string
	}{
		{`{"QMP": {"version": {}, "capabilities": []}}`, true, "greeting"},
		{`{"return": {}, "id": 1}`, true, "return"},
		{`{"return": {"status": "running"}}`, true, "return"},
		{`{"error": {"class": "GenericError", "desc": "x"}, "id": 2}`, true, "error"},
		{`{"event": "SHUTDOWN", "data": {}, "timestamp": {}}`, true, "event"},
		{`{"return": {}, "error": {"class": "a", "desc": "b"}}`, false, ""},
		{`{}`, false, ""},
		{`[1,2]`, false, ""},
		{`not json`, false, ""},
	}
	for _, tc := range tests {
		m, err := parseQMPMessage([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v", tc.in, err)
			continue
		}
		if !tc.ok {
			continue
		}
		kind := map[bool]string{m.Greeting != nil: "greeting", m.Return != nil: "return", m.Error != nil: "error", m.Event != "": "event"}[true]
		if kind != tc.kind {
			t.Errorf("%s: parsed as %s", tc.in, kind)
		}
	}
}

func FuzzParseQMPMessage(f *testing.F) {
	f.Add([]byte(`{"QMP": {"version": {"qemu": {"major": 7}}, "capabilities": ["oob"]}}`))
	f.Add([]byte(`{"return": {"status": "running", "running": true}, "id": 3}`))
	f.Add([]byte(`{"error": {"class": "CommandNotFound", "desc": "nope"}}`))
	f.Add([]byte(`{"event": "POWERDOWN", "timestamp": {"seconds": 1}}`))
	f.Add([]byte(`{"return": null}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := parseQMPMessage(line)
		if err != nil {
			return
		}
		if !json.Valid(line) {
			t.Fatalf("accepted invalid JSON %q", line)
		}
		n := 0
		for _, set := range []bool{m.Greeting != nil, m.Return != nil, m.Error != nil, m.Event != ""} {
			if set {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("accepted %q with %d kinds", line, n)
		}
	})
}
