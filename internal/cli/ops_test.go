package cli

import (
	"strings"
	"testing"
)

// TestOpcodes checks the exact opcode each job-submitting command sends.
func TestOpcodes(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fakeMaster)
		args  []string
		want  string
	}{
		{"cluster verify", nil, []string{"cluster", "verify"}, `{"OP_ID":"OP_CLUSTER_VERIFY"}`},
		{"cluster verify flags", nil, []string{"cluster", "verify", "--verbose", "--error-codes", "--priority", "high"},
			`{"OP_ID":"OP_CLUSTER_VERIFY","verbose":true,"error_codes":true,"priority":-10}`},
		{"cluster modify all", nil, []string{"cluster", "modify", "--candidate-pool-size", "5", "--max-running-jobs", "10",
			"--job-queue-size", "100", "--mac-prefix", "aa:bb:cc", "--enabled-hypervisors", "kvm,fake",
			"--enabled-disk-templates", "file,diskless", "-H", `kvm:kernel_path=/boot/vmlinuz,acpi`, "-H", "fake:x=1",
			"-B", "memory=1G,vcpus=2,auto_balance=no", "-N", "mode=bridged,link=br0", "-O", "debootstrap:dhcp=yes,-mirror",
			"--hidden-os", "add:old,remove:new", "--blacklisted-os", "add:bad", "--dry-run"},
			`{"OP_ID":"OP_CLUSTER_SET_PARAMS","candidate_pool_size":5,"max_running_jobs":10,"job_queue_size":100,
			"mac_prefix":"aa:bb:cc","enabled_hypervisors":["kvm","fake"],"enabled_disk_templates":["file","diskless"],
			"hvparams":{"kvm":{"kernel_path":"/boot/vmlinuz","acpi":"true"},"fake":{"x":"1"}},
			"beparams":{"memory":1024,"vcpus":2,"auto_balance":false},"nicparams":{"mode":"bridged","link":"br0"},
			"osparams":{"debootstrap":{"dhcp":"yes","mirror":"default"}},
			"hidden_os":[["add","old"],["remove","new"]],"blacklisted_os":[["add","bad"]],"dry_run":true}`},
		{"node add", nil, []string{"node", "add", "node3", "--ip", "192.0.2.3", "--group", "g1", "--master-capable", "no", "--vm-capable", "yes"},
			`{"OP_ID":"OP_NODE_ADD","node_name":"node3","primary_ip":"192.0.2.3","group":"g1","master_capable":false,"vm_capable":true}`},
		{"cluster modify shared dir", nil, []string{"cluster", "modify", "--shared-file-storage-dir", "/srv/shared"},
			`{"OP_ID":"OP_CLUSTER_SET_PARAMS","shared_file_storage_dir":"/srv/shared"}`},
		{"node add minimal", nil, []string{"node", "add", "node3"}, `{"OP_ID":"OP_NODE_ADD","node_name":"node3"}`},
		{"node remove", nil, []string{"node", "remove", "node2", "--priority", "low"}, `{"OP_ID":"OP_NODE_REMOVE","node_name":"node2","priority":10}`},
		{"node modify", nil, []string{"node", "modify", "node1", "--master-candidate", "yes", "--offline", "no", "--drained", "yes", "--force"},
			`{"OP_ID":"OP_NODE_SET_PARAMS","node_name":"node1","master_candidate":true,"offline":false,"drained":true,"force":true}`},
		{"instance add", nil, []string{"instance", "add", "-t", "file", "-o", "debootstrap+bookworm", "-n", "node1",
			"--disk", "1:size=512", "--disk", "0:size=1.5g,mode=ro", "--net", "0:mode=routed,ip=192.0.2.9,mac=auto",
			"--net", "1:link=br1", "-H", "kvm:acpi=false", "-B", "memory=2G,vcpus=2", "-O", "dhcp=yes", "--no-start",
			"--force-variant", "web1"},
			`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"web1","disk_template":"file","os_type":"debootstrap+bookworm",
			"pnode":"node1","disks":[{"size":1536,"mode":"ro"},{"size":512}],
			"nics":[{"mode":"routed","ip":"192.0.2.9","mac":"auto"},{"link":"br1"}],"hypervisor":"kvm",
			"hvparams":{"acpi":"false"},"beparams":{"memory":2048,"vcpus":2},"osparams":{"dhcp":"yes"},
			"start":false,"no_install":false,"force_variant":true}`},
		{"instance add defaults", nil, []string{"instance", "add", "-t", "file", "-o", "debootstrap", "-s", "10G", "web1"},
			`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"web1","disk_template":"file","os_type":"debootstrap",
			"disks":[{"size":10240}],"nics":[{}],"hvparams":{},"beparams":{},"osparams":{},
			"start":true,"no_install":false,"force_variant":false}`},
		{"instance add diskless", nil, []string{"instance", "add", "-t", "diskless", "--no-install", "--no-nics", "-H", "fake", "t1"},
			`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"t1","disk_template":"diskless","disks":[],"nics":[],
			"hypervisor":"fake","hvparams":{},"beparams":{},"osparams":{},"start":true,"no_install":true,"force_variant":false}`},
		{"instance add ignoring the policy", nil, []string{"instance", "add", "-t", "diskless", "--no-install", "--no-nics", "-H", "fake", "--ignore-ipolicy", "t1"},
			`{"OP_ID":"OP_INSTANCE_CREATE","instance_name":"t1","disk_template":"diskless","disks":[],"nics":[],
			"hypervisor":"fake","hvparams":{},"beparams":{},"osparams":{},"start":true,"no_install":true,"force_variant":false,"ignore_ipolicy":true}`},
		{"instance startup", withInstance("web1"), []string{"instance", "start", "web1", "-H", "kernel_args=ro", "-B", "memory=512M", "--paused"},
			`{"OP_ID":"OP_INSTANCE_STARTUP","instance_name":"web1","hvparams":{"kernel_args":"ro"},"beparams":{"memory":512},"startup_paused":true}`},
		{"instance shutdown", withInstance("web1"), []string{"instance", "stop", "web1", "--timeout", "30", "--force"},
			`{"OP_ID":"OP_INSTANCE_SHUTDOWN","instance_name":"web1","timeout":30,"force":true}`},
		{"instance shutdown default", withInstance("web1"), []string{"instance", "shutdown", "web1"},
			`{"OP_ID":"OP_INSTANCE_SHUTDOWN","instance_name":"web1"}`},
		{"instance reboot", withInstance("web1"), []string{"instance", "reboot", "web1", "--type", "hard"},
			`{"OP_ID":"OP_INSTANCE_REBOOT","instance_name":"web1","reboot_type":"hard"}`},
		{"instance migrate", withInstance("web1"), []string{"instance", "migrate", "web1", "-n", "node2", "--non-live", "--allow-failover"},
			`{"OP_ID":"OP_INSTANCE_MIGRATE","instance_name":"web1","target_node":"node2","mode":"non-live","cleanup":false,
			"allow_failover":true,"allow_runtime_changes":true,"ignore_ipolicy":false,"ignore_hvversions":false}`},
		{"instance migrate cleanup", withInstance("web1"), []string{"instance", "migrate", "--cleanup", "-I", "hail", "web1"},
			`{"OP_ID":"OP_INSTANCE_MIGRATE","instance_name":"web1","iallocator":"hail","cleanup":true,
			"allow_failover":false,"allow_runtime_changes":true,"ignore_ipolicy":false,"ignore_hvversions":false}`},
		{"instance failover", withInstance("web1"), []string{"instance", "failover", "web1", "--ignore-consistency", "--shutdown-timeout", "30"},
			`{"OP_ID":"OP_INSTANCE_FAILOVER","instance_name":"web1","ignore_consistency":true,"shutdown_timeout":30,
			"ignore_ipolicy":false,"cleanup":false}`},
		{"instance remove", withInstance("web1"), []string{"instance", "remove", "-f", "--ignore-failures", "web1"},
			`{"OP_ID":"OP_INSTANCE_REMOVE","instance_name":"web1","ignore_failures":true}`},
		{"instance reinstall", withInstance("web1"), []string{"instance", "reinstall", "-f", "-o", "debootstrap+trixie", "-O", "dhcp=no", "web1"},
			`{"OP_ID":"OP_INSTANCE_REINSTALL","instance_name":"web1","os_type":"debootstrap+trixie","osparams":{"dhcp":"no"}}`},
		{"instance rename", withInstance("web1"), []string{"instance", "rename", "web1", "web2"},
			`{"OP_ID":"OP_INSTANCE_RENAME","instance_name":"web1","new_name":"web2"}`},
		{"instance modify", withInstance("web1"), []string{"instance", "modify", "-B", "memory=1G,-vcpus", "-H", "-kernel_path,acpi",
			"-O", "dhcp=yes", "--os-type", "other", "web1"},
			`{"OP_ID":"OP_INSTANCE_SET_PARAMS","instance_name":"web1","beparams":{"memory":1024,"vcpus":"default"},
			"hvparams":{"kernel_path":"default","acpi":"true"},"osparams":{"dhcp":"yes"},"os_name":"other"}`},
		{"instance modify ignoring the policy", withInstance("web1"), []string{"instance", "modify", "-B", "vcpus=16", "--ignore-ipolicy", "web1"},
			`{"OP_ID":"OP_INSTANCE_SET_PARAMS","instance_name":"web1","beparams":{"vcpus":16},"ignore_ipolicy":true}`},
		{"instance info", withInstance("web1"), []string{"instance", "info", "--static", "web1"},
			`{"OP_ID":"OP_INSTANCE_QUERY_DATA","instances":["web1"],"static":true}`},
		{"debug delay", nil, []string{"debug", "delay", "0"},
			`{"OP_ID":"OP_TEST_DELAY","duration":0,"on_master":true,"on_nodes":[],"repeat":0,"interruptible":false}`},
		{"debug delay all", nil, []string{"debug", "delay", "--no-master", "-n", "node1", "-n", "node2", "--repeat", "2", "--interruptible", "--priority", "7", "1.5"},
			`{"OP_ID":"OP_TEST_DELAY","duration":1.5,"on_master":false,"on_nodes":["node1","node2"],"repeat":2,"interruptible":true,"priority":7}`},
		{"debug delay wake event", nil, []string{"debug", "delay", "--wake-event", "agent/1", "60"},
			`{"OP_ID":"OP_TEST_DELAY","duration":60,"on_master":true,"on_nodes":[],"repeat":0,"interruptible":false,"wake_event":"agent/1"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			r := f.run(t, tc.args...)
			if r.code != 0 {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			ops := f.submitted()
			if len(ops) != 1 {
				t.Fatalf("%d jobs submitted, want 1", len(ops))
			}
			if !sameJSON(t, ops[0], tc.want) {
				got, _ := jsonText(ops[0])
				t.Fatalf("opcode\n got: %s\nwant: %s", got, strings.Join(strings.Fields(tc.want), " "))
			}
		})
	}
}

func withInstance(name string) func(f *fakeMaster) {
	return func(f *fakeMaster) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.instances[name] = map[string]any{"name": name, "os": "debootstrap", "hypervisor": "kvm", "pnode": "node1",
			"status": "running", "oper_ram": 128.0, "disk_template": "file"}
	}
}

// TestParameterErrors checks that bad option values are refused before
// anything is submitted, with exit status 2 and a message naming the flag.
func TestParameterErrors(t *testing.T) {
	tests := []struct {
		args []string
		msg  string
	}{
		{[]string{"instance", "add", "-t", "file", "-o", "x", "--disk", "0:size=10Q", "w"}, "unknown unit"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "--disk", "1:size=1G", "w"}, "disk 0 is missing"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "--disk", "0:size=1G", "--disk", "0:size=2G", "w"}, "more than once"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "--disk", "a:size=1G", "w"}, "invalid disk index"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "--disk", "0:mode=rw", "w"}, "has no size"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "w"}, "no disks given"},
		{[]string{"instance", "add", "-t", "diskless", "-o", "x", "-s", "1G", "w"}, "takes no disks"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "--disk", "0:size=1G", "w"}, "cannot be combined"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "--net", "0:mode=nat", "w"}, "invalid mode"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "--no-nics", "--net", "0:link=b", "w"}, "cannot be combined"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "-B", "memory=lots", "w"}, "-B memory"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "-B", "vcpus=-1", "w"}, "non-negative"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "-B", "a=1,a=2", "w"}, "duplicate key"},
		{[]string{"instance", "add", "-t", "file", "-o", "x", "-s", "1G", "-O", "-dhcp", "w"}, "cannot be reset"},
		{[]string{"cluster", "modify", "-H", "kvm:a=1", "-H", "kvm:b=2"}, "more than once"},
		{[]string{"cluster", "modify", "--candidate-pool-size", "0"}, "at least 1"},
		{[]string{"cluster", "modify", "--hidden-os", "hide:x"}, "unknown action"},
		{[]string{"node", "modify", "node1", "--offline", "maybe"}, "expected yes or no"},
		{[]string{"instance", "reboot", "--type", "cold", "w"}, "invalid --type"},
		{[]string{"instance", "migrate", "--non-live", "--migration-mode", "live", "w"}, "exclude each other"},
		{[]string{"instance", "migrate", "--migration-mode", "fast", "w"}, "invalid --migration-mode"},
		{[]string{"instance", "failover", "-n", "a", "-I", "hail", "w"}, "exclude each other"},
		{[]string{"debug", "delay", "--", "-1"}, "invalid delay"},
		{[]string{"debug", "delay", "1s"}, "invalid delay"},
		{[]string{"debug", "delay", "--priority", "urgent", "1"}, "invalid priority"},
		{[]string{"job", "info", "x"}, "invalid job id"},
		{[]string{"job", "autoarchive", "3x"}, "invalid time specification"},
		{[]string{"node", "list", "--units", "k"}, "invalid units"},
		{[]string{"node", "list", "-o", "name,,pip"}, "empty field"},
		{[]string{"cluster", "watcher", "pause", "soon"}, "invalid time specification"},
		{[]string{"node", "join-token", "node3", "--ttl", "forever"}, "invalid --ttl"},
	}
	for _, tc := range tests {
		f := newFake(t)
		r := f.run(t, tc.args...)
		if r.code != ExitUsage {
			t.Errorf("%q: exit %d, want 2\nstderr: %s", tc.args, r.code, r.stderr)
			continue
		}
		if !strings.Contains(r.stderr, tc.msg) {
			t.Errorf("%q: stderr %q lacks %q", tc.args, r.stderr, tc.msg)
		}
		if n := f.callCount(); n != 0 {
			t.Errorf("%q: %d calls made to the master, want none", tc.args, n)
		}
	}
}
