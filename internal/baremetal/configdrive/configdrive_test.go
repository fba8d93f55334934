package configdrive

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral/corral/internal/bmc/bmctest"
)

// IsoFile reads path from the ISO 9660 image iso with xorriso.
func isoFile(t *testing.T, iso []byte, path string) string {
	t.Helper()
	dir := t.TempDir()
	img := filepath.Join(dir, "cd.iso")
	if err := os.WriteFile(img, iso, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if b, err := exec.Command("xorriso", "-osirrox", "on", "-indev", img, "-extract", path, out).CombinedOutput(); err != nil {
		t.Fatalf("xorriso extract %s: %v\n%s", path, err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func isoLabel(t *testing.T, iso []byte) string {
	t.Helper()
	img := filepath.Join(t.TempDir(), "cd.iso")
	if err := os.WriteFile(img, iso, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("xorriso", "-indev", img, "-pvd_info").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso -pvd_info: %v\n%s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Volume Id") {
			return strings.TrimSpace(l[strings.Index(l, ":")+1:])
		}
	}
	t.Fatalf("no volume id in %s", out)
	return ""
}

func TestEncodeObjectBuildsConfig2ISO(t *testing.T) {
	bmctest.NeedISOTools(t)
	const ud = "#cloud-config\nruncmd:\n  - [echo, joined]\n"
	cd := map[string]any{
		"meta_data":    map[string]any{"hostname": "w1"},
		"user_data":    ud,
		"network_data": map[string]any{"links": []any{}},
	}
	enc, err := Builder{}.Encode(context.Background(), cd, Machine{UUID: "u-1", Name: "bm1"})
	if err != nil {
		t.Fatal(err)
	}
	iso, err := Decode(enc)
	if err != nil {
		t.Fatal(err)
	}
	if l := isoLabel(t, iso); l != Label {
		t.Fatalf("volume label %q", l)
	}
	for _, v := range versions {
		if got := isoFile(t, iso, "/openstack/"+v+"/user_data"); got != ud {
			t.Fatalf("%s user_data %q", v, got)
		}
	}
	var md map[string]any
	if err := json.Unmarshal([]byte(isoFile(t, iso, "/openstack/latest/meta_data.json")), &md); err != nil {
		t.Fatal(err)
	}
	if md["uuid"] != "u-1" || md["name"] != "bm1" || md["hostname"] != "w1" {
		t.Fatalf("meta_data %v", md)
	}
	if got := isoFile(t, iso, "/openstack/latest/network_data.json"); got != `{"links":[]}` {
		t.Fatalf("network_data %q", got)
	}
	// The encoded form passes unchanged.
	again, err := Builder{}.Encode(context.Background(), enc, Machine{UUID: "u-1"})
	if err != nil || again != enc {
		t.Fatalf("encoded ISO not passed as is: %v", err)
	}
}

func TestEncodeObjectUserDataJSON(t *testing.T) {
	bmctest.NeedISOTools(t)
	iso, err := Builder{}.Build(context.Background(), map[string]any{"user_data": map[string]any{"a": 1.0}}, Machine{UUID: "u-2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := isoFile(t, iso, "/openstack/latest/user_data"); got != `{"a":1}` {
		t.Fatalf("user_data %q", got)
	}
}

func TestEncodeRefusesBadConfigDrives(t *testing.T) {
	const secret = "SECRET-bootstrap-token"
	for _, cd := range []any{
		"http://example.com/cd.iso",
		"!!" + secret,
		map[string]any{"userdata": secret},
		map[string]any{"meta_data": secret},
		map[string]any{"user_data": 3.0},
		42.0,
	} {
		_, err := Builder{}.Encode(context.Background(), cd, Machine{UUID: "u-3"})
		if err == nil {
			t.Fatalf("%v accepted", cd)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("the error quotes the config drive: %v", err)
		}
	}
}
