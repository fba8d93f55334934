// Package api serves OpenStack's Container Infra API v1 (Magnum's HTTP
// API) on the API front, so the unchanged `openstack coe` client drives
// Corral's Kubernetes clusters. The HTTP layer here parses requests,
// negotiates microversions, applies JSON patches and renders objects as
// Magnum's wsme objects (unset fields omitted); every decision about an
// object is the Backend's (corrald, over LUXI).
package api

import (
	"context"

	"github.com/corral/corral/internal/config"
)

// Caller is who a request comes from, as the authentication provider
// proved it: the user, the project its objects belong to, and whether it
// is an administrator (sees and changes every project's objects and sets
// quotas).
type Caller struct {
	User    string
	Project string
	Admin   bool
}

// Backend is what the HTTP layer asks of the cluster. Every method takes
// the request's context and the caller. Errors are ecode-typed and their
// class picks the HTTP status (ecode.HTTPStatus: Inval 400, NoEnt 404,
// State/Exists/NotUnique 409, PermissionError 403; a message starting
// with "Resource limit exceeded" is a 403 whatever its class); their
// message is Magnum's error title, so it must be Magnum's text (see the
// constructors in errors.go) and never carry a secret. An ident is an
// object's name or uuid; a name two objects share is NotUnique (409).
// Objects of another project are not found unless the caller is an
// administrator, except public templates, which everyone sees.
type Backend interface {
	ListTemplates(ctx context.Context, who Caller) ([]*config.COETemplate, error)
	GetTemplate(ctx context.Context, who Caller, ident string) (*config.COETemplate, error)
	// CreateTemplate stores a template named name with uuid (made by the
	// API) and fields (by API name, see opcodes.COETemplateFields; the
	// API has filled Magnum's defaults) owned by the caller.
	CreateTemplate(ctx context.Context, who Caller, name, uuid string, fields map[string]any) (*config.COETemplate, error)
	// UpdateTemplate sets the fields changes names (nil clears one).
	UpdateTemplate(ctx context.Context, who Caller, ident string, changes map[string]any) (*config.COETemplate, error)
	// DeleteTemplate refuses (Inval, 400) while a cluster uses it.
	DeleteTemplate(ctx context.Context, who Caller, ident string) error

	ListClusters(ctx context.Context, who Caller) ([]*Cluster, error)
	GetCluster(ctx context.Context, who Caller, ident string) (*Cluster, error)
	// CreateCluster starts the creation of the cluster c.UUID (made by
	// the API) and returns once the cluster is stored (a GET finds it),
	// or with the refusal (quota: 403, unknown template: 400 ...).
	CreateCluster(ctx context.Context, who Caller, c ClusterCreate) error
	// UpdateCluster starts the changes (node_count resizes the default
	// worker group) and returns the cluster's uuid. With rollback a
	// failed change restores the old node count (ROLLBACK_COMPLETE).
	UpdateCluster(ctx context.Context, who Caller, ident string, changes map[string]any, rollback bool) (string, error)
	ResizeCluster(ctx context.Context, who Caller, ident string, r Resize) (string, error)
	UpgradeCluster(ctx context.Context, who Caller, ident string, u Upgrade) (string, error)
	DeleteCluster(ctx context.Context, who Caller, ident string) error

	// ListNodeGroups lists a cluster's node groups (role "" for all).
	ListNodeGroups(ctx context.Context, who Caller, cluster, role string) ([]*config.COENodeGroup, error)
	GetNodeGroup(ctx context.Context, who Caller, cluster, ident string) (*config.COENodeGroup, error)
	// CreateNodeGroup starts the creation of g.UUID (made by the API) and
	// returns the stored group.
	CreateNodeGroup(ctx context.Context, who Caller, cluster string, g NodeGroupCreate) (*config.COENodeGroup, error)
	UpdateNodeGroup(ctx context.Context, who Caller, cluster, ident string, changes map[string]any) (*config.COENodeGroup, error)
	// DeleteNodeGroup refuses (Inval, 400) a default group.
	DeleteNodeGroup(ctx context.Context, who Caller, cluster, ident string) error

	// GetCA is a cluster's CA certificate (PEM).
	GetCA(ctx context.Context, who Caller, cluster string) (Certificate, error)
	// SignCSR signs a PEM certificate request with the cluster's CA and
	// returns the certificate (PEM).
	SignCSR(ctx context.Context, who Caller, cluster, csr string) (Certificate, error)
	// RotateCA starts the replacement of the cluster's CA and returns
	// the cluster's uuid.
	RotateCA(ctx context.Context, who Caller, cluster string) (string, error)

	// ListFederations lists the federations the caller sees.
	ListFederations(ctx context.Context, who Caller) ([]*config.COEFederation, error)
	GetFederation(ctx context.Context, who Caller, ident string) (*config.COEFederation, error)
	// CreateFederation starts the creation of f.UUID (made by the API)
	// for the caller's project and returns once it is stored, or with
	// the refusal (unknown host or member: 404, a member not complete:
	// 409, a name taken: 409).
	CreateFederation(ctx context.Context, who Caller, f FederationCreate) error
	// UpdateFederation starts the changes (member_ids: the whole new
	// list; properties) and returns the federation's uuid.
	UpdateFederation(ctx context.Context, who Caller, ident string, changes map[string]any) (string, error)
	DeleteFederation(ctx context.Context, who Caller, ident string) error

	// ListQuotas lists the caller's project's quotas, every project's
	// when all (administrators only).
	ListQuotas(ctx context.Context, who Caller, all bool) ([]*config.COEQuota, error)
	// GetQuota is a project's quota of a resource; when none is set, the
	// default (DefaultClusterQuota clusters) with no uuid.
	GetQuota(ctx context.Context, who Caller, project, resource string) (*config.COEQuota, error)
	// SetQuota sets a project's hard limit (administrators only); create:
	// refuse if it exists (POST) rather than require it (PATCH).
	SetQuota(ctx context.Context, who Caller, project, resource string, hardLimit int, create bool) (*config.COEQuota, error)
	DeleteQuota(ctx context.Context, who Caller, project, resource string) error

	// Stats counts a project's clusters and their nodes (masters and
	// workers); project "" counts every project's (administrators only).
	Stats(ctx context.Context, who Caller, project string) (Stats, error)
	// Services lists the processes serving the API: corrald as Magnum's
	// conductor, corral-rapi as its API.
	Services(ctx context.Context, who Caller) ([]Service, error)
}

