package kube

import (
	"context"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/corral/corral/internal/ecode"
)

// ConditionStatus is a node condition's status: True, False or Unknown.
type ConditionStatus string

const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Node is what Corral reads of a Node object.
type Node struct {
	Name string
	// Ready is the status of the Ready condition, "" when the node has
	// none yet; ReadySince is when it last changed.
	Ready         ConditionStatus
	ReadySince    time.Time
	Unschedulable bool
	Labels        map[string]string
	Created       time.Time
	// Addresses are the node's addresses by type (InternalIP, Hostname...).
	Addresses map[string]string
}

// node is the wire form of the fields Node reads.
type node struct {
	Metadata struct {
		Name              string            `json:"name"`
		Labels            map[string]string `json:"labels"`
		CreationTimestamp time.Time         `json:"creationTimestamp"`
	} `json:"metadata"`
	Spec struct {
		Unschedulable bool `json:"unschedulable"`
	} `json:"spec"`
	Status struct {
		Addresses []struct {
			Type    string `json:"type"`
			Address string `json:"address"`
		} `json:"addresses"`
		Conditions []struct {
			Type               string          `json:"type"`
			Status             ConditionStatus `json:"status"`
			LastTransitionTime time.Time       `json:"lastTransitionTime"`
		} `json:"conditions"`
	} `json:"status"`
}

func (n node) toNode() Node {
	out := Node{
		Name:          n.Metadata.Name,
		Labels:        n.Metadata.Labels,
		Created:       n.Metadata.CreationTimestamp,
		Unschedulable: n.Spec.Unschedulable,
	}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Addresses = map[string]string{}
	for _, a := range n.Status.Addresses {
		if _, dup := out.Addresses[a.Type]; !dup {
			out.Addresses[a.Type] = a.Address
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Ready" {
			out.Ready, out.ReadySince = c.Status, c.LastTransitionTime
		}
	}
	return out
}

// listMeta is the paging part of a list.
type listMeta struct {
	Continue string `json:"continue"`
}

// list pages through a collection, calling each with every item.
func list[T any](ctx context.Context, c *Client, path string, q url.Values, each func(T)) error {
	q.Set("limit", strconv.Itoa(pageSize))
	for {
		var page struct {
			Metadata listMeta `json:"metadata"`
			Items    []T      `json:"items"`
		}
		if err := c.do(ctx, http.MethodGet, path+"?"+q.Encode(), "", nil, &page); err != nil {
			return err
		}
		for _, it := range page.Items {
			each(it)
		}
		if page.Metadata.Continue == "" {
			return nil
		}
		q.Set("continue", page.Metadata.Continue)
	}
}

// ListNodes lists the nodes that match a label selector ("" for all).
func (c *Client) ListNodes(ctx context.Context, labelSelector string) ([]Node, error) {
	q := url.Values{}
	if labelSelector != "" {
		q.Set("labelSelector", labelSelector)
	}
	var out []Node
	err := list(ctx, c, "/api/v1/nodes", q, func(n node) { out = append(out, n.toNode()) })
	return out, err
}

// GetNode reads one node; ecode.NoEnt when there is none.
func (c *Client) GetNode(ctx context.Context, name string) (Node, error) {
	var n node
	if err := c.do(ctx, http.MethodGet, "/api/v1/nodes/"+url.PathEscape(name), "", nil, &n); err != nil {
		return Node{}, err
	}
	return n.toNode(), nil
}

// CountPodsByNode counts, per node name, the pods bound to it that have
// not finished (neither Succeeded nor Failed). Nodes without pods are
// absent.
func (c *Client) CountPodsByNode(ctx context.Context) (map[string]int, error) {
	q := url.Values{}
	q.Set("fieldSelector", "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed")
	type pod struct {
		Spec struct {
			NodeName string `json:"nodeName"`
		} `json:"spec"`
	}
	counts := map[string]int{}
	err := list(ctx, c, "/api/v1/pods", q, func(p pod) { counts[p.Spec.NodeName]++ })
	return counts, err
}

// CountUnscheduledPods counts the pods waiting for a node: Pending and
// bound to none.
func (c *Client) CountUnscheduledPods(ctx context.Context) (int, error) {
	q := url.Values{}
	q.Set("fieldSelector", "spec.nodeName=,status.phase=Pending")
	n := 0
	err := list(ctx, c, "/api/v1/pods", q, func(struct{}) { n++ })
	return n, err
}

