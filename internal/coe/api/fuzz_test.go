package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"testing"
)

func testCSR(t testing.TB) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
}

// FuzzRequestBodies feeds arbitrary bodies to every request decoder and
// the patch path: none may panic, and what they accept keeps their
// promises (a uuid and a name, counts in range, changes only of allowed
// fields with values of their types).
func FuzzRequestBodies(f *testing.F) {
	f.Add(templateBody)
	f.Add(`{"cluster_template_id": "k8s", "name": "c", "node_count": 0, "master_count": 1, "labels": {"a": "b"}}`)
	f.Add(`{"name": "ng", "node_count": 2, "min_node_count": 1, "max_node_count": 3}`)
	f.Add(`[{"op": "replace", "path": "/node_count", "value": 3}]`)
	f.Add(`[{"op": "add", "path": "/labels/x", "value": "y"}, {"op": "remove", "path": "/keypair_id"}]`)
	f.Add(`{"project_id": "p", "resource": "Cluster", "hard_limit": 3}`)
	f.Fuzz(func(t *testing.T, body string) {
		b := []byte(body)
		if name, uuid, fields, err := decodeTemplateCreate(b); err == nil {
			if name == "" || !isUUID(uuid) || fields["coe"] == nil || fields["image_id"] == nil {
				t.Fatalf("template accepted without name, uuid, coe or image: %s", body)
			}
		}
		for _, v := range []Version{MinVersion, {1, 10}} {
			if cc, err := decodeClusterCreate(b, v); err == nil {
				if n, ok := cc.Params["node_count"].(int); (ok && n < minNodes(v)) || cc.Name == "" || !isUUID(cc.UUID) || cc.Template == "" {
					t.Fatalf("cluster accepted at %s: %+v", v, cc)
				}
			}
			if g, err := decodeNodeGroupCreate(b, v); err == nil && (g.Name == "" || !isUUID(g.UUID)) {
				t.Fatalf("node group accepted: %+v", g)
			}
		}
		if _, _, limit, err := decodeQuota(b, "", ""); err == nil && limit < 0 {
			t.Fatalf("negative quota accepted: %s", body)
		}
		doc := map[string]any{"node_count": 1, "min_node_count": 0, "labels": map[string]string{"a": "b"}, "name": "x", "keypair_id": "k"}
		for _, kinds := range []map[string]fieldKind{nodeGroupPatchKinds, templatePatchKinds} {
			changes, err := patchChanges(b, doc, kinds)
			if err != nil {
				continue
			}
			for k, v := range changes {
				kind, ok := kinds[k]
				if !ok {
					t.Fatalf("patch changed %s, not allowed", k)
				}
				if v == nil {
					continue
				}
				if _, err := checkKind(k, v, kind); err != nil {
					t.Fatalf("patch set %s to %v of the wrong type", k, v)
				}
			}
		}
	})
}
