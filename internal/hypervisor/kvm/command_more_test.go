package kvm

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/corral/corral/internal/hypervisor"
)

func TestBuildCommandMoreParams(t *testing.T) {
	tests := []struct {
		name    string
		hv      map[string]string
		port    int
		want    [][]string
		notWant []string
	}{
		{
			name: "topology",
			hv:   map[string]string{"cpu_cores": "2", "cpu_sockets": "1"},
			want: [][]string{{"-smp", "2,cores=2,sockets=1"}},
		},
		{
			name: "cpu mask is not on the command line",
			hv:   map[string]string{"cpu_mask": "0:1"},
			want: [][]string{{"-smp", "2"}},
		},
		{
			name: "vnc tls x509 verify and password",
			hv: map[string]string{"vnc_bind_address": "127.0.0.1", "vnc_tls": "true", "vnc_x509_path": "/etc/corral/vnc,x509",
				"vnc_x509_verify": "true", "vnc_password_file": "/etc/corral/vnc.pw", "keymap": "de-ch"},
			port: 5901,
			want: [][]string{
				{"-k", "de-ch"},
				{"-object", "tls-creds-x509,id=vnctls0,endpoint=server,dir=/etc/corral/vnc,,x509,verify-peer=on", "-vga", "std", "-vnc", "127.0.0.1:1,tls-creds=vnctls0,password=on"},
			},
			notWant: []string{"vnc.pw"},
		},
		{
			name: "vnc anonymous tls",
			hv:   map[string]string{"vnc_bind_address": "::1", "vnc_tls": "true"},
			port: 5902,
			want: [][]string{{"-object", "tls-creds-anon,id=vnctls0,endpoint=server", "-vga", "std", "-vnc", "[::1]:2,tls-creds=vnctls0"}},
		},
		{
			name: "vnc unix socket with password",
			hv:   map[string]string{"vnc_bind_address": "unix", "vnc_password_file": "/etc/pw"},
			want: [][]string{{"-vnc", "unix:/run/c/6f1c2a3b/vnc.sock,password=on"}},
		},
		{
			name: "spice with agent and password",
			hv: map[string]string{"spice_bind": "127.0.0.1", "spice_ip_version": "4", "spice_password_file": "/etc/spice.pw",
				"spice_image_compression": "quic", "spice_jpeg_wan_compression": "never", "spice_zlib_glz_wan_compression": "auto",
				"spice_streaming_video": "off", "spice_playback_compression": "false"},
			port: 11000,
			want: [][]string{
				{"-vga", "qxl"},
				{"-device", "virtio-serial-pci,id=spiceserial,addr=0x1d", "-chardev", "spicevmc,id=spicechannel0,name=vdagent",
					"-device", "virtserialport,bus=spiceserial.0,chardev=spicechannel0,name=com.redhat.spice.0"},
				{"-spice", "addr=127.0.0.1,port=11000,ipv4=on,image-compression=quic,jpeg-wan-compression=never,zlib-glz-wan-compression=auto,streaming-video=off,playback-compression=off"},
			},
			notWant: []string{"disable-ticketing", "spice.pw", "-vnc"},
		},
		{
			name:    "spice without password or agent",
			hv:      map[string]string{"spice_bind": "::1", "spice_use_vdagent": "false", "vga": "std"},
			port:    11001,
			want:    [][]string{{"-vga", "std"}, {"-spice", "addr=::1,port=11001,disable-ticketing=on,agent-mouse=off"}},
			notWant: []string{"spicevmc"},
		},
		{
			name: "usb tablet and host devices",
			hv:   map[string]string{"usb_mouse": "tablet", "usb_devices": "046d:c52b,1d6b:2"},
			want: [][]string{{"-device", "qemu-xhci,id=usb0,addr=0x1f", "-device", "usb-tablet,bus=usb0.0",
				"-device", "usb-host,bus=usb0.0,vendorid=0x046d,productid=0xc52b",
				"-device", "usb-host,bus=usb0.0,vendorid=0x1d6b,productid=0x0002"}},
		},
		{
			name: "usb mouse",
			hv:   map[string]string{"usb_mouse": "mouse"},
			want: [][]string{{"-device", "usb-mouse,bus=usb0.0"}},
		},
		{
			name: "mem path",
			hv:   map[string]string{"mem_path": "/dev/hugepages", "machine_version": "pc"},
			want: [][]string{
				{"-machine", "pc,memory-backend=mem0"},
				{"-object", "memory-backend-file,id=mem0,size=256M,mem-path=/dev/hugepages,share=on,prealloc=on"},
			},
		},
		{
			name: "discard, second cdrom, floppy",
			hv:   map[string]string{"disk_discard": "unmap", "cdrom_image_path": "/iso/a.iso", "cdrom2_image_path": "/iso/b.iso", "floppy_image_path": "/img/f.img"},
			want: [][]string{
				{"-drive", "file=/srv/disks/web1.disk0,format=raw,if=none,id=drive0,cache=none,discard=unmap"},
				{"-drive", "file=/iso/a.iso,format=raw,media=cdrom,if=ide,readonly=on", "-drive", "file=/iso/b.iso,format=raw,media=cdrom,if=ide,readonly=on", "-drive", "file=/img/f.img,format=raw,if=floppy"},
			},
		},
		{
			name: "sound hda",
			hv:   map[string]string{"soundhw": "hda"},
			want: [][]string{{"-audiodev", "none,id=audio0", "-device", "intel-hda,id=hda0,addr=0x1e", "-device", "hda-duplex,bus=hda0.0,audiodev=audio0"}},
		},
		{
			name: "sound ac97",
			hv:   map[string]string{"soundhw": "ac97"},
			want: [][]string{{"-device", "AC97,audiodev=audio0,addr=0x1e"}},
		},
		{
			name: "guest agent",
			hv:   map[string]string{"use_guest_agent": "true"},
			want: [][]string{{"-chardev", "socket,id=qga0,path=/run/c/6f1c2a3b/qga.sock,server=on,wait=off",
				"-device", "virtio-serial-pci,id=qga0serial,addr=0x1c",
				"-device", "virtserialport,bus=qga0serial.0,chardev=qga0,name=org.qemu.guest_agent.0"}},
		},
		{
			name: "vhost and queues",
			hv:   map[string]string{"vhost_net": "true", "virtio_net_queues": "4"},
			want: [][]string{{"-netdev", "tap,id=n0,ifname=crl6f1c2a3bn0,script=no,downscript=no,vhost=on,queues=4",
				"-device", "virtio-net-pci,netdev=n0,mac=aa:00:00:12:34:56,id=nic0,addr=0x14,mq=on,vectors=10"}},
		},
		{
			name: "kvm extra last before incoming",
			hv:   map[string]string{"kvm_extra": `-global "kvm-pit.lost_tick_policy=discard" -device pci-testdev`},
			want: [][]string{{"-runas", "corral-qemu", "-global", "kvm-pit.lost_tick_policy=discard", "-device", "pci-testdev"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := testSpec(tc.hv)
			spec.NetworkPort = tc.port
			argv, err := BuildCommand(spec, withGuestAgent(testRuntime()))
			if err != nil {
				t.Fatal(err)
			}
			for _, seq := range tc.want {
				if !hasSeq(argv, seq...) {
					t.Errorf("missing %q in\n%q", seq, argv)
				}
			}
			for _, bad := range tc.notWant {
				if slices.ContainsFunc(argv, func(a string) bool { return strings.Contains(a, bad) }) {
					t.Errorf("%q must not appear in %q", bad, argv)
				}
			}
		})
	}
}

func withGuestAgent(rt Runtime) Runtime {
	rt.GuestAgentSocket = "/run/c/6f1c2a3b/qga.sock"
	return rt
}

func TestBuildCommandMoreErrors(t *testing.T) {
	spec := testSpec(map[string]string{"use_guest_agent": "true"})
	if _, err := BuildCommand(spec, testRuntime()); err == nil {
		t.Error("guest agent without a socket path accepted")
	}
	spec = testSpec(map[string]string{"spice_bind": "127.0.0.1"})
	if _, err := BuildCommand(spec, testRuntime()); err == nil {
		t.Error("spice without a network port accepted")
	}
}

func TestCPUPinning(t *testing.T) {
	tests := []struct {
		mask  string
		vcpus int
		want  [][]int
		err   string
	}{
		{"all", 2, nil, ""},
		{"1", 2, [][]int{{1}, {1}}, ""},
		{"0:1", 2, [][]int{{0}, {1}}, ""},
		{"all:0-1", 2, [][]int{nil, {0, 1}}, ""},
		{"0:1", 3, nil, "Number of vCPUs (3) doesn't match the number of CPU mask entries (2)"},
		{"0-2", 1, nil, "names CPU 2, but the node has 2 CPUs"},
	}
	for _, tc := range tests {
		got, err := cpuPinning(tc.mask, tc.vcpus, 2)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s/%d: error %v, want %q", tc.mask, tc.vcpus, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.EqualFunc(got, tc.want, slices.Equal) || (got == nil) != (tc.want == nil) {
			t.Errorf("%s/%d: got %v, %v; want %v", tc.mask, tc.vcpus, got, err, tc.want)
		}
	}
}

