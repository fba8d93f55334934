package localcmd

import (
	"strings"
	"testing"
)

func TestNamesDir(t *testing.T) {
	for _, tc := range []struct {
		args []string
		dir  string
		want bool
	}{
		{[]string{"--state-dir", "/var/lib/corral"}, "/var/lib/corral", true},
		{[]string{"--state-dir=/var/lib/corral"}, "/var/lib/corral/", true},
		{[]string{"--data-dir=/var/lib/corral/etcd/m0/data"}, "/var/lib/corral", true},
		{[]string{"--state-dir", "/var/lib/corral/node1"}, "/var/lib/corral", true},
		{[]string{"--state-dir", "/var/lib/corral-dev"}, "/var/lib/corral", false},
		{[]string{"--data-dir=/var/lib/corral-dev/etcd"}, "/var/lib/corral", false},
		{[]string{"--name=m0", "x=/var/lib/corral"}, "/var/lib/corral", false},
		{nil, "/var/lib/corral", false},
	} {
		if got := namesDir(tc.args, tc.dir); got != tc.want {
			t.Errorf("namesDir(%q, %s) = %v, want %v", tc.args, tc.dir, got, tc.want)
		}
	}
}

func TestEtcdFlagsCheck(t *testing.T) {
	for _, tc := range []struct {
		f   etcdFlags
		err string
	}{
		{f: etcdFlags{}},
		{f: etcdFlags{endpoints: "https://10.0.0.1:2379, https://10.0.0.2:2379", prefix: "/corral/c1/"}},
		{f: etcdFlags{endpoints: "https://10.0.0.1:2379", ca: "ca", cert: "c", key: "k"}},
		{f: etcdFlags{ca: "ca"}, err: "need --etcd-endpoints"},
		{f: etcdFlags{endpoints: "10.0.0.1:2379"}, err: "--etcd-endpoints"},
		{f: etcdFlags{endpoints: "https://10.0.0.1:2379", prefix: "corral"}, err: "--etcd-prefix"},
	} {
		err := tc.f.check()
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("check(%+v) = %v, want error %q", tc.f, err, tc.err)
		}
	}
}
