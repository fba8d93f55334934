// Package configdrive turns a deploy's config drive, as the Bare Metal API
// takes it, into the form Ironic hands its agent: an ISO 9660 image with
// the volume label config-2, gzip-compressed and base64-encoded.
//
// A deploy gives either an object {meta_data, user_data, network_data,
// vendor_data}, which is built into the OpenStack metadata layout
// (openstack/<version>/meta_data.json, user_data, network_data.json,
// vendor_data2.json, for the versions "latest" and 2012-08-10) with
// xorriso, or a string that already is such an encoded ISO, which is
// checked and passed on unchanged. URLs are refused: the conductor does
// not download config drives.
package configdrive

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// Label is the volume label cloud-init and Ironic's agent look for.
const Label = "config-2"

// MaxSize is the largest ISO the agent writes: its partition has at most
// 64 MiB, as Ironic's agent makes it.
const MaxSize = 64 << 20

// versions are the metadata versions written: "latest" is what cloud-init
// reads first; 2012-08-10 is the oldest OpenStack version, for readers
// that look for a dated one.
var versions = []string{"latest", "2012-08-10"}

// Machine names the machine the drive is for; its UUID and name fill
// meta_data's uuid and name when the deploy did not give them.
type Machine struct {
	UUID string
	Name string
}

// Builder makes config drive ISOs.
type Builder struct {
	XorrisoPath string        // xorriso; looked up in PATH when empty
	Timeout     time.Duration // bounds xorriso's run (1 minute when zero)
	TmpDir      string        // staging directory parent (os.TempDir when empty)
}

// Encode returns the config drive cd (the deploy's configdrive parameter)
// as a gzip-compressed, base64-encoded ISO 9660 image labelled config-2.
// Errors never quote cd: it may hold secrets.
func (b Builder) Encode(ctx context.Context, cd any, m Machine) (string, error) {
	switch v := cd.(type) {
	case string:
		if strings.HasPrefix(v, "http://") || strings.HasPrefix(v, "https://") {
			return "", ecode.Errorf(ecode.Inval, "node %s: a config drive URL is not supported; give the config drive itself", m.UUID)
		}
		iso, err := Decode(v)
		if err != nil {
			return "", ecode.Errorf(ecode.Inval, "node %s: config drive: %w", m.UUID, err)
		}
		if len(iso) > MaxSize {
			return "", ecode.Errorf(ecode.Inval, "node %s: the config drive has %d bytes, more than %d", m.UUID, len(iso), MaxSize)
		}
		return v, nil
	case map[string]any:
		iso, err := b.Build(ctx, v, m)
		if err != nil {
			return "", err
		}
		return encode(iso)
	}
	return "", ecode.Errorf(ecode.Inval, "node %s: the config drive must be an object or an encoded ISO string, not %T", m.UUID, cd)
}

// Decode turns an encoded config drive back into its ISO: base64, then
// gunzip when it is gzip-compressed (Ironic's agent also takes an
// uncompressed ISO).
func Decode(s string) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		return raw, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("bad gzip data: %w", err)
	}
	iso, err := io.ReadAll(io.LimitReader(zr, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("bad gzip data: %w", err)
	}
	return iso, nil
}

func encode(iso []byte) (string, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(iso); err != nil {
		return "", fmt.Errorf("compressing the config drive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("compressing the config drive: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// files lays out the config drive object's content by path, as Ironic
// does: user_data as given when a string, JSON-encoded when an object or
// a list; meta_data gets the machine's uuid and name unless given.
func files(cd map[string]any, m Machine) (map[string][]byte, error) {
	for k := range cd {
		switch k {
		case "meta_data", "user_data", "network_data", "vendor_data":
		default:
			return nil, ecode.Errorf(ecode.Inval, "node %s: config drive key %q is not one of meta_data, user_data, network_data, vendor_data", m.UUID, k)
		}
	}
	meta := map[string]any{}
	if v, ok := cd["meta_data"]; ok && v != nil {
		md, ok := v.(map[string]any)
		if !ok {
			return nil, ecode.Errorf(ecode.Inval, "node %s: config drive meta_data must be an object", m.UUID)
		}
		for k, x := range md {
			meta[k] = x
		}
	}
	if _, ok := meta["uuid"]; !ok && m.UUID != "" {
		meta["uuid"] = m.UUID
	}
	if _, ok := meta["name"]; !ok && m.Name != "" {
		meta["name"] = m.Name
	}
	out := map[string][]byte{}
	var err error
	if out["meta_data.json"], err = json.Marshal(meta); err != nil {
		return nil, fmt.Errorf("config drive meta_data: %w", err)
	}
	switch u := cd["user_data"].(type) {
	case nil:
	case string:
		out["user_data"] = []byte(u)
	case map[string]any, []any:
		if out["user_data"], err = json.Marshal(u); err != nil {
			return nil, fmt.Errorf("config drive user_data: %w", err)
		}
	default:
		return nil, ecode.Errorf(ecode.Inval, "node %s: config drive user_data must be a string, an object or a list", m.UUID)
	}
	for key, name := range map[string]string{"network_data": "network_data.json", "vendor_data": "vendor_data2.json"} {
		v, ok := cd[key]
		if !ok || v == nil {
			continue
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, ecode.Errorf(ecode.Inval, "node %s: config drive %s must be an object", m.UUID, key)
		}
		if out[name], err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("config drive %s: %w", key, err)
		}
	}
	return out, nil
}

// Build makes the ISO 9660 image of a config drive object.
func (b Builder) Build(ctx context.Context, cd map[string]any, m Machine) ([]byte, error) {
	content, err := files(cd, m)
	if err != nil {
		return nil, err
	}
	xorriso := b.XorrisoPath
	if xorriso == "" {
		xorriso = "xorriso"
	}
	if _, err := exec.LookPath(xorriso); err != nil {
		return nil, ecode.Errorf(ecode.Environ, "xorriso is not installed, the config drive cannot be built: %w", err)
	}
	stage, err := os.MkdirTemp(b.TmpDir, ".configdrive-")
	if err != nil {
		return nil, fmt.Errorf("config drive staging directory: %w", err)
	}
	defer os.RemoveAll(stage)
	root := filepath.Join(stage, "root")
	for _, v := range versions {
		dir := filepath.Join(root, "openstack", v)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("config drive staging directory: %w", err)
		}
		for name, data := range content {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				return nil, fmt.Errorf("config drive staging: %w", err)
			}
		}
	}
	timeout := b.Timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	iso := filepath.Join(stage, "configdrive.iso")
	cmd := exec.CommandContext(ctx, xorriso, "-as", "mkisofs", "-quiet", "-o", iso,
		"-V", Label, "-J", "-r", "-l", "-allow-lowercase", "-allow-multidot", "-ldots",
		"-publisher", "Corral", root)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, ecode.ExecErrorf("xorriso could not build the config drive of node %s: %w: %s", m.UUID, err, tail(out.String(), 600))
	}
	data, err := os.ReadFile(iso)
	if err != nil {
		return nil, fmt.Errorf("reading the config drive: %w", err)
	}
	if len(data) > MaxSize {
		return nil, ecode.Errorf(ecode.Inval, "node %s: the config drive has %d bytes, more than %d", m.UUID, len(data), MaxSize)
	}
	return data, nil
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}