func TestCheckHostParams(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec(nil)
	hv := func(kv ...string) map[string]string {
		m := hypervisor.DefaultParams(hypervisor.KVM)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	if err := checkHostParams(spec, hv("mem_path", dir), 65534, 65534); err == nil {
		t.Error("mem_path in a root-only 0700 directory accepted for uid 65534")
	}
	if err := checkHostParams(spec, hv("mem_path", dir), -1, -1); err != nil {
		t.Errorf("mem_path for qemu as the caller: %v", err)
	}
	if err := checkHostParams(spec, hv("mem_path", dir+"/missing"), -1, -1); err == nil {
		t.Error("missing mem_path accepted")
	}
	old := vhostNetDevice
	vhostNetDevice = dir + "/vhost-net"
	defer func() { vhostNetDevice = old }()
	err := checkHostParams(spec, hv("vhost_net", "true"), -1, -1)
	if err == nil || !strings.Contains(err.Error(), "vhost_net needs") {
		t.Errorf("vhost_net without the device: %v", err)
	}
	if err := checkHostParams(spec, hv("vnc_bind_address", "127.0.0.1", "vnc_tls", "true", "vnc_x509_path", dir), -1, -1); err == nil ||
		!strings.Contains(err.Error(), "lacks ca-cert.pem") {
		t.Errorf("x509 dir without certificates: %v", err)
	}
}

func TestHelpHasSpice(t *testing.T) {
	if !helpHasSpice("-display none\n-spice [port=port][,tls-port=secured-port]\n") {
		t.Error("-spice line not found")
	}
	if helpHasSpice("-display none\n-vnc display\n# -spice is not here\n") {
		t.Error("found -spice where there is none")
	}
}

// TestStartRefusesSpiceWithoutSpice: a qemu whose -help lacks -spice (the
// test double's) is not started for an instance with spice_bind.
func TestStartRefusesSpiceWithoutSpice(t *testing.T) {
	e := newEnv(t, fakeModeNormal)
	spec := fakeSpec(t, "spice0.example.org", testUUID)
	spec.NetworkPort = 11010
	spec.HVParams["spice_bind"] = "127.0.0.1"
	err := e.h.Start(context.Background(), spec)
	if err == nil || !strings.Contains(err.Error(), "SPICE is configured, but") {
		t.Fatalf("Start = %v, want the SPICE refusal", err)
	}
	if list, _ := e.h.List(context.Background()); len(list) != 0 {
		t.Fatalf("instances after the refusal: %+v", list)
	}
}
