package hypervisor

import (
	"testing"

	"github.com/corral/corral/internal/ecode"
)

func TestDefaultParamsValidate(t *testing.T) {
	for _, name := range []string{KVM, Fake} {
		d := DefaultParams(name)
		if len(d) == 0 {
			t.Fatalf("%s: no defaults", name)
		}
		if err := ValidateParams(name, d); err != nil {
			t.Errorf("%s: defaults do not validate: %v", name, err)
		}
		d[ParamKernelPath] = "/changed"
		if DefaultParams(name)[ParamKernelPath] != "" {
			t.Errorf("%s: DefaultParams returned a shared map", name)
		}
	}
	if DefaultParams("xen-pvm") != nil {
		t.Error("unknown hypervisor has defaults")
	}
}

func TestValidateParams(t *testing.T) {
	tests := []struct {
		name string
		hv   map[string]string
		ok   bool
	}{
		{"empty", map[string]string{}, true},
		{"kernel", map[string]string{"kernel_path": "/boot/vmlinuz", "initrd_path": "/boot/initrd", "kernel_args": "ro quiet"}, true},
		{"relative kernel", map[string]string{"kernel_path": "boot/vmlinuz"}, false},
		{"initrd without kernel", map[string]string{"initrd_path": "/boot/initrd"}, false},
		{"unknown key", map[string]string{"no_such_param": "1"}, false},
		{"bool yes", map[string]string{"acpi": "no", "serial_console": "True"}, true},
		{"bool bad", map[string]string{"acpi": "maybe"}, false},
		{"kvm flag enabled", map[string]string{"kvm_flag": "enabled"}, true},
		{"kvm flag bad", map[string]string{"kvm_flag": "kvm:tcg"}, false},
		{"nic types", map[string]string{"nic_type": "e1000"}, true},
		{"nic type bad", map[string]string{"nic_type": "virtio"}, false},
		{"disk ide", map[string]string{"disk_type": "ide"}, true},
		{"disk bad", map[string]string{"disk_type": "nvme"}, false},
		{"aio native none", map[string]string{"disk_aio": "native", "disk_cache": "none"}, true},
		{"aio native writeback", map[string]string{"disk_aio": "native", "disk_cache": "writeback"}, false},
		{"vnc ip", map[string]string{"vnc_bind_address": "127.0.0.1"}, true},
		{"vnc ipv6", map[string]string{"vnc_bind_address": "::1"}, true},
		{"vnc unix", map[string]string{"vnc_bind_address": "unix"}, true},
		{"vnc name", map[string]string{"vnc_bind_address": "example.org"}, false},
		{"security user", map[string]string{"security_model": "user", "security_domain": "qemu7"}, true},
		{"security user no domain", map[string]string{"security_model": "user"}, false},
		{"security domain without user", map[string]string{"security_domain": "qemu7"}, false},
		{"security root", map[string]string{"security_model": "user", "security_domain": "root"}, false},
		{"security pool", map[string]string{"security_model": "pool"}, true},
		{"security pool with domain", map[string]string{"security_model": "pool", "security_domain": "qemu7"}, false},
		{"cdrom boot", map[string]string{"boot_order": "cdrom", "cdrom_image_path": "/iso/x.iso"}, true},
		{"cdrom boot no image", map[string]string{"boot_order": "cdrom"}, false},
		{"cpu type", map[string]string{"cpu_type": "qemu64,+ssse3"}, true},
		{"cpu type option injection", map[string]string{"cpu_type": "qemu64 -device"}, false},
		{"machine dash", map[string]string{"machine_version": "-q35"}, false},
		{"kernel args newline", map[string]string{"kernel_args": "ro\ninit=/bin/sh"}, false},
		{"serial speed", map[string]string{"serial_speed": "115200"}, true},
		{"serial speed bad", map[string]string{"serial_speed": "1"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateParams(KVM, tc.hv)
			if tc.ok && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("accepted bad parameters")
				}
				if c := ecode.ClassOf(err); c != ecode.Inval {
					t.Fatalf("class %s, want %s (%v)", c, ecode.Inval, err)
				}
			}
		})
	}
	if err := ValidateParams("xen", nil); ecode.ClassOf(err) != ecode.Inval {
		t.Errorf("unknown hypervisor: %v", err)
	}
}

func TestCheckSpec(t *testing.T) {
	good := InstanceSpec{Name: "inst1.example.org", UUID: "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", MemoryMiB: 128, VCPUs: 1,
		NICs: []NICSpec{{MAC: "aa:00:00:11:22:33", Mode: NICModeBridged}}}
	if err := CheckSpec(good); err != nil {
		t.Fatalf("good spec: %v", err)
	}
	bad := map[string]func(*InstanceSpec){
		"slash in name": func(s *InstanceSpec) { s.Name = "../etc" },
		"empty name":    func(s *InstanceSpec) { s.Name = "" },
		"dot name":      func(s *InstanceSpec) { s.Name = ".hidden" },
		"short uuid":    func(s *InstanceSpec) { s.UUID = "0f1e2d3c" },
		"bad uuid":      func(s *InstanceSpec) { s.UUID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fZ" },
		"no memory":     func(s *InstanceSpec) { s.MemoryMiB = 0 },
		"no cpus":       func(s *InstanceSpec) { s.VCPUs = 0 },
		"disk no path":  func(s *InstanceSpec) { s.Disks = []DiskSpec{{Index: 0}} },
		"nic mode":      func(s *InstanceSpec) { s.NICs[0].Mode = "openvswitch" },
		"nic mac":       func(s *InstanceSpec) { s.NICs[0].MAC = "aa:00:00:11:22" },
	}
	for name, mutate := range bad {
		s := good
		s.NICs = append([]NICSpec(nil), good.NICs...)
		mutate(&s)
		if err := CheckSpec(s); ecode.ClassOf(err) != ecode.Inval {
			t.Errorf("%s: got %v, want an Inval error", name, err)
		}
	}
}

func FuzzValidateParams(f *testing.F) {
	f.Add("acpi", "true")
	f.Add("kernel_path", "/boot/vmlinuz")
	f.Add("vnc_bind_address", "::1")
	f.Add("security_domain", "qemu-1")
	f.Add("cpu_type", "host,+x")
	f.Add("unknown", "")
	f.Fuzz(func(t *testing.T, key, value string) {
		err := ValidateParams(KVM, map[string]string{key: value})
		if err != nil && ecode.ClassOf(err) != ecode.Inval {
			t.Fatalf("error of class %s: %v", ecode.ClassOf(err), err)
		}
		if err == nil {
			if _, ok := kvmParams[key]; !ok {
				t.Fatalf("unknown key %q accepted", key)
			}
		}
	})
}
