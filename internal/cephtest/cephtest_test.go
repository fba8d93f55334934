package cephtest

import (
	"strings"
	"testing"
)

// TestClusterServesRBD brings a cluster up and checks that a client with the
// admin keyring can create, list and remove an image through librbd.
func TestClusterServesRBD(t *testing.T) {
	c := Start(t, Options{OSDs: 1})
	if _, err := c.Run("rbd", "create", "--size", "8", c.Pool+"/probe"); err != nil {
		t.Fatal(err)
	}
	out, err := c.Run("rbd", "ls", c.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) != "probe" {
		t.Fatalf("rbd ls = %q, want probe", out)
	}
	if _, err := c.Run("rbd", "rm", c.Pool+"/probe"); err != nil {
		t.Fatal(err)
	}
	health, err := c.Run("ceph", "health")
	if err != nil || !strings.HasPrefix(health, "HEALTH_OK") {
		t.Fatalf("health %q, %v", health, err)
	}
}
