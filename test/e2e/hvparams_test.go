package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/corral/corral/internal/devcluster"
)

// TestKVMParamsShownAndChecked sets the newer kvm parameters on an instance
// through the CLI and reads them back from `corral instance info` and RAPI;
// values Ganeti would refuse, and the ones Corral refuses, fail the job with
// the reason.
func TestKVMParamsShownAndChecked(t *testing.T) {
	requireRoot(t)
	requireQemu(t)
	c := newCluster(t, clusterOpts{nodes: 1, hypervisors: []string{"kvm", "fake"}})
	// A kvm instance that is never started: the parameters are checked
	// and stored, no qemu runs.
	op := createOp("hv1", "", 16)
	op["hypervisor"], op["start"] = "kvm", false
	c.mustSucceed(op)

	if out, err := c.corral("instance", "modify", "-B", "vcpus=2", "-H", "cpu_mask=1:0,cpu_cores=2,keymap=de,usb_mouse=tablet,disk_discard=unmap", "hv1"); err != nil {
		t.Fatalf("modify: %v\n%s", err, out)
	}
	out, err := c.corral("instance", "info", "hv1")
	if err != nil {
		t.Fatalf("info: %v\n%s", err, out)
	}
	for _, want := range []string{"cpu_mask", "1:0", "cpu_cores", "keymap", "usb_mouse", "tablet", "disk_discard", "unmap", "vnc_tls", "spice_bind", "use_guest_agent"} {
		if !strings.Contains(out, want) {
			t.Errorf("instance info lacks %q:\n%s", want, out)
		}
	}

	env, err := devcluster.ReadRAPIEnv(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	var inst struct {
		HVParams map[string]any `json:"hvparams"`
	}
	if code := rapiDo(t, rapiHTTPClient(t, env.CA), env, "GET", "/2/instances/hv1", &inst); code != http.StatusOK {
		t.Fatalf("GET /2/instances/hv1: %d", code)
	}
	for k, want := range map[string]string{"cpu_mask": "1:0", "keymap": "de", "usb_mouse": "tablet", "disk_discard": "unmap"} {
		if got, _ := inst.HVParams[k].(string); got != want {
			t.Errorf("RAPI hvparams[%s] = %#v, want %q", k, inst.HVParams[k], want)
		}
	}

	for hv, reason := range map[string]string{
		"cpu_mask=2-1":                            "Invalid CPU ID range definition",
		"user_shutdown=true":                      "enabled_user_shutdown",
		"spice_bind=127.0.0.1,spice_use_tls=true": "no SPICE certificate",
		"vnc_x509_verify=true":                    "vnc_x509_path must be defined",
		"kvm_extra=-runas root":                   "may not contain -runas",
		"usb_devices=046d":                        "vendor:product",
		"cpu_mask=0:1:0":                          "Number of vCPUs [2] does not match the CPU mask [0:1:0]",
	} {
		out, err := c.corral("instance", "modify", "-H", hv, "hv1")
		if err == nil || !strings.Contains(out, reason) {
			t.Errorf("modify -H %s: %v, output lacks %q:\n%s", hv, err, reason, out)
		}
	}
	// The fake hypervisor has only its own parameters.
	c.mustSucceed(createOp("fk1", "", 16))
	if out, err := c.corral("instance", "modify", "-H", "cpu_mask=0", "fk1"); err == nil || !strings.Contains(out, "Unknown hypervisor parameter 'cpu_mask' for fake") {
		t.Errorf("modify -H cpu_mask on a fake instance: %v\n%s", err, out)
	}
	if out, err := c.corral("instance", "info", "fk1"); err != nil || strings.Contains(out, "kernel_path") || !strings.Contains(out, "migration_mode") {
		t.Errorf("info of a fake instance shows kvm's parameters, or lacks its own: %v\n%s", err, out)
	}
}
