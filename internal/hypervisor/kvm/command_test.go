package kvm

import (
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/hypervisor"
)

const testUUID = "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"

func testRuntime() Runtime {
	return Runtime{
		Binary:       "qemu-system-x86_64",
		QMPSocket:    "/run/c/6f1c2a3b/qmp.sock",
		SerialSocket: "/run/c/6f1c2a3b/serial.sock",
		SerialLog:    "/run/c/6f1c2a3b/serial.log",
		PIDFile:      "/run/c/6f1c2a3b/pid",
		VNCSocket:    "/run/c/6f1c2a3b/vnc.sock",
		ChrootDir:    "/run/c/6f1c2a3b/chroot",
		RunAs:        "corral-qemu",
	}
}

func testSpec(hv map[string]string) hypervisor.InstanceSpec {
	return hypervisor.InstanceSpec{
		Name: "web1.example.org", UUID: testUUID, MemoryMiB: 256, VCPUs: 2, HVParams: hv,
		Disks: []hypervisor.DiskSpec{{Index: 0, Path: "/srv/disks/web1.disk0"}},
		NICs:  []hypervisor.NICSpec{{Index: 0, MAC: "aa:00:00:12:34:56", Mode: "bridged", Link: "br0", Tap: "crl6f1c2a3bn0"}},
	}
}

func TestBuildCommandDefaults(t *testing.T) {
	argv, err := BuildCommand(testSpec(nil), testRuntime())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"qemu-system-x86_64",
		"-name", "web1.example.org",
		"-uuid", testUUID,
		"-m", "256",
		"-smp", "2",
		"-accel", "tcg",
		"-nodefaults", "-no-user-config", "-display", "none",
		"-daemonize", "-pidfile", "/run/c/6f1c2a3b/pid",
		"-qmp", "unix:/run/c/6f1c2a3b/qmp.sock,server=on,wait=off",
		"-chardev", "socket,id=ser0,path=/run/c/6f1c2a3b/serial.sock,server=on,wait=off,logfile=/run/c/6f1c2a3b/serial.log",
		"-serial", "chardev:ser0",
		"-boot", "order=c",
		"-drive", "file=/srv/disks/web1.disk0,format=raw,if=none,id=drive0,cache=none",
		"-device", "virtio-blk-pci,drive=drive0,id=disk0,addr=0x4,bootindex=1",
		"-netdev", "tap,id=n0,ifname=crl6f1c2a3bn0,script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=aa:00:00:12:34:56,id=nic0,addr=0x14",
		"-device", "virtio-balloon-pci,id=balloon0,addr=0x3",
		"-runas", "corral-qemu",
	}
	if !slices.Equal(argv, want) {
		t.Fatalf("argv mismatch\n got: %q\nwant: %q", argv, want)
	}
}

