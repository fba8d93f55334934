package config

import (
	"maps"
	"slices"
)

// Kubernetes clusters as a service, as OpenStack Magnum's design calls them
// ("COE clusters", for container orchestration engine): a cluster template
// says what to build, a COE cluster is one Kubernetes cluster made from it,
// and its node groups are its sets of masters and workers. Inside Corral a
// "cluster" alone is the Ganeti-style cluster itself, so these types all
// carry the COE prefix; their JSON names are the Container Infra API's, so
// the API shows the stored object with no renaming beyond hiding secrets.
//
// Magnum's status fields (status, status_reason, health_status,
// health_status_reason) are part of the object, changed only by jobs (the
// lifecycle) and the health reconciler (health). The per-step progress of a
// job lives in the object's config.Status conditions, apart from it.

// COE cluster statuses (Magnum's names).
const (
	COECreateInProgress   = "CREATE_IN_PROGRESS"
	COECreateFailed       = "CREATE_FAILED"
	COECreateComplete     = "CREATE_COMPLETE"
	COEUpdateInProgress   = "UPDATE_IN_PROGRESS"
	COEUpdateFailed       = "UPDATE_FAILED"
	COEUpdateComplete     = "UPDATE_COMPLETE"
	COEDeleteInProgress   = "DELETE_IN_PROGRESS"
	COEDeleteFailed       = "DELETE_FAILED"
	COEDeleteComplete     = "DELETE_COMPLETE"
	COEResumeComplete     = "RESUME_COMPLETE"
	COEResumeFailed       = "RESUME_FAILED"
	COERestoreComplete    = "RESTORE_COMPLETE"
	COERollbackInProgress = "ROLLBACK_IN_PROGRESS"
	COERollbackFailed     = "ROLLBACK_FAILED"
	COERollbackComplete   = "ROLLBACK_COMPLETE"
	COESnapshotComplete   = "SNAPSHOT_COMPLETE"
	COECheckComplete      = "CHECK_COMPLETE"
	COEAdoptComplete      = "ADOPT_COMPLETE"

	COEHealthy       = "HEALTHY"
	COEUnhealthy     = "UNHEALTHY"
	COEHealthUnknown = "UNKNOWN"
)

// Node group roles; the default groups of a cluster have these roles.
const (
	COERoleMaster = "master"
	COERoleWorker = "worker"
)

// A COETemplate is a cluster template: what a COE cluster is made of.
// Unset optional fields are nil or "" and the API omits them.
type COETemplate struct {
	Meta
	ProjectID string `json:"project_id,omitempty"`
	UserID    string `json:"user_id,omitempty"`

	COE                 string            `json:"coe"`            // kubernetes
	ServerType          string            `json:"server_type"`    // vm or bm
	ClusterDistro       string            `json:"cluster_distro"` // the image's os
	ImageID             string            `json:"image_id,omitempty"`
	KeypairID           string            `json:"keypair_id,omitempty"`
	ExternalNetworkID   string            `json:"external_network_id,omitempty"`
	FixedNetwork        string            `json:"fixed_network,omitempty"`
	FixedSubnet         string            `json:"fixed_subnet,omitempty"`
	NetworkDriver       string            `json:"network_driver,omitempty"`
	VolumeDriver        string            `json:"volume_driver,omitempty"`
	DNSNameserver       string            `json:"dns_nameserver,omitempty"`
	FlavorID            string            `json:"flavor_id,omitempty"`
	MasterFlavorID      string            `json:"master_flavor_id,omitempty"`
	DockerVolumeSize    *int              `json:"docker_volume_size,omitempty"`
	DockerStorageDriver string            `json:"docker_storage_driver,omitempty"`
	HTTPProxy           string            `json:"http_proxy,omitempty"`
	HTTPSProxy          string            `json:"https_proxy,omitempty"`
	NoProxy             string            `json:"no_proxy,omitempty"`
	InsecureRegistry    string            `json:"insecure_registry,omitempty"`
	APIServerPort       *int              `json:"apiserver_port,omitempty"`
	Labels              map[string]string `json:"labels"`
	TLSDisabled         bool              `json:"tls_disabled"`
	Public              bool              `json:"public"`
	Hidden              bool              `json:"hidden"`
	RegistryEnabled     bool              `json:"registry_enabled"`
	MasterLBEnabled     bool              `json:"master_lb_enabled"`
	FloatingIPEnabled   bool              `json:"floating_ip_enabled"`
	// Driver is the driver chosen from (server_type, cluster_distro, coe)
	// when the template was made (k8s_process, k8s_bm, fake).
	Driver string `json:"driver,omitempty"`
}

