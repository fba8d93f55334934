package config

import "testing"

func TestCheckMasterNetwork(t *testing.T) {
	for _, tc := range []struct {
		ip, dev string
		mask    int
		ok      bool
	}{
		{"", "", 0, true},
		{"", "br0", 24, true},
		{"192.0.2.1", "br0", 0, true},
		{"192.0.2.1", "br0", 32, true},
		{"2001:db8::1", "br0", 64, true},
		{"192.0.2.1", "", 32, false},
		{"192.0.2.1", "br 0", 32, false},
		{"192.0.2.1", "averyveryverylongname", 32, false},
		{"192.0.2.1", "br0", 33, false},
		{"192.0.2.1", "br0", -1, false},
		{"127.0.0.5", "br0", 32, false},
		{"0.0.0.0", "br0", 32, false},
		{"fe80::1%eth0", "br0", 64, false},
		{"cluster", "br0", 32, false},
	} {
		err := CheckMasterNetwork(tc.ip, tc.dev, tc.mask)
		if (err == nil) != tc.ok {
			t.Errorf("CheckMasterNetwork(%q, %q, %d) = %v, want ok %v", tc.ip, tc.dev, tc.mask, err, tc.ok)
		}
	}
	for _, tc := range []struct {
		c    Cluster
		want int
	}{
		{Cluster{}, 32},
		{Cluster{ClusterIP: "192.0.2.1"}, 32},
		{Cluster{ClusterIP: "2001:db8::1"}, 128},
		{Cluster{ClusterIP: "2001:db8::1", MasterNetmask: 64}, 64},
	} {
		if got := tc.c.MasterIPNetmask(); got != tc.want {
			t.Errorf("MasterIPNetmask of %q/%d = %d, want %d", tc.c.ClusterIP, tc.c.MasterNetmask, got, tc.want)
		}
	}
}
