package controlplane

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"time"
)

// ociImage is a one-layer image of a static busybox, written as an OCI
// image layout archive that `ctr images import` reads: no registry, no
// network. The same inputs always give the same bytes (and digests).
type ociImage struct {
	Ref     string // e.g. corral/busybox:1, stored as docker.io/<Ref>
	Cmd     []string
	Busybox []byte
}

// busyboxApplets are the commands the image links to busybox.
var busyboxApplets = []string{"sh", "sleep", "ls", "cat", "echo", "wget", "nc", "ip", "ps", "hostname", "id", "env", "true", "false", "date", "mkdir", "rm"}

type tarEntry struct {
	name, link string
	mode       int64
	body       []byte
	typ        byte
}

// writeTar writes entries with root ownership and time zero.
func writeTar(w io.Writer, entries []tarEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)), Typeflag: e.typ,
			ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(e.body); err != nil {
			return err
		}
	}
	return tw.Close()
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// layer is the image's root file system as an uncompressed tar.
func (img ociImage) layer() ([]byte, error) {
	dir := func(name string, mode int64) tarEntry { return tarEntry{name: name, mode: mode, typ: tar.TypeDir} }
	file := func(name string, mode int64, body []byte) tarEntry {
		return tarEntry{name: name, mode: mode, body: body, typ: tar.TypeReg}
	}
	entries := []tarEntry{dir("bin/", 0o755), file("bin/busybox", 0o755, img.Busybox)}
	for _, a := range busyboxApplets {
		entries = append(entries, tarEntry{name: "bin/" + a, link: "busybox", mode: 0o777, typ: tar.TypeSymlink})
	}
	entries = append(entries, dir("etc/", 0o755),
		file("etc/group", 0o644, []byte("root:x:0:\n")),
		file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")),
		dir("root/", 0o700), dir("tmp/", 0o1777))
	var buf bytes.Buffer
	err := writeTar(&buf, entries)
	return buf.Bytes(), err
}

// writeArchive writes the image layout (oci-layout, index.json, blobs) as
// a tar to w.
func (img ociImage) writeArchive(w io.Writer) error {
	layer, err := img.layer()
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"}, "Cmd": img.Cmd},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digestOf(layer)}},
	})
	if err != nil {
		return err
	}
	desc := func(mediaType string, b []byte) map[string]any {
		return map[string]any{"mediaType": mediaType, "digest": digestOf(b), "size": len(b)}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
		"config": desc("application/vnd.oci.image.config.v1+json", config),
		"layers": []any{desc("application/vnd.oci.image.layer.v1.tar", layer)},
	})
	if err != nil {
		return err
	}
	md := desc("application/vnd.oci.image.manifest.v1+json", manifest)
	md["annotations"] = map[string]string{
		"io.containerd.image.name":          "docker.io/" + img.Ref,
		"org.opencontainers.image.ref.name": img.Ref[strings.LastIndexByte(img.Ref, ':')+1:],
	}
	index, err := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{md}})
	if err != nil {
		return err
	}
	blob := func(b []byte) tarEntry {
		return tarEntry{name: "blobs/sha256/" + strings.TrimPrefix(digestOf(b), "sha256:"), mode: 0o644, body: b, typ: tar.TypeReg}
	}
	return writeTar(w, []tarEntry{
		{name: "oci-layout", mode: 0o644, body: []byte(`{"imageLayoutVersion":"1.0.0"}`), typ: tar.TypeReg},
		{name: "index.json", mode: 0o644, body: index, typ: tar.TypeReg},
		{name: "blobs/", mode: 0o755, typ: tar.TypeDir},
		{name: "blobs/sha256/", mode: 0o755, typ: tar.TypeDir},
		blob(layer), blob(config), blob(manifest),
	})
}
