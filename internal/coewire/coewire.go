// Package coewire is what corrald and the Container Infra API (in
// corral-rapi) exchange over LUXI about Kubernetes clusters: the method
// names, their arguments and replies. It links neither side, so the API
// carries none of the master.
package coewire

import "github.com/corral/corral/internal/config"

// LUXI methods (Corral only).
const (
	// MethodTemplates answers cluster templates by name or uuid, all
	// when none is named; an unknown one is an unknown-entity error.
	MethodTemplates = "COETemplateQuery"
	// MethodClusters answers COE clusters (ClusterRecord) by name or
	// uuid, all when none is named.
	MethodClusters = "COEClusterQuery"
	// MethodNodeGroups answers a cluster's node groups (NodeGroupArgs).
	MethodNodeGroups = "COENodeGroupQuery"
	// MethodQuotas answers every quota set.
	MethodQuotas = "COEQuotaQuery"
	// MethodFederations answers federations by name or uuid, all when
	// none is named.
	MethodFederations = "COEFederationQuery"
	// MethodCA answers a cluster's CA certificate (cluster name or uuid).
	MethodCA = "COECAQuery"
	// MethodSign signs a certificate request with a cluster's CA
	// (SignArgs); corrald holds the CA key.
	MethodSign = "COESignCSR"
	// MethodServices answers the processes acting for the API (corrald on
	// the master).
	MethodServices = "COEServices"
	// MethodSubmit submits a job of one OP_COE_* op and answers once the
	// op's object shows it under way (a created object is stored, a
	// changed one's serial moved), the job ended, or a bound passed; with
	// the op's error if it failed by then, so that the API answers the
	// refusal (quota, unknown template ...) in the same request.
	MethodSubmit = "COESubmit"
)

// ClusterRecord is a COE cluster with its node groups, its step
// conditions and its template's labels.
type ClusterRecord struct {
	Cluster        *config.COECluster     `json:"cluster"`
	NodeGroups     []*config.COENodeGroup `json:"nodegroups"`
	Status         *config.Status         `json:"status,omitempty"`
	TemplateLabels map[string]string      `json:"template_labels,omitempty"`
}

// NodeGroupArgs selects node groups of a cluster: by name or uuid, all
// when Names is empty.
type NodeGroupArgs struct {
	Cluster string   `json:"cluster"`
	Names   []string `json:"names,omitempty"`
}

// SignArgs is a certificate request for a cluster's CA.
type SignArgs struct {
	Cluster string `json:"cluster"`
	CSR     string `json:"csr"`
}

// Certificate is a cluster's CA certificate, or one it signed (PEM).
type Certificate struct {
	ClusterUUID string `json:"cluster_uuid"`
	PEM         string `json:"pem"`
}

// Service is a process acting for the API.
type Service struct {
	Host   string `json:"host"`
	Binary string `json:"binary"` // corrald
	Up     bool   `json:"up"`
	// Since is when it started acting (seconds since the epoch).
	Since float64 `json:"since"`
}

// SubmitReply is the job of an accepted op.
type SubmitReply struct {
	JobID int64 `json:"job_id"`
}