// A COECluster is one Kubernetes cluster. Its node and master counts are
// those of its default worker and master node groups (the API derives
// them); Status and the health fields follow Magnum.
type COECluster struct {
	Meta
	ProjectID string `json:"project_id,omitempty"`
	UserID    string `json:"user_id,omitempty"`

	Template         string            `json:"cluster_template_id"` // template uuid
	Keypair          string            `json:"keypair,omitempty"`
	DockerVolumeSize *int              `json:"docker_volume_size,omitempty"`
	Labels           map[string]string `json:"labels"`
	MasterFlavorID   string            `json:"master_flavor_id,omitempty"`
	FlavorID         string            `json:"flavor_id,omitempty"`
	CreateTimeout    int               `json:"create_timeout"` // minutes
	DiscoveryURL     string            `json:"discovery_url,omitempty"`
	FixedNetwork     string            `json:"fixed_network,omitempty"`
	FixedSubnet      string            `json:"fixed_subnet,omitempty"`
	FloatingIP       *bool             `json:"floating_ip_enabled,omitempty"`
	MasterLB         *bool             `json:"master_lb_enabled,omitempty"`

	Status             string            `json:"status"`
	StatusReason       string            `json:"status_reason,omitempty"`
	HealthStatus       string            `json:"health_status,omitempty"`
	HealthStatusReason map[string]string `json:"health_status_reason,omitempty"`

	// APIAddress is the Kubernetes API server's URL (https://host:port),
	// set once the control plane answers.
	APIAddress       string   `json:"api_address,omitempty"`
	COEVersion       string   `json:"coe_version,omitempty"`
	ContainerVersion string   `json:"container_version,omitempty"`
	MasterAddresses  []string `json:"master_addresses,omitempty"`
	NodeAddresses    []string `json:"node_addresses,omitempty"`
	// Faults maps a failed part to what went wrong, as Magnum's faults.
	Faults map[string]string `json:"faults,omitempty"`

	// Trust is the uuid of the COETrust background work for this cluster
	// acts with.
	Trust string `json:"trust_id,omitempty"`
	// Driver names the driver acting on the cluster (the template's when
	// it was made).
	Driver string `json:"driver,omitempty"`
	// Placement is the driver's own record of where things run (nodes,
	// ports, directories, uids); opaque to the API.
	Placement map[string]any `json:"placement,omitempty"`
	// PodSubnets are the pod subnets of the cluster's kubelet workers,
	// which corrald hands out unique per Corral node (confdb keeps an
	// index of them), so the node daemons never choose one.
	PodSubnets []COEPodSubnet `json:"pod_subnets,omitempty"`
}

// A COEPodSubnet is the subnet a kubelet worker's pods get their
// addresses from, on the Corral node (Host, a uuid) that runs it.
type COEPodSubnet struct {
	Node   string `json:"node"`
	Host   string `json:"host"`
	Subnet string `json:"subnet"`
}

// A COENodeGroup is a set of masters or workers of one cluster.
type COENodeGroup struct {
	Meta
	ProjectID string `json:"project_id,omitempty"`
	Cluster   string `json:"cluster_id"` // cluster uuid

	Role             string            `json:"role"`
	IsDefault        bool              `json:"is_default"`
	NodeCount        int               `json:"node_count"`
	MinNodeCount     int               `json:"min_node_count"`
	MaxNodeCount     *int              `json:"max_node_count,omitempty"`
	FlavorID         string            `json:"flavor_id,omitempty"`
	ImageID          string            `json:"image_id,omitempty"`
	DockerVolumeSize *int              `json:"docker_volume_size,omitempty"`
	Labels           map[string]string `json:"labels"`
	NodeAddresses    []string          `json:"node_addresses,omitempty"`
	Version          string            `json:"version,omitempty"`

	Status       string `json:"status"`
	StatusReason string `json:"status_reason,omitempty"`

	// Nodes names the group's Kubernetes nodes as the driver made them.
	Nodes []string `json:"nodes,omitempty"`
}

