package config

import (
	"reflect"
	"testing"
)

func TestClusterOSParamsVariantOverridesOS(t *testing.T) {
	c := &Cluster{OSParams: map[string]Params{
		"debootstrap":          {"mirror": "http://a", "dhcp": "yes"},
		"debootstrap+bookworm": {"mirror": "http://b"},
		"debootstrap+trixie":   {"dhcp": "no"},
	}}
	for _, tc := range []struct {
		os   string
		want Params
	}{
		{"debootstrap", Params{"mirror": "http://a", "dhcp": "yes"}},
		{"debootstrap+bookworm", Params{"mirror": "http://b", "dhcp": "yes"}},
		{"debootstrap+trixie", Params{"mirror": "http://a", "dhcp": "no"}},
		{"debootstrap+sid", Params{"mirror": "http://a", "dhcp": "yes"}},
		{"other+x", Params{}},
	} {
		if got := ClusterOSParams(c, tc.os); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.os, got, tc.want)
		}
	}
	inst := &Instance{OS: "debootstrap+bookworm", OSParams: Params{"dhcp": "maybe"}}
	if got, want := InstanceOSParams(c, inst), (Params{"mirror": "http://b", "dhcp": "maybe"}); !reflect.DeepEqual(got, want) {
		t.Errorf("instance: got %v, want %v", got, want)
	}
	if c.OSParams["debootstrap"]["mirror"] != "http://a" {
		t.Fatal("the lookup must not change the cluster's parameters")
	}
}
