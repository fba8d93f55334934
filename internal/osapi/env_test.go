package osapi

import (
	"reflect"
	"strings"
	"testing"

	"github.com/corral/corral/internal/secret"
)

func testOS() *OS {
	return &OS{
		Name: "debootstrap", Path: "/srv/corral/os/debootstrap", APIVersions: []int{20, 15}, APIVersion: 20,
		Variants:   []string{"default", "minimal"},
		Parameters: [][2]string{{"dhcp", ""}, {"root-password", ""}},
		Trusted:    true, Valid: true,
	}
}

func testInstance() Instance {
	return Instance{
		Name: "inst1.example.com", OS: "debootstrap+minimal", UUID: "0b5c-inst",
		PrimaryNodeUUID: "n1-uuid", SecondaryNodeUUIDs: []string{"n2-uuid", "n3-uuid"},
		CTime: 1700000000.25, MTime: 1700000100, Hypervisor: "kvm",
		Disks: []Disk{
			{UUID: "d0-uuid", Name: "root", Path: "/srv/corral/file/0b5c-inst/d0-uuid.raw", SizeMiB: 1024, Access: "rw", BackendType: "file:loop"},
			{UUID: "d1-uuid", Path: "/dev/vg/d1", SizeMiB: 512, Access: "ro", BackendType: "block", FrontendType: "scsi-hd"},
		},
		NICs: []NIC{
			{MAC: "aa:00:00:00:00:01", UUID: "nic0-uuid", Name: "eth0", IP: "192.0.2.10", Mode: "bridged", Link: "br0"},
			{MAC: "aa:00:00:00:00:02", UUID: "nic1-uuid", Mode: "routed", Link: "100",
				NetworkName: "net1", NetworkUUID: "net1-uuid", NetworkTags: []string{"a", "b"},
				NetworkSubnet: "192.0.2.0/24", NetworkGateway: "192.0.2.1", NetworkMACPrefix: "aa:00:00"},
			{MAC: "aa:00:00:00:00:03", UUID: "nic2-uuid", Mode: "openvswitch", FrontendType: "e1000"},
		},
		BEParams:       map[string]string{"maxmem": "1024", "vcpus": "2"},
		HVParams:       map[string]string{"disk_type": "paravirtual", "nic_type": "paravirtual", "kernel_path": ""},
		OSParams:       map[string]string{"dhcp": "yes", "root-password": "public-default"},
		OSParamsSecret: map[string]secret.Secret{"root-password": "s3cret-pw"},
		DebugLevel:     1,
	}
}

func TestInstanceEnvGolden(t *testing.T) {
	want := []string{
		"DEBUG_LEVEL=1",
		"DISK_0_ACCESS=rw",
		"DISK_0_BACKEND_TYPE=file:loop",
		"DISK_0_FRONTEND_TYPE=paravirtual",
		"DISK_0_NAME=root",
		"DISK_0_PATH=/srv/corral/file/0b5c-inst/d0-uuid.raw",
		"DISK_0_SIZE=1024",
		"DISK_0_UUID=d0-uuid",
		"DISK_1_ACCESS=ro",
		"DISK_1_BACKEND_TYPE=block",
		"DISK_1_FRONTEND_TYPE=scsi-hd",
		"DISK_1_PATH=/dev/vg/d1",
		"DISK_1_SIZE=512",
		"DISK_1_UUID=d1-uuid",
		"DISK_COUNT=2",
		"HYPERVISOR=kvm",
		"INSTANCE_BE_maxmem=1024",
		"INSTANCE_BE_vcpus=2",
		"INSTANCE_CTIME=1700000000.25",
		"INSTANCE_HV_disk_type=paravirtual",
		"INSTANCE_HV_kernel_path=",
		"INSTANCE_HV_nic_type=paravirtual",
		"INSTANCE_MTIME=1700000100.0",
		"INSTANCE_NAME=inst1.example.com",
		"INSTANCE_OS=debootstrap+minimal",
		"INSTANCE_PRIMARY_NODE=n1-uuid",
		"INSTANCE_SECONDARY_NODES=n2-uuid n3-uuid",
		"INSTANCE_UUID=0b5c-inst",
		"NIC_0_BRIDGE=br0",
		"NIC_0_FRONTEND_TYPE=paravirtual",
		"NIC_0_IP=192.0.2.10",
		"NIC_0_LINK=br0",
		"NIC_0_MAC=aa:00:00:00:00:01",
		"NIC_0_MODE=bridged",
		"NIC_0_NAME=eth0",
		"NIC_0_UUID=nic0-uuid",
		"NIC_1_FRONTEND_TYPE=paravirtual",
		"NIC_1_LINK=100",
		"NIC_1_MAC=aa:00:00:00:00:02",
		"NIC_1_MODE=routed",
		"NIC_1_NETWORK_GATEWAY=192.0.2.1",
		"NIC_1_NETWORK_MAC_PREFIX=aa:00:00",
		"NIC_1_NETWORK_NAME=net1",
		"NIC_1_NETWORK_SUBNET=192.0.2.0/24",
		"NIC_1_NETWORK_TAGS=a b",
		"NIC_1_NETWORK_UUID=net1-uuid",
		"NIC_1_UUID=nic1-uuid",
		"NIC_2_FRONTEND_TYPE=e1000",
		"NIC_2_MAC=aa:00:00:00:00:03",
		"NIC_2_MODE=openvswitch",
		"NIC_2_UUID=nic2-uuid",
		"NIC_COUNT=3",
		"OSP_DHCP=yes",
		"OSP_ROOT_PASSWORD=public-default",
		"OS_API_VERSION=20",
		"OS_NAME=debootstrap",
		"OS_VARIANT=minimal",
		"PATH=/sbin:/bin:/usr/sbin:/usr/bin",
	}
	got := InstanceEnv(testOS(), testInstance())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("environment differs:\n got %q\nwant %q", got, want)
	}
	if strings.Contains(strings.Join(got, "\n"), "s3cret-pw") {
		t.Fatal("InstanceEnv must not carry secret OS parameters")
	}
}

