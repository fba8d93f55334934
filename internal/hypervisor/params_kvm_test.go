package hypervisor

import (
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestValidateKVMMoreParams(t *testing.T) {
	tests := []struct {
		name string
		hv   map[string]string
		ok   bool
		msg  string // part of the error
	}{
		{"cpu mask all", map[string]string{"cpu_mask": "all"}, true, ""},
		{"cpu mask range", map[string]string{"cpu_mask": "0-2,4"}, true, ""},
		{"cpu mask per vcpu", map[string]string{"cpu_mask": "1:2:3-4:all"}, true, ""},
		{"cpu mask reversed", map[string]string{"cpu_mask": "3-1"}, false, "Invalid CPU ID range definition (3 > 1)"},
		{"cpu mask word", map[string]string{"cpu_mask": "some"}, false, "Multiple CPU mask definition is not well-formed"},
		{"cpu mask empty entry", map[string]string{"cpu_mask": "1::2"}, false, "not well-formed"},
		{"cpu mask two dashes", map[string]string{"cpu_mask": "1-2-3"}, false, "not well-formed"},
		{"cores", map[string]string{"cpu_cores": "2", "cpu_threads": "1", "cpu_sockets": "1"}, true, ""},
		{"cores negative", map[string]string{"cpu_cores": "-1"}, false, "cannot be negative"},
		{"vnc tls x509", map[string]string{"vnc_bind_address": "127.0.0.1", "vnc_tls": "true", "vnc_x509_path": "/etc/x509", "vnc_x509_verify": "true"}, true, ""},
		{"vnc verify without path", map[string]string{"vnc_bind_address": "127.0.0.1", "vnc_tls": "true", "vnc_x509_verify": "true"}, false, "vnc_x509_path must be defined, if vnc_x509_verify is"},
		{"vnc tls on unix socket", map[string]string{"vnc_bind_address": "unix", "vnc_tls": "true"}, false, "IP address"},
		{"vnc x509 without tls", map[string]string{"vnc_bind_address": "127.0.0.1", "vnc_x509_path": "/etc/x509"}, false, "needs vnc_tls"},
		{"vnc password without vnc", map[string]string{"vnc_password_file": "/etc/pw"}, false, "needs vnc_bind_address"},
		{"vnc password relative", map[string]string{"vnc_bind_address": "unix", "vnc_password_file": "pw"}, false, "absolute"},
		{"keymap", map[string]string{"keymap": "de-ch"}, true, ""},
		{"keymap injection", map[string]string{"keymap": "de,x=y"}, false, ""},
		{"spice", map[string]string{"spice_bind": "127.0.0.1", "spice_ip_version": "4", "spice_image_compression": "quic", "spice_streaming_video": "filter"}, true, ""},
		{"spice name", map[string]string{"spice_bind": "eth0"}, false, "not an IP address"},
		{"spice version mismatch", map[string]string{"spice_bind": "127.0.0.1", "spice_ip_version": "6"}, false, "Got an IPv4 address"},
		{"spice version bad", map[string]string{"spice_bind": "127.0.0.1", "spice_ip_version": "5"}, false, "should be 4 or 6"},
		{"spice and vnc", map[string]string{"spice_bind": "127.0.0.1", "vnc_bind_address": "127.0.0.1"}, false, "only one of them"},
		{"spice option without bind", map[string]string{"spice_image_compression": "glz"}, false, "requires spice_bind"},
		{"spice tls refused", map[string]string{"spice_bind": "127.0.0.1", "spice_use_tls": "true"}, false, "no SPICE certificate"},
		{"spice compression bad", map[string]string{"spice_bind": "127.0.0.1", "spice_jpeg_wan_compression": "sometimes"}, false, ""},
		{"usb", map[string]string{"usb_mouse": "tablet", "usb_devices": "046d:c52b,0x1d6b:0002"}, true, ""},
		{"usb mouse bad", map[string]string{"usb_mouse": "trackball"}, false, ""},
		{"usb device bad", map[string]string{"usb_devices": "046d"}, false, "vendor:product"},
		{"discard", map[string]string{"disk_discard": "unmap"}, true, ""},
		{"discard bad", map[string]string{"disk_discard": "trim"}, false, ""},
		{"media", map[string]string{"cdrom2_image_path": "/iso/b.iso", "floppy_image_path": "/img/f.img", "mem_path": "/dev/hugepages"}, true, ""},
		{"soundhw", map[string]string{"soundhw": "hda"}, true, ""},
		{"soundhw bad", map[string]string{"soundhw": "gus"}, false, ""},
		{"kvm extra", map[string]string{"kvm_extra": "-device 'pci-testdev' -global kvm-pit.lost_tick_policy=discard"}, true, ""},
		{"kvm extra runas", map[string]string{"kvm_extra": "-runas root"}, false, "may not contain -runas"},
		{"kvm extra double dash", map[string]string{"kvm_extra": "--chroot=/"}, false, "may not contain -chroot"},
		{"kvm extra quote", map[string]string{"kvm_extra": "-device 'x"}, false, "unterminated"},
		{"queues", map[string]string{"virtio_net_queues": "8", "vhost_net": "true"}, true, ""},
		{"queues bad", map[string]string{"virtio_net_queues": "9"}, false, "invalid number of queues"},
		{"user shutdown", map[string]string{"user_shutdown": "true"}, false, "enabled_user_shutdown"},
		{"guest agent", map[string]string{"use_guest_agent": "true"}, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateParams(KVM, tc.hv)
			if tc.ok {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted bad parameters")
			}
			if c := ecode.ClassOf(err); c != ecode.Inval {
				t.Fatalf("class %s, want %s (%v)", c, ecode.Inval, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q lacks %q", err, tc.msg)
			}
		})
	}
}

func TestParseCPUMask(t *testing.T) {
	got, err := ParseCPUMask("0-2,5,1:all:3")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 1, 2, 5}, nil, {3}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestSplitKVMExtra(t *testing.T) {
	got, err := SplitKVMExtra(`-device "pci-testdev,id=a b"  -name\ x 'q"z'`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"-device", "pci-testdev,id=a b", "-name x", `q"z`}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestSpiceDefaultsInAnySpelling: a stored configuration spells booleans and
// numbers its own way; unset SPICE options must not count as set.
func TestSpiceDefaultsInAnySpelling(t *testing.T) {
	hv := DefaultParams(KVM)
	hv[ParamSpiceUseTLS] = "False"
	hv[ParamSpiceIPVersion] = "0"
	if err := ValidateParams(KVM, hv); err != nil {
		t.Fatal(err)
	}
}