// hasSeq reports whether seq appears as consecutive elements of argv.
func hasSeq(argv []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(argv); i++ {
		if slices.Equal(argv[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

func TestBuildCommandParams(t *testing.T) {
	tests := []struct {
		name    string
		hv      map[string]string
		mutate  func(*hypervisor.InstanceSpec, *Runtime)
		want    [][]string // each must appear as a consecutive run
		notWant []string   // must not occur in any argument
	}{
		{
			name:    "direct kernel boot with serial",
			hv:      map[string]string{"kernel_path": "/g/vmlinuz", "initrd_path": "/g/initrd.img", "kernel_args": "ro quiet"},
			want:    [][]string{{"-kernel", "/g/vmlinuz", "-initrd", "/g/initrd.img", "-append", "root=/dev/vda ro quiet console=ttyS0,38400"}},
			notWant: []string{"-boot"},
		},
		{
			name:    "kernel without serial or root",
			hv:      map[string]string{"kernel_path": "/g/vmlinuz", "serial_console": "false", "root_path": "", "kernel_args": ""},
			want:    [][]string{{"-kernel", "/g/vmlinuz"}},
			notWant: []string{"-append", "-chardev", "-serial", "-initrd"},
		},
		{
			name:    "kvm accel",
			hv:      map[string]string{"kvm_flag": "enabled"},
			want:    [][]string{{"-accel", "kvm"}},
			notWant: []string{"tcg", "kvm:tcg"},
		},
		{
			name:    "kvm disabled is tcg",
			hv:      map[string]string{"kvm_flag": "disabled"},
			want:    [][]string{{"-accel", "tcg"}},
			notWant: []string{"kvm"},
		},
		{
			name: "acpi off and machine",
			hv:   map[string]string{"acpi": "false", "machine_version": "pc-i440fx-7.2"},
			want: [][]string{{"-machine", "pc-i440fx-7.2,acpi=off"}},
		},
		{
			name: "acpi off alone",
			hv:   map[string]string{"acpi": "false"},
			want: [][]string{{"-machine", "acpi=off"}},
		},
		{
			name: "ide disk e1000 nic network boot",
			hv:   map[string]string{"disk_type": "ide", "nic_type": "e1000", "boot_order": "network"},
			want: [][]string{
				{"-boot", "order=n"},
				{"-drive", "file=/srv/disks/web1.disk0,format=raw,if=ide,cache=none"},
				{"-device", "e1000,netdev=n0,mac=aa:00:00:12:34:56"},
			},
		},
		{
			name: "rtl8139",
			hv:   map[string]string{"nic_type": "rtl8139"},
			want: [][]string{{"-device", "rtl8139,netdev=n0,mac=aa:00:00:12:34:56"}},
		},
		{
			name: "no O_DIRECT falls back to writeback and threads",
			hv:   map[string]string{"disk_aio": "native"},
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				rt.NoDirectIO = map[int]bool{0: true}
			},
			want: [][]string{{"-drive", "file=/srv/disks/web1.disk0,format=raw,if=none,id=drive0,cache=writeback"}},
		},
		{
			name: "native aio, default cache, read-only second disk with comma",
			hv:   map[string]string{"disk_aio": "native"},
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				s.Disks = append(s.Disks, hypervisor.DiskSpec{Index: 1, Path: "/srv/a,b.img", ReadOnly: true})
			},
			want: [][]string{
				{"-drive", "file=/srv/disks/web1.disk0,format=raw,if=none,id=drive0,cache=none,aio=native"},
				{"-drive", "file=/srv/a,,b.img,format=raw,if=none,id=drive1,cache=none,aio=native,readonly=on"},
			},
		},
		{
			name:    "cache default omits cache",
			hv:      map[string]string{"disk_cache": "default"},
			want:    [][]string{{"-drive", "file=/srv/disks/web1.disk0,format=raw,if=none,id=drive0"}},
			notWant: []string{"cache=none"},
		},
		{
			name: "no nics",
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				s.NICs = nil
			},
			notWant: []string{"-netdev", "-nic", "virtio-net-pci"},
		},
		{
			name: "vnc unix socket",
			hv:   map[string]string{"vnc_bind_address": "unix"},
			want: [][]string{{"-vga", "std", "-vnc", "unix:/run/c/6f1c2a3b/vnc.sock"}},
		},
		{
			name: "vnc tcp display from network port",
			hv:   map[string]string{"vnc_bind_address": "127.0.0.1", "vga": "cirrus"},
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				s.NetworkPort = 11005
			},
			want: [][]string{{"-vga", "cirrus", "-vnc", "127.0.0.1:5105"}},
		},
		{
			name: "vnc ipv6",
			hv:   map[string]string{"vnc_bind_address": "::1"},
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				s.NetworkPort = 5901
			},
			want: [][]string{{"-vnc", "[::1]:1"}},
		},
		{
			name: "security user and chroot",
			hv:   map[string]string{"security_model": "user", "security_domain": "qemu7", "use_chroot": "true"},
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				rt.RunAs = "qemu7" // the driver resolves security_domain into RunAs
			},
			want: [][]string{{"-runas", "qemu7", "-chroot", "/run/c/6f1c2a3b/chroot"}},
		},
		{
			name: "qemu 9 run-with",
			hv:   map[string]string{"use_chroot": "true"},
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				rt.RunWith = true
			},
			want:    [][]string{{"-run-with", "user=corral-qemu,chroot=/run/c/6f1c2a3b/chroot"}},
			notWant: []string{"-runas", "-chroot"},
		},
		{
			name: "no user switch",
			mutate: func(s *hypervisor.InstanceSpec, rt *Runtime) {
				rt.RunAs = ""
			},
			notWant: []string{"-runas", "-run-with"},
		},
		{
			name: "reboot exit, localtime, cpu, cdrom",
			hv: map[string]string{"reboot_behavior": "exit", "use_localtime": "yes", "cpu_type": "qemu64,+ssse3",
				"cdrom_image_path": "/iso/install.iso", "boot_order": "cdrom"},
			want: [][]string{
				{"-no-reboot"}, {"-rtc", "base=localtime"}, {"-cpu", "qemu64,+ssse3"}, {"-boot", "order=d"},
				{"-drive", "file=/iso/install.iso,format=raw,media=cdrom,if=ide,readonly=on"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, rt := testSpec(tc.hv), testRuntime()
			if tc.mutate != nil {
				tc.mutate(&spec, &rt)
			}
			argv, err := BuildCommand(spec, rt)
			if err != nil {
				t.Fatal(err)
			}
			for _, seq := range tc.want {
				if !hasSeq(argv, seq...) {
					t.Errorf("argv lacks %q\nargv: %q", seq, argv)
				}
			}
			for _, bad := range tc.notWant {
				for _, a := range argv {
					if strings.Contains(a, bad) {
						t.Errorf("argv has %q\nargv: %q", bad, argv)
					}
				}
			}
		})
	}
}

