package e2e

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// qmpQuery runs one QMP command on a qemu's monitor socket.
func qmpQuery(t *testing.T, sock, cmd string, out any) {
	t.Helper()
	conn, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(conn)
	next := func() map[string]json.RawMessage {
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				t.Fatalf("qmp %s: %v", cmd, err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(line, &m); err != nil {
				t.Fatalf("qmp %s: %v in %q", cmd, err, line)
			}
			if _, event := m["event"]; !event {
				return m
			}
		}
	}
	next() // greeting
	for _, c := range []string{"qmp_capabilities", cmd} {
		if _, err := conn.Write([]byte(`{"execute":"` + c + `"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		m := next()
		if _, ok := m["return"]; !ok {
			t.Fatalf("qmp %s: %s", c, m["error"])
		}
		if c == cmd {
			if err := json.Unmarshal(m["return"], out); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestKVMCPUMaskAndVNCPassword creates and starts a kvm instance through
// the master with cpu_mask, a VNC password file and the guest agent: the
// node pins each vCPU thread of the real qemu to its CPU, the VNC server
// asks for a password, and the password appears in no log, job result or
// instance info.
func TestKVMCPUMaskAndVNCPassword(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	img := guestImage(t)
	c := newCluster(t, clusterOpts{hypervisors: []string{"kvm", "fake"}, imageDir: img})

	const secret = "pw" + "Qx7Z"
	pwFile := filepath.Join(t.TempDir(), "vnc-password")
	if err := os.WriteFile(pwFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res := c.mustSucceed(map[string]any{
		"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "pin1", "disk_template": "file",
		"disks": []any{map[string]any{"size": 32}}, "nics": []any{}, "os_type": "tiny+default",
		"hypervisor": "kvm", "beparams": map[string]any{"memory": 128, "vcpus": 2}, "pnode": "node1",
		"hvparams": map[string]any{"cpu_mask": "1:0", "vnc_bind_address": "unix", "vnc_password_file": pwFile,
			"use_guest_agent": true, "cpu_cores": 2},
		"start": true,
	})
	uuid := c.instanceField("pin1", "uuid").(string)
	pids := qemuPIDs(uuid)
	if len(pids) != 1 {
		t.Fatalf("want one qemu, got %v", pids)
	}
	dir := filepath.Join(c.st.RunDir, "node1", "kvm", strings.ToLower(uuid[:8]))

	var cpus []struct {
		Index  int `json:"cpu-index"`
		Thread int `json:"thread-id"`
	}
	qmpQuery(t, filepath.Join(dir, "qmp.sock"), "query-cpus-fast", &cpus)
	if len(cpus) != 2 {
		t.Fatalf("query-cpus-fast: %+v", cpus)
	}
	for _, cpu := range cpus {
		want := map[int]string{0: "1", 1: "0"}[cpu.Index]
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "task", strconv.Itoa(cpu.Thread), "status"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "Cpus_allowed_list:\t"+want+"\n") {
			t.Errorf("vCPU %d not pinned to CPU %s:\n%s", cpu.Index, want, b)
		}
	}
	var vnc []struct {
		Auth string `json:"auth"`
	}
	qmpQuery(t, filepath.Join(dir, "qmp.sock"), "query-vnc-servers", &vnc)
	if len(vnc) != 1 || vnc[0].Auth != "vnc" {
		t.Errorf("query-vnc-servers = %+v, want password authentication", vnc)
	}
	if _, err := os.Stat(filepath.Join(dir, "qga.sock")); err != nil {
		t.Errorf("guest agent socket: %v", err)
	}

	info, err := c.corral("instance", "info", "pin1")
	if err != nil {
		t.Fatalf("instance info: %v\n%s", err, info)
	}
	if !strings.Contains(info, "1:0") || !strings.Contains(info, pwFile) {
		t.Errorf("instance info lacks cpu_mask or the password file's path:\n%s", info)
	}
	b, _ := json.Marshal(res)
	cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pids[0]), "cmdline"))
	where := map[string]string{"job result": string(b), "instance info": info, "qemu's command line": string(cmdline)}
	logs, _ := filepath.Glob(filepath.Join(c.dir, "logs", "*.log"))
	nodeLogs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range append(logs, nodeLogs...) {
		data, _ := os.ReadFile(f)
		where[f] = string(data)
	}
	if len(logs) == 0 {
		t.Errorf("no daemon logs under %s", filepath.Join(c.dir, "logs"))
	}
	for name, text := range where {
		if strings.Contains(text, secret) {
			t.Errorf("the VNC password is in %s", name)
		}
	}
}