// A COECertificate is an x509 key pair of a cluster (Magnum's x509keypair):
// the cluster CA. The private key is kept sealed (KeySealed), never in
// clear in the store.
type COECertificate struct {
	Meta
	Cluster   string `json:"cluster_uuid"`
	CertPEM   string `json:"certificate"`
	KeySealed []byte `json:"private_key_sealed,omitempty"`
	// Generation counts CA rotations; kubeconfigs signed by an older CA
	// stop working after a rotation.
	Generation int `json:"generation"`
}

// A COEQuota limits a project's resources; Magnum's only resource is
// "Cluster". The Meta's name is "<project>/<resource>".
type COEQuota struct {
	Meta
	ProjectID string `json:"project_id"`
	Resource  string `json:"resource"`
	HardLimit int    `json:"hard_limit"`
}

// A COEFederation groups clusters under a host cluster (Magnum's
// federation record).
type COEFederation struct {
	Meta
	ProjectID    string            `json:"project_id,omitempty"`
	HostCluster  string            `json:"hostcluster_id"`
	Members      []string          `json:"member_ids"`
	Properties   map[string]string `json:"properties,omitempty"`
	Status       string            `json:"status"`
	StatusReason string            `json:"status_reason,omitempty"`
}

// A COETrust is the delegated credential background work for one cluster
// acts with: scoped to the owner's project, revocable. The secret is kept
// as a digest only.
type COETrust struct {
	Meta
	Cluster   string   `json:"cluster_uuid"`
	ProjectID string   `json:"project_id"`
	Trustor   string   `json:"trustor_user_id"`
	Roles     []string `json:"roles"`
	Revoked   bool     `json:"revoked"`
}

// GetName is the node group's name in the configuration's name index:
// "<cluster uuid>/<name>", as names are unique within a cluster only.
func (g *COENodeGroup) GetName() string { return g.Cluster + "/" + g.Name }

// Clone copies the template deeply.
func (t *COETemplate) Clone() *COETemplate {
	c := *t
	c.Tags = slices.Clone(t.Tags)
	c.Labels = maps.Clone(t.Labels)
	c.DockerVolumeSize = cloneInt(t.DockerVolumeSize)
	c.APIServerPort = cloneInt(t.APIServerPort)
	return &c
}

// Clone copies the cluster deeply.
func (k *COECluster) Clone() *COECluster {
	c := *k
	c.Tags = slices.Clone(k.Tags)
	c.Labels = maps.Clone(k.Labels)
	c.HealthStatusReason = maps.Clone(k.HealthStatusReason)
	c.Faults = maps.Clone(k.Faults)
	c.MasterAddresses = slices.Clone(k.MasterAddresses)
	c.NodeAddresses = slices.Clone(k.NodeAddresses)
	c.DockerVolumeSize = cloneInt(k.DockerVolumeSize)
	c.Placement = CloneDict(k.Placement)
	c.PodSubnets = slices.Clone(k.PodSubnets)
	if k.FloatingIP != nil {
		v := *k.FloatingIP
		c.FloatingIP = &v
	}
	if k.MasterLB != nil {
		v := *k.MasterLB
		c.MasterLB = &v
	}
	return &c
}

// Clone copies the node group deeply.
func (g *COENodeGroup) Clone() *COENodeGroup {
	c := *g
	c.Tags = slices.Clone(g.Tags)
	c.Labels = maps.Clone(g.Labels)
	c.NodeAddresses = slices.Clone(g.NodeAddresses)
	c.Nodes = slices.Clone(g.Nodes)
	c.MaxNodeCount = cloneInt(g.MaxNodeCount)
	c.DockerVolumeSize = cloneInt(g.DockerVolumeSize)
	return &c
}

// Clone copies the certificate.
func (x *COECertificate) Clone() *COECertificate {
	c := *x
	c.Tags = slices.Clone(x.Tags)
	c.KeySealed = slices.Clone(x.KeySealed)
	return &c
}

// Clone copies the quota.
func (q *COEQuota) Clone() *COEQuota {
	c := *q
	c.Tags = slices.Clone(q.Tags)
	return &c
}

// Clone copies the federation.
func (f *COEFederation) Clone() *COEFederation {
	c := *f
	c.Tags = slices.Clone(f.Tags)
	c.Members = slices.Clone(f.Members)
	c.Properties = maps.Clone(f.Properties)
	return &c
}

// Clone copies the trust.
func (t *COETrust) Clone() *COETrust {
	c := *t
	c.Tags = slices.Clone(t.Tags)
	c.Roles = slices.Clone(t.Roles)
	return &c
}

func cloneInt(p *int) *int {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
