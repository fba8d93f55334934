package driver

import (
	"maps"
	"strconv"

	"github.com/corral/corral/internal/config"
)

// Params are a cluster's driver parameters, as Magnum's template
// definitions map a template, a cluster and their labels to a stack's
// parameters. They are computed once per job and kept in its plan.
type Params struct {
	Cluster      string            `json:"cluster"` // uuid
	Name         string            `json:"name"`
	KubeTag      string            `json:"kube_tag,omitempty"`
	MasterCount  int               `json:"master_count"`
	NodeCount    int               `json:"node_count"`
	MasterFlavor string            `json:"master_flavor,omitempty"`
	Flavor       string            `json:"flavor,omitempty"`
	Image        string            `json:"image,omitempty"`
	APIPort      int               `json:"apiserver_port,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	// Workers says how worker nodes run: "kwok" (simulated, the default)
	// or "kubelet" (label worker_kind).
	Workers             string `json:"workers"`
	AutoHealing         bool   `json:"auto_healing_enabled"`
	AutoHealingMaxCount int    `json:"auto_healing_max_count"`
	AutoScaling         bool   `json:"auto_scaling_enabled"`
	MinNodeCount        int    `json:"min_node_count"`
	MaxNodeCount        int    `json:"max_node_count"`
}

// Definition maps a template, a cluster and its groups to parameters:
// the cluster's labels over the template's, flavors falling back to the
// template's, counts from the default groups.
func Definition(t *config.COETemplate, c *config.COECluster, groups []*config.COENodeGroup) Params {
	labels := maps.Clone(t.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, c.Labels)
	p := Params{Cluster: c.UUID, Name: c.Name, Image: t.ImageID, Labels: labels,
		MasterFlavor: first(c.MasterFlavorID, t.MasterFlavorID), Flavor: first(c.FlavorID, t.FlavorID),
		KubeTag: labels["kube_tag"], Workers: first(labels["worker_kind"], "kwok"),
		AutoHealing: labelBool(labels, "auto_healing_enabled"), AutoScaling: labelBool(labels, "auto_scaling_enabled"),
		AutoHealingMaxCount: labelInt(labels, "auto_healing_max_count", 1),
		MinNodeCount:        labelInt(labels, "min_node_count", 1), MaxNodeCount: labelInt(labels, "max_node_count", 10)}
	if t.APIServerPort != nil {
		p.APIPort = *t.APIServerPort
	}
	for _, g := range groups {
		if !g.IsDefault {
			continue
		}
		if g.Role == config.COERoleMaster {
			p.MasterCount = g.NodeCount
		} else {
			p.NodeCount = g.NodeCount
		}
	}
	return p
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func labelBool(l map[string]string, k string) bool {
	b, _ := strconv.ParseBool(l[k])
	return b
}

func labelInt(l map[string]string, k string, def int) int {
	if n, err := strconv.Atoi(l[k]); err == nil && n >= 0 {
		return n
	}
	return def
}