func TestInstanceEnvMinimal(t *testing.T) {
	o := &OS{Name: "img", APIVersion: 10, APIVersions: []int{10}, Valid: true}
	inst := Instance{Name: "i", OS: "img", Disks: []Disk{{UUID: "d", Access: "rw", SizeMiB: 1}}, NICs: []NIC{{MAC: "m", UUID: "u", Mode: "bridged"}}}
	want := []string{
		"DEBUG_LEVEL=0", "DISK_0_ACCESS=rw", "DISK_0_SIZE=1", "DISK_0_UUID=d", "DISK_COUNT=1", "HYPERVISOR=",
		"INSTANCE_CTIME=0.0", "INSTANCE_MTIME=0.0", "INSTANCE_NAME=i", "INSTANCE_OS=img", "INSTANCE_PRIMARY_NODE=",
		"INSTANCE_SECONDARY_NODES=", "INSTANCE_UUID=",
		"NIC_0_BRIDGE=", "NIC_0_MAC=m", "NIC_0_MODE=bridged", "NIC_0_UUID=u", "NIC_COUNT=1",
		"OS_API_VERSION=10", "OS_NAME=img", "OS_VARIANT=", "PATH=/sbin:/bin:/usr/sbin:/usr/bin",
	}
	if got := InstanceEnv(o, inst); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
}

func TestCoreEnv(t *testing.T) {
	tests := []struct {
		name    string
		os      *OS
		variant string
		want    string // OS_VARIANT
	}{
		{"given variant", testOS(), "minimal", "minimal"},
		{"default variant", testOS(), "", "default"},
		{"no variants", &OS{Name: "x", APIVersion: 20}, "ignored", ""},
		{"api 10 ignores variants", &OS{Name: "x", APIVersion: 10, Variants: []string{"v"}}, "v", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := CoreEnv(tt.os, tt.variant, map[string]string{"root-password": "p", "Mixed_Case": "m"}, 0)
			want := []string{
				"DEBUG_LEVEL=0",
				"OSP_MIXED_CASE=m",
				"OSP_ROOT_PASSWORD=p",
				"OS_API_VERSION=" + map[int]string{10: "10", 20: "20"}[tt.os.APIVersion],
				"OS_NAME=" + tt.os.Name,
				"OS_VARIANT=" + tt.want,
				"PATH=/sbin:/bin:/usr/sbin:/usr/bin",
			}
			if !reflect.DeepEqual(env, want) {
				t.Fatalf("got %q\nwant %q", env, want)
			}
		})
	}
}

func TestPyFloat(t *testing.T) {
	for _, tt := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"},
		{1700000000, "1700000000.0"},
		{1700000000.123456, "1700000000.123456"},
		{0.5, "0.5"},
		{0.0001, "0.0001"},
		{0.00001, "1e-05"},
		{1e15, "1000000000000000.0"},
		{1e16, "1e+16"},
		{1.5e16, "1.5e+16"},
		{-2.25, "-2.25"},
	} {
		if got := pyFloat(tt.in); got != tt.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
