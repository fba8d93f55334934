package devcluster

import (
	"strings"
	"testing"
)

func TestOptionsStore(t *testing.T) {
	for _, tc := range []struct {
		store   string
		members int
		want    string
		wantN   int
		err     string
	}{
		{store: "", want: "bbolt"},
		{store: "bbolt", want: "bbolt"},
		{store: "etcd", want: "etcd", wantN: 1},
		{store: "etcd", members: 3, want: "etcd", wantN: 3},
		{store: "etcd", members: 2, err: "1 or 3"},
		{store: "bbolt", members: 3, err: "--store etcd"},
		{store: "zk", err: "want bbolt or etcd"},
	} {
		o := Options{StateDir: t.TempDir(), BinDir: "/bin", Hypervisors: []string{"fake"}, Store: tc.store, EtcdMembers: tc.members}
		err := o.fill()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("store %q members %d: %v, want error %q", tc.store, tc.members, err, tc.err)
			}
			continue
		}
		if err != nil || o.Store != tc.want || o.EtcdMembers != tc.wantN {
			t.Errorf("store %q members %d: %v, got %q/%d, want %q/%d", tc.store, tc.members, err, o.Store, o.EtcdMembers, tc.want, tc.wantN)
		}
	}
}