// DefaultClusterQuota is the clusters a project may have when no quota is
// set (Magnum's max_clusters_per_project).
const DefaultClusterQuota = 20

// QuotaResource is the only resource quotas limit.
const QuotaResource = "Cluster"

// Cluster is a COE cluster with its node groups (its node and master
// counts are its default groups').
type Cluster struct {
	*config.COECluster
	NodeGroups []*config.COENodeGroup
	// TemplateLabels are the labels of the cluster's template, to show
	// which labels the cluster overrides, adds or skips ("" none).
	TemplateLabels map[string]string
}

// ClusterCreate is a cluster create request, in the opcode's parameters
// (OP_COE_CLUSTER_CREATE; optional ones nil when not given).
type ClusterCreate struct {
	UUID     string
	Name     string
	Template string // name or uuid
	Params   map[string]any
}

// Resize is a resize action.
type Resize struct {
	NodeCount     int
	NodeGroup     string // "": the default worker group
	NodesToRemove []string
}

// Upgrade is an upgrade action.
type Upgrade struct {
	Template     string
	MaxBatchSize int
	NodeGroup    string // "": every group
}

// NodeGroupCreate is a node group create request in the opcode's
// parameters (OP_COE_NODEGROUP_CREATE).
type NodeGroupCreate struct {
	UUID   string
	Name   string
	Params map[string]any
}

// Certificate is a cluster's CA certificate or one it signed.
type Certificate struct {
	ClusterUUID string
	PEM         string
}

// Stats are a project's counts.
type Stats struct {
	Clusters int `json:"clusters"`
	Nodes    int `json:"nodes"`
}

// Service is a process serving the API, as Magnum's mservices.
type Service struct {
	ID          int     `json:"id"`
	Host        string  `json:"host"`
	Binary      string  `json:"binary"`
	State       string  `json:"state"` // up or down
	ReportCount int     `json:"report_count"`
	Disabled    bool    `json:"disabled"`
	Reason      *string `json:"disabled_reason"`
	CreatedAt   string  `json:"created_at,omitempty"`
	UpdatedAt   string  `json:"updated_at,omitempty"`
}
