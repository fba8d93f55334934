package nodeapi

// Node RPCs of COE clusters' control planes: corral-node runs a cluster's
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
// as supervised processes under a user of their own, for the k8s_process
// driver. Every call names the cluster; the node keeps a small record per
// cluster (its ports, its uid) so that a call made again, after a master
// restart, finds what the first one chose.
const (
	// COEControlPlaneReserve chooses (once) and keeps the ports of a
	// cluster's control plane on the node.
	COEControlPlaneReserve = "coe_controlplane_reserve"
	COEControlPlaneStart   = "coe_controlplane_start"
	COEControlPlaneStop    = "coe_controlplane_stop"
	COEControlPlaneStatus  = "coe_controlplane_status"
)

// COEControlPlaneReserveArgs asks the node for a cluster's ports on
// BindAddress: the ones it chose before, or new ones free on the node and
// not held by another cluster's record.
type COEControlPlaneReserveArgs struct {
	Cluster     string `json:"cluster"` // uuid
	Name        string `json:"name"`
	BindAddress string `json:"bind_address"`
}

// COEControlPlanePorts are a cluster's ports on its node.
type COEControlPlanePorts struct {
	APIServer  int `json:"apiserver"`
	EtcdClient int `json:"etcd_client"`
	EtcdPeer   int `json:"etcd_peer"`
}

// COEKeyPair is a certificate and its private key as PEM. The key travels
// only over the node RPC's mutual TLS; it is never logged.
type COEKeyPair struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// COECertBundle is every certificate and key a control plane runs with
// (certs.Bundle on the wire; the CA's key is not in it).
type COECertBundle struct {
	CACert string `json:"ca_cert"`
	// Pairs by role: apiserver, apiserver-kubelet-client,
	// apiserver-etcd-client, etcd-server, etcd-peer, admin,
	// controller-manager, scheduler, kwok.
	Pairs map[string]COEKeyPair `json:"pairs"`
	// ServiceAccount holds the public key as Cert and the private one as
	// Key.
	ServiceAccount COEKeyPair `json:"service_account"`
	// CAKey is the CA's private key, sent only to a control plane that
	// signs kubelet certificates (TLSBootstrap).
	CAKey string `json:"ca_key,omitempty"`
}

// COEControlPlaneStartArgs starts a cluster's components on the node, or
// leaves them running when they already run with the same CA; a new CA
// (a rotation) restarts them with the new certificates.
type COEControlPlaneStartArgs struct {
	Cluster     string `json:"cluster"` // uuid
	Name        string `json:"name"`
	BindAddress string `json:"bind_address"`
	// NodeMonitorGraceSeconds is how long a kube node may miss its
	// heartbeats before it is NotReady (0: Kubernetes' default).
	NodeMonitorGraceSeconds int           `json:"node_monitor_grace_seconds,omitempty"`
	Certs                   COECertBundle `json:"certs"`
	// TLSBootstrap lets kubelets join with bootstrap tokens: the API
	// server accepts them and the controller manager signs the kubelets'
	// certificates with the CA, whose key Certs.CAKey then carries.
	TLSBootstrap bool `json:"tls_bootstrap,omitempty"`
	// Masters, of a cluster with several: this node's etcd member's name,
	// every member (this one among them), and whether this node runs
	// kwok. Empty for a cluster of one master.
	Masters *COEMasters `json:"masters,omitempty"`
}

// COEMasters is one master's part in a cluster of several.
type COEMasters struct {
	Member  string          `json:"member"`
	Members []COEEtcdMember `json:"members"`
	Kwok    bool            `json:"kwok"`
}

// COEEtcdMember is one member of a cluster's etcd.
type COEEtcdMember struct {
	Name      string `json:"name"`
	PeerURL   string `json:"peer_url"`
	ClientURL string `json:"client_url"`
}

// COEControlPlaneStopArgs stops a cluster's components; Purge also
// removes the cluster's directory, its record and releases its uid.
type COEControlPlaneStopArgs struct {
	Cluster string `json:"cluster"`
	Purge   bool   `json:"purge"`
}

// COEControlPlaneStatusArgs asks for a cluster's components.
type COEControlPlaneStatusArgs struct {
	Cluster string `json:"cluster"`
}

// COEComponentStatus is one component of a control plane.
type COEComponentStatus struct {
	Name     string `json:"name"`
	PID      int    `json:"pid"`
	Running  bool   `json:"running"`
	Restarts int    `json:"restarts"`
	LastExit string `json:"last_exit,omitempty"`
}

// COEControlPlaneStatusReply says how a cluster's components run; Known
// is false when the node has no record of the cluster.
type COEControlPlaneStatusReply struct {
	Known      bool                 `json:"known"`
	UID        int                  `json:"uid,omitempty"`
	Ports      COEControlPlanePorts `json:"ports"`
	Components []COEComponentStatus `json:"components"`
}

// Node RPCs of COE clusters' kubelet workers: corral-node runs a real
// kube node (containerd and a kubelet, as root) for a node group of
// worker_kind kubelet.
const (
	COEKubeletStart = "coe_kubelet_start"
	COEKubeletStop  = "coe_kubelet_stop"
)

// COEKubeletStartArgs starts a kube node's kubelet and containerd, or
// leaves them running when they run with the same certificates' CA.
type COEKubeletStartArgs struct {
	Cluster     string `json:"cluster"` // uuid
	ClusterName string `json:"cluster_name"`
	// Node is the kube node's name.
	Node string `json:"node"`
	// Server is the cluster's API server URL.
	Server string `json:"server"`
	// BindAddress is where the kubelet serves, the node's address.
	BindAddress string            `json:"bind_address"`
	Labels      map[string]string `json:"labels,omitempty"`
	CACert      string            `json:"ca_cert"`
	// Client is the kubelet's client certificate (system:node:<node>),
	// Serving its serving certificate.
	Client  COEKeyPair `json:"client"`
	Serving COEKeyPair `json:"serving"`
	// PodSubnet is where the worker's pods get their addresses: corrald
	// hands it out, unique on this node.
	PodSubnet string `json:"pod_subnet"`
}

// COEKubeletStopArgs stops kube nodes of a cluster on the node: the one
// named, or every one of the cluster when Node is empty. Purge also
// removes their pods, mounts, cgroups, links and files.
type COEKubeletStopArgs struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node,omitempty"`
	Purge   bool   `json:"purge"`
}

// COEKubeletStatusReply says how a kube node's processes run.
type COEKubeletStatusReply struct {
	Port       int                  `json:"port"`
	PodSubnet  string               `json:"pod_subnet"`
	Components []COEComponentStatus `json:"components"`
}
