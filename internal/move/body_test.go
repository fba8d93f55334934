package move

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseDetails(t *testing.T) {
	raw, _ := json.Marshal(infoResult("web1"))
	d, err := ParseDetails(raw)
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "web1" || d.ConfigState != "up" || d.OS != "debootstrap+default" || d.DiskTemplate != "file" ||
		len(d.Disks) != 2 || d.Disks[0].SizeMiB != 1024 || d.Disks[0].Name != "root" || d.Disks[1].Mode != "ro" || d.Disks[1].Name != "" ||
		len(d.NICs) != 1 || d.NICs[0]["mac"] != "aa:00:00:11:22:33" || d.NICs[0]["link"] != "br0" {
		t.Errorf("ParseDetails: %+v", d)
	}
	if _, ok := d.NICs[0]["vlan"]; ok {
		t.Errorf("an empty vlan was kept: %v", d.NICs[0])
	}
	if _, ok := d.NICs[0]["ip"]; ok {
		t.Errorf("a null IP was kept: %v", d.NICs[0])
	}

	for _, tc := range []struct{ raw, want string }{
		{`[]`, "malformed"},
		{`{}`, "names 0 instances"},
		{`{"a": {"disk_template": "file"}, "b": {"disk_template": "file"}}`, "names 2 instances"},
		{`{"a": {}}`, "no disk template"},
		{`{"a": {"disk_template": "file", "disks": [{"size": -1}]}}`, "invalid size"},
		{`{"a": {"disk_template": "file", "disks": [{"size": 1.5}]}}`, "invalid size"},
		{`{"a": {"disk_template": "file", "nics": [["eth0", "u"]]}}`, "do the clusters' versions match"},
	} {
		if _, err := ParseDetails([]byte(tc.raw)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDetails(%s): %v, want %q", tc.raw, err, tc.want)
		}
	}
}

func TestNetworkNICDropsModeAndLink(t *testing.T) {
	d, err := ParseDetails([]byte(`{"a": {"disk_template": "diskless",
		"nics": [["n", "u", "10.0.0.5", "aa:bb:cc:dd:ee:ff", "bridged", "br0", "", "net1", {}]]}}`))
	if err != nil {
		t.Fatal(err)
	}
	nic := d.NICs[0]
	if nic["network"] != "net1" || nic["ip"] != "10.0.0.5" || nic["mode"] != nil || nic["link"] != nil {
		t.Errorf("NIC %v", nic)
	}
}

func TestCreateBodyOverrides(t *testing.T) {
	raw, _ := json.Marshal(infoResult("web1"))
	d, _ := ParseDetails(raw)
	d.ConfigState = "down"
	exp := &ExportInfo{Handshake: json.RawMessage(`[0,"h","s"]`), X509KeyName: json.RawMessage(`["k","h","s"]`), X509CA: json.RawMessage(`"ca"`)}
	b, err := CreateBody(d, exp, Overrides{IAllocator: "hail", SecondNode: "dn3", HVParams: map[string]any{"acpi": false}}, true)
	if err != nil {
		t.Fatal(err)
	}
	if b["start"] != false || b["iallocator"] != "hail" || b["snode"] != "dn3" || b["opportunistic_locking"] != true ||
		b["hvparams"].(map[string]any)["acpi"] != false || d.HVParams["acpi"] != true {
		t.Errorf("CreateBody: %v (source hvparams %v)", b, d.HVParams)
	}
	if _, ok := b["pnode"]; ok {
		t.Errorf("CreateBody sent an empty pnode: %v", b)
	}
	if _, err := CreateBody(d, exp, Overrides{NICs: []map[string]any{{}, {"link": "br2"}}}, false); err == nil {
		t.Error("CreateBody accepted more NIC overrides than NICs")
	}
}

func TestParseImportAndExportInfo(t *testing.T) {
	if _, err := ParseImportInfo([]byte(`{"disks": [[1],[2]], "x509_ca": "c"}`), 2); err != nil {
		t.Errorf("ParseImportInfo: %v", err)
	}
	for _, tc := range []struct {
		raw   string
		disks int
	}{{`{"disks": [[1]], "x509_ca": "c"}`, 2}, {`{"disks": []}`, 0}, {`"x"`, 0}} {
		if _, err := ParseImportInfo([]byte(tc.raw), tc.disks); err == nil {
			t.Errorf("ParseImportInfo(%s, %d) accepted it", tc.raw, tc.disks)
		}
	}
	if _, err := ParseExportInfo([]byte(`{"handshake": [0], "x509_key_name": ["k"], "x509_ca": "c"}`)); err != nil {
		t.Errorf("ParseExportInfo: %v", err)
	}
	if _, err := ParseExportInfo([]byte(`null`)); err == nil {
		t.Error("ParseExportInfo(null) accepted it (a local-mode result)")
	}
}

func TestParseJobID(t *testing.T) {
	for raw, want := range map[string]int64{`12`: 12, `"34"`: 34, ` 5 `: 5} {
		if got, err := parseJobID(json.RawMessage(raw)); err != nil || got != want {
			t.Errorf("parseJobID(%s) = %d, %v", raw, got, err)
		}
	}
	for _, raw := range []string{`null`, `-1`, `"x"`, `{}`} {
		if _, err := parseJobID(json.RawMessage(raw)); err == nil {
			t.Errorf("parseJobID(%s) accepted it", raw)
		}
	}
}

func FuzzParseDetails(f *testing.F) {
	raw, _ := json.Marshal(infoResult("web1"))
	f.Add(raw)
	f.Add([]byte(`{"a": {"disk_template": "diskless", "nics": [["n", "u", "1.2.3.4", "m", "routed", "l", "", null, null]]}}`))
	f.Add([]byte(`{"a": {"disk_template": "file", "disks": [{"size": 1e30}]}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDetails(data)
		if err != nil {
			return
		}
		exp := &ExportInfo{Handshake: json.RawMessage(`0`), X509KeyName: json.RawMessage(`0`), X509CA: json.RawMessage(`0`)}
		b, err := CreateBody(d, exp, Overrides{}, false)
		if err != nil {
			t.Fatalf("CreateBody of parsed details: %v", err)
		}
		if _, err := json.Marshal(b); err != nil {
			t.Fatalf("the body does not encode: %v", err)
		}
		if len(b["disks"].([]any)) != len(d.Disks) || len(b["nics"].([]any)) != len(d.NICs) {
			t.Fatalf("the body lost disks or NICs: %v", b)
		}
	})
}

func FuzzParseLogEntry(f *testing.F) {
	f.Add([]byte(`[1, [1700000000, 0], "message", "hello"]`))
	f.Add([]byte(`[2, [1, 2], "remote-import", {"disks": [], "x509_ca": "c"}]`))
	f.Add([]byte(`[1, 2, 3]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := parseLogEntry(data)
		if err != nil {
			return
		}
		_ = e.text()
		if e.Type == logRemoteImport {
			_, _ = ParseImportInfo(e.Message, 0)
		}
	})
}