// The marks of a node kwok simulates.
const (
	KwokAnnotation   = "kwok.x-k8s.io/node"
	KwokAnnotationOn = "fake"
	KwokTaintKey     = "kwok.x-k8s.io/node"
)

// KwokNode describes a simulated node.
type KwokNode struct {
	Name string
	// Labels are added to the ones every kwok node gets; the cluster's
	// kwok manages only nodes labelled type=kwok (SelectorLabel), and a
	// node that loses the label goes NotReady.
	Labels map[string]string
	// CPU, Memory and Pods are the capacity (4, 8Gi, 110 when empty).
	CPU, Memory, Pods string
	// Tainted adds kwok's kwok.x-k8s.io/node=fake:NoSchedule taint, which
	// keeps pods off the node unless they tolerate it: what a cluster
	// that mixes real and simulated nodes wants.
	Tainted bool
}

// SelectorLabel is the label (key=value) the cluster's kwok manages nodes by.
const (
	SelectorLabelKey   = "type"
	SelectorLabelValue = "kwok"
)

// CreateKwokNode creates a Node object that the cluster's kwok takes over:
// it becomes Ready within seconds and keeps a lease. ecode.Exists when the
// node exists.
func (c *Client) CreateKwokNode(ctx context.Context, n KwokNode) error {
	if n.Name == "" {
		return ecode.Errorf(ecode.Inval, "kube: node name is empty")
	}
	labels := map[string]string{
		"kubernetes.io/hostname":        n.Name,
		"kubernetes.io/os":              "linux",
		"kubernetes.io/arch":            "amd64",
		"kubernetes.io/role":            "agent",
		"node-role.kubernetes.io/agent": "",
	}
	maps.Copy(labels, n.Labels)
	labels[SelectorLabelKey] = SelectorLabelValue
	resources := map[string]string{"cpu": or(n.CPU, "4"), "memory": or(n.Memory, "8Gi"), "pods": or(n.Pods, "110")}
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       "Node",
		"metadata": map[string]any{
			"name":   n.Name,
			"labels": labels,
			"annotations": map[string]string{
				KwokAnnotation:                 KwokAnnotationOn,
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		"status": map[string]any{"allocatable": resources, "capacity": resources},
	}
	if n.Tainted {
		obj["spec"] = map[string]any{"taints": []map[string]string{{"key": KwokTaintKey, "value": KwokAnnotationOn, "effect": "NoSchedule"}}}
	}
	return c.do(ctx, http.MethodPost, "/api/v1/nodes", "application/json", obj, nil)
}

// DeleteNode deletes a node; ecode.NoEnt when there is none.
func (c *Client) DeleteNode(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/api/v1/nodes/"+url.PathEscape(name), "", nil, nil)
}

func (c *Client) patchNode(ctx context.Context, name string, patch any) error {
	return c.do(ctx, http.MethodPatch, "/api/v1/nodes/"+url.PathEscape(name), "application/merge-patch+json", patch, nil)
}

// SetNodeLabel sets a label on a node.
func (c *Client) SetNodeLabel(ctx context.Context, name, key, value string) error {
	return c.patchNode(ctx, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
}

// RemoveNodeLabel removes a label from a node (a no-op when it has none).
func (c *Client) RemoveNodeLabel(ctx context.Context, name, key string) error {
	return c.patchNode(ctx, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: nil}}})
}

// SetNodeInternalIP sets a node's addresses to the one InternalIP: what
// the API server reaches its kubelet at. A kubelet whose address is a
// loopback one reports none, and then logs and exec cannot reach it.
func (c *Client) SetNodeInternalIP(ctx context.Context, name, ip string) error {
	patch := map[string]any{"status": map[string]any{"addresses": []map[string]string{{"type": "InternalIP", "address": ip}}}}
	return c.do(ctx, http.MethodPatch, "/api/v1/nodes/"+url.PathEscape(name)+"/status", "application/merge-patch+json", patch, nil)
}

// Cordon marks a node unschedulable (or schedulable again).
func (c *Client) Cordon(ctx context.Context, name string, unschedulable bool) error {
	return c.patchNode(ctx, name, map[string]any{"spec": map[string]any{"unschedulable": unschedulable}})
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
