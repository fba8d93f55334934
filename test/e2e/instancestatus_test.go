package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// killFakeInstance makes the fake hypervisor on node forget a running
// instance behind the node daemon's back, as if its process had died,
// under the same lock the fake hypervisor takes.
func (c *cluster) killFakeInstance(node, name string) {
	c.t.Helper()
	dir := filepath.Join(c.dir, node, "fake")
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o640)
	if err != nil {
		c.t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		c.t.Fatal(err)
	}
	path := filepath.Join(dir, "instances.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		c.t.Fatal(err)
	}
	var doc map[string]map[string]json.RawMessage
	if err := json.Unmarshal(raw, &doc); err != nil {
		c.t.Fatal(err)
	}
	if _, ok := doc["instances"][name]; !ok {
		c.t.Fatalf("the fake hypervisor on %s does not run %s: %s", node, name, raw)
	}
	delete(doc["instances"], name)
	out, _ := json.Marshal(doc)
	if err := os.WriteFile(path, out, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// TestLifecycleWatcherStatus: when an instance that should run dies, the
// watcher restarts it and records that in the instance's status, which
// `corral instance info` shows; an instance it never acted on shows none,
// and stopping the instance clears it. The status write does not change
// the instance's configuration (serial number).
func TestLifecycleWatcherStatus(t *testing.T) {
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"fake"}, watcher: time.Second})
	c.mustSucceed(createOp("st1", "node2", 8))
	c.mustSucceed(createOp("st2", "node2", 8))
	info := func(name string) string {
		t.Helper()
		out, err := c.corral("instance", "info", name)
		if err != nil {
			t.Fatalf("instance info %s: %v\n%s", name, err, out)
		}
		return out
	}
	if out := info("st1"); strings.Contains(out, "Status:") {
		t.Fatalf("an instance the watcher never acted on shows a status:\n%s", out)
	}
	serial := c.instanceField("st1", "serial_no")

	off := c.logSize("corrald")
	c.killFakeInstance("node2", "st1")
	waitFor(t, 60*time.Second, "the watcher to restart st1", func() bool {
		return strings.Contains(c.logSince("corrald", off), `msg="watcher: restarting instance" instance=st1`)
	})
	var out string
	waitFor(t, 60*time.Second, "st1's status to say it runs again", func() bool {
		out = info("st1")
		return strings.Contains(out, "- Running: True (Restarted) since ")
	})
	for _, want := range []string{"  Status: running (target up)\n", "    Conditions:\n",
		": running again after the watcher restarted it\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("instance info st1 lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Last error:") {
		t.Errorf("a restart that worked left a last error:\n%s", out)
	}
	if s := c.instanceField("st1", "serial_no"); s != serial {
		t.Errorf("recording the status changed st1's serial number from %v to %v", serial, s)
	}
	if out := info("st2"); strings.Contains(out, "Status:") {
		t.Errorf("st2, which kept running, shows a status:\n%s", out)
	}

	// Stopped on purpose, the instance is no longer the watcher's concern.
	c.mustSucceed(map[string]any{"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "st1"})
	waitFor(t, 30*time.Second, "the watcher to drop st1's status", func() bool {
		return !strings.Contains(info("st1"), "Status:")
	})
}