func TestBuildCommandErrors(t *testing.T) {
	tests := []struct {
		name   string
		hv     map[string]string
		mutate func(*hypervisor.InstanceSpec, *Runtime)
		class  ecode.Class // "" for a plain (programming) error
	}{
		{name: "bad param", hv: map[string]string{"disk_type": "nvme"}, class: ecode.Inval},
		{name: "unknown param", hv: map[string]string{"frobnicate": "1"}, class: ecode.Inval},
		{name: "nic without tap", mutate: func(s *hypervisor.InstanceSpec, _ *Runtime) { s.NICs[0].Tap = "" }, class: ecode.Inval},
		{name: "vnc tcp without port", hv: map[string]string{"vnc_bind_address": "0.0.0.0"}, class: ecode.Inval},
		{name: "bad uuid", mutate: func(s *hypervisor.InstanceSpec, _ *Runtime) { s.UUID = "x" }, class: ecode.Inval},
		{name: "no qmp socket", mutate: func(_ *hypervisor.InstanceSpec, rt *Runtime) { rt.QMPSocket = "" }},
		{name: "serial without log", mutate: func(_ *hypervisor.InstanceSpec, rt *Runtime) { rt.SerialLog = "" }},
		{name: "chroot without dir", hv: map[string]string{"use_chroot": "true"}, mutate: func(_ *hypervisor.InstanceSpec, rt *Runtime) { rt.ChrootDir = "" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, rt := testSpec(tc.hv), testRuntime()
			if tc.mutate != nil {
				tc.mutate(&spec, &rt)
			}
			_, err := BuildCommand(spec, rt)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.class != "" && ecode.ClassOf(err) != tc.class {
				t.Fatalf("class %s, want %s: %v", ecode.ClassOf(err), tc.class, err)
			}
		})
	}
}

func TestHelpHasRunWithUser(t *testing.T) {
	tests := map[string]bool{
		"-runas user     change to user id user just before starting the VM\n":                                       false,
		"-run-with [async-teardown=on|off][,chroot=dir]\n                Set miscellaneous QEMU process lifecycle\n": false,
		"-chroot dir\n-run-with [async-teardown=on|off][,chroot=dir][user=username|uid:gid]\n":                       true,
		"": false,
	}
	for help, want := range tests {
		if got := helpHasRunWithUser(help); got != want {
			t.Errorf("%q: %v, want %v", help, got, want)
		}
	}
}
