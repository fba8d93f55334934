package api

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/corral/corral/internal/config"
)

// hiddenFields are stored fields that are Corral's own business, never
// shown: bookkeeping, the driver's placement, the trust and sealed keys.
var hiddenFields = []string{"serial_no", "ctime", "mtime", "driver", "placement", "trust_id",
	"private_key_sealed", "nodes", "generation", "pod_subnets"}

// wsmeDoc renders a stored object as Magnum's wsme objects show it: its
// JSON with Corral's own fields dropped, unset ones (null, "") omitted,
// and created_at/updated_at from the object's times.
func wsmeDoc(obj any, meta *config.Meta) map[string]any {
	raw, _ := json.Marshal(obj)
	var doc map[string]any
	_ = json.Unmarshal(raw, &doc)
	for _, k := range hiddenFields {
		delete(doc, k)
	}
	for k, v := range doc {
		if v == nil || v == "" {
			delete(doc, k)
		}
	}
	if meta.CTime > 0 {
		doc["created_at"] = isoTime(meta.CTime)
	}
	if meta.MTime > 0 && meta.MTime != meta.CTime {
		doc["updated_at"] = isoTime(meta.MTime)
	}
	return doc
}

// isoTime is Magnum's time format (UTC, offset spelled out).
func isoTime(t float64) string {
	sec := int64(t)
	return time.Unix(sec, int64((t-float64(sec))*1e9)).UTC().Format("2006-01-02T15:04:05+00:00")
}

// keep drops every member of doc but names (and links).
func keep(doc map[string]any, names ...string) map[string]any {
	for k := range doc {
		if k != "links" && !slices.Contains(names, k) {
			delete(doc, k)
		}
	}
	return doc
}

func links(base string, parts ...string) []map[string]string {
	path := ""
	for _, p := range parts {
		path += "/" + p
	}
	return []map[string]string{
		{"href": base + "/v1" + path, "rel": "self"},
		{"href": base + path, "rel": "bookmark"},
	}
}

func templateDoc(t *config.COETemplate, base string) map[string]any {
	doc := wsmeDoc(t, &t.Meta)
	if doc["labels"] == nil {
		doc["labels"] = map[string]string{}
	}
	if len(t.Tags) > 0 {
		doc["tags"] = strings.Join(t.Tags, ",") // Magnum's tags are one string
	}
	doc["links"] = links(base, "clustertemplates", t.UUID)
	return doc
}

// clusterListFields are what a cluster list (not detail) shows.
var clusterListFields = []string{"uuid", "name", "cluster_template_id", "keypair", "docker_volume_size",
	"labels", "node_count", "status", "master_flavor_id", "flavor_id", "create_timeout", "master_count",
	"health_status", "stack_id"}

// clusterDoc renders a cluster: its counts and addresses from its default
// groups, and (detail) how its labels differ from its template's.
func clusterDoc(c *Cluster, base string, detail bool) map[string]any {
	doc := wsmeDoc(c.COECluster, &c.Meta)
	doc["node_count"], doc["master_count"] = 0, 0
	for _, g := range c.NodeGroups {
		if !g.IsDefault {
			continue
		}
		switch g.Role {
		case config.COERoleMaster:
			doc["master_count"] = g.NodeCount
		case config.COERoleWorker:
			doc["node_count"] = g.NodeCount
		}
	}
	if doc["labels"] == nil {
		doc["labels"] = map[string]string{}
	}
	doc["links"] = links(base, "clusters", c.UUID)
	if !detail {
		return keep(doc, clusterListFields...)
	}
	over, added, skipped := labelsDiff(c.TemplateLabels, c.Labels)
	doc["labels_overridden"], doc["labels_added"], doc["labels_skipped"] = over, added, skipped
	return doc
}

// labelsDiff compares a cluster's labels to its template's: those it
// changes (with the template's value), adds, and leaves out.
func labelsDiff(parent, labels map[string]string) (overridden, added, skipped map[string]string) {
	overridden, added, skipped = map[string]string{}, map[string]string{}, map[string]string{}
	for k, v := range labels {
		pv, ok := parent[k]
		switch {
		case !ok:
			added[k] = v
		case pv != v:
			overridden[k] = pv
		}
	}
	for k, v := range parent {
		if _, ok := labels[k]; !ok {
			skipped[k] = v
		}
	}
	return overridden, added, skipped
}

// nodeGroupListFields are what a node group list (not detail) shows.
var nodeGroupListFields = []string{"uuid", "name", "flavor_id", "node_count", "role", "is_default",
	"image_id", "status", "stack_id"}

func nodeGroupDoc(g *config.COENodeGroup, base string, detail bool) map[string]any {
	doc := wsmeDoc(g, &g.Meta)
	if !detail {
		return keep(doc, nodeGroupListFields...)
	}
	if doc["labels"] == nil {
		doc["labels"] = map[string]string{}
	}
	doc["links"] = links(base, "clusters", g.Cluster, "nodegroups", g.UUID)
	return doc
}

// quotaDoc renders a quota; Magnum's id is an integer, here a stable hash
// of the quota's uuid (0 for a default never set).
func quotaDoc(q *config.COEQuota) map[string]any {
	doc := map[string]any{"project_id": q.ProjectID, "resource": q.Resource, "hard_limit": q.HardLimit}
	if q.UUID != "" {
		h := fnv.New32a()
		_, _ = h.Write([]byte(q.UUID))
		doc["id"] = int(h.Sum32()>>1) + 1
	}
	if q.CTime > 0 {
		doc["created_at"] = isoTime(q.CTime)
	}
	if q.MTime > 0 && q.MTime != q.CTime {
		doc["updated_at"] = isoTime(q.MTime)
	}
	return doc
}

func certificateDoc(cert Certificate, base string, csr string) map[string]any {
	doc := map[string]any{"cluster_uuid": cert.ClusterUUID, "pem": cert.PEM,
		"links": links(base, "certificates", cert.ClusterUUID)}
	if csr != "" {
		doc["csr"] = csr
	}
	return doc
}

// isUUID reports whether s is a uuid in its canonical form.
func isUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == strings.ToLower(s)
}
