// Package k8sbm is the COE driver whose workers are bare-metal machines:
// the control plane runs as processes on a Corral node as the k8s_process
// driver runs it (whose steps it reuses), with kubelet TLS bootstrapping
// on, and each worker node group claims machines of the bare-metal
// subsystem (available, of the group's flavor as resource class), deploys
// them with the template's image and a config drive holding the join
// configuration (the API server, the CA and a bootstrap kubeconfig with a
// fresh bootstrap token), and waits for each machine's kubelet to register
// a Ready node named after the machine. The machine's image must run
// kubelet with --bootstrap-kubeconfig; the controller manager approves
// and signs its certificate request.
//
// Shrinking a group deletes the node, undeploys the machine (tear down,
// cleaning, available), releases the claim and deletes the token.
package k8sbm

import (
	"context"
	"time"

	"github.com/corral/corral/internal/coe/driver"
	"github.com/corral/corral/internal/coe/driver/k8sprocess"
	"github.com/corral/corral/internal/coe/kube"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// Name is the driver's type.
const Name = "k8s_bm"

// Driver is the k8s_bm driver.
type Driver struct {
	cp *k8sprocess.Driver
	// Now is the clock (time.Now when nil); PollInterval how long a wait
	// for the machines parks between checks (5s when zero); TokenTTL how
	// long a bootstrap token lives (24h when zero).
	Now          func() time.Time
	PollInterval time.Duration
	TokenTTL     time.Duration
}

// New makes the driver; keys seal and open the clusters' CA keys.
func New(keys k8sprocess.Keys) *Driver {
	cp := k8sprocess.New(keys)
	cp.TLSBootstrap = true
	return &Driver{cp: cp}
}

// Type implements driver.Driver.
func (d *Driver) Type() string { return Name }

// Provides implements driver.Driver: bare-metal workers of any os whose
// image follows the join contract (see the package comment).
func (d *Driver) Provides() []driver.Provision {
	return []driver.Provision{{ServerType: "bm", OS: driver.AnyOS, COE: "kubernetes"}}
}

func (d *Driver) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Driver) poll() time.Duration {
	if d.PollInterval > 0 {
		return d.PollInterval
	}
	return 5 * time.Second
}

func (d *Driver) tokenTTL() time.Duration {
	if d.TokenTTL > 0 {
		return d.TokenTTL
	}
	return 24 * time.Hour
}

// The RBAC bindings of kubelet TLS bootstrapping, as kubeadm makes them.
var bootstrapBindings = []struct {
	name, role string
	subject    kube.Subject
}{
	{"corral:kubelet-bootstrap", "system:node-bootstrapper", kube.Subject{Kind: "Group", Name: BootstrapGroup}},
	{"corral:node-autoapprove-bootstrap", "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
		kube.Subject{Kind: "Group", Name: BootstrapGroup}},
	{"corral:node-autoapprove-certificate-rotation", "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
		kube.Subject{Kind: "Group", Name: "system:nodes"}},
}

// CreateCluster implements driver.Driver: k8s_process's control plane
// (started for TLS bootstrapping), then the RBAC bindings that let
// bootstrap tokens ask for node certificates and have them approved.
func (d *Driver) CreateCluster(p driver.Params) []driver.Step {
	return append(d.cp.CreateCluster(p), driver.Step{Name: "let kubelets join with bootstrap tokens", Condition: "TLSBootstrapReady",
		Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
			cl, err := d.cp.Client(c)
			if err != nil {
				return err
			}
			for _, b := range bootstrapBindings {
				if err := cl.EnsureClusterRoleBinding(ctx, b.name, b.role, b.subject); err != nil {
					return err
				}
			}
			return nil
		}})
}

// UpdateCluster implements driver.Driver.
func (d *Driver) UpdateCluster(p driver.Params) []driver.Step { return d.cp.UpdateCluster(p) }

// DeleteCluster implements driver.Driver: every worker group's machines
// are undeployed and released, then the control plane goes.
func (d *Driver) DeleteCluster(p driver.Params) []driver.Step {
	steps := []driver.Step{
		{Name: "undeploy the cluster's machines", Condition: "MachinesUndeploying",
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				return d.releaseAll(ctx, e, c)
			}},
		{Name: "wait for the cluster's machines to be available", Condition: "MachinesReleased",
			Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
				return d.awaitReleased(ctx, e, c, "")
			}},
	}
	return append(steps, d.cp.DeleteCluster(p)...)
}

// UpgradeCluster implements driver.Driver: refused, the kubelet of a
// machine is its image's.
func (d *Driver) UpgradeCluster(p, to driver.Params, plan driver.UpgradePlan) []driver.Step {
	return []driver.Step{{Name: "upgrade", Condition: "Upgraded", Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
		return ecode.Errorf(ecode.Inval, "the %s driver does not upgrade clusters: a machine's kubelet is its image's; replace the node group with one of a new template", Name)
	}}}
}

// RotateCA implements driver.Driver: refused, the machines' kubelets hold
// certificates of the CA and would be cut off.
func (d *Driver) RotateCA(p driver.Params) []driver.Step {
	return []driver.Step{{Name: "rotate the CA", Condition: "CertificatesReady", Run: func(ctx context.Context, e driver.Env, c *driver.Cluster) error {
		return ecode.Errorf(ecode.Inval, "the %s driver does not rotate the CA: the machines' kubelets hold certificates of the current one", Name)
	}}}
}

// Monitor implements driver.Driver.
func (d *Driver) Monitor(c *driver.Cluster) driver.Monitor { return d.cp.Monitor(c) }

// ScaleManager implements driver.Driver.
func (d *Driver) ScaleManager(c *driver.Cluster) driver.ScaleManager { return d.cp.ScaleManager(c) }

// store is the Env's access to the configuration and child jobs.
func store(e driver.Env) (driver.Store, error) {
	s, ok := e.(driver.Store)
	if !ok {
		return nil, ecode.Errorf(ecode.Environ, "the %s driver needs the configuration: its steps run only as COE jobs", Name)
	}
	return s, nil
}

// Placement keys (config.COECluster.Placement).
const (
	placeToken   = "bm_token/"   // + machine uuid: the id of its bootstrap token
	placeRelease = "bm_release/" // + machine uuid: the group uuid it is being released from
	placeWait    = "bm_wait/"    // + group name: unix seconds when its deploys were submitted
	// placeReleaseWait + group uuid ("" for the whole cluster): unix
	// seconds when its undeploys were submitted.
	placeReleaseWait = "bm_release_wait/"
)

func placeString(c *driver.Cluster, key string) string {
	s, _ := c.Placement[key].(string)
	return s
}

// deadline is when a wait begun at the placement's key gives up: the
// cluster's create_timeout (an hour when unset) after it. While the
// cluster is being created, the create's own deadline counts from the
// cluster's creation: the group's wait ends two polls before it, so that
// the cluster shows the group's reason rather than the create's timeout.
func (d *Driver) deadline(c *driver.Cluster, key string) (time.Time, time.Duration) {
	timeout := time.Duration(c.CreateTimeout) * time.Minute
	if timeout <= 0 {
		timeout = time.Hour
	}
	start := c.PlaceInt(key)
	if start == 0 {
		start = d.now().Unix()
	}
	end := time.Unix(start, 0).Add(timeout)
	if c.Status == config.COECreateInProgress && c.CTime > 0 {
		if create := time.Unix(int64(c.CTime), 0).Add(timeout - 2*d.poll()); create.Before(end) {
			end = create
		}
	}
	return end, timeout
}

// park waits until the next check, or fails with why once past deadline.
func (d *Driver) park(ctx context.Context, e driver.Env, deadline time.Time, timedOut func() error) error {
	if !d.now().Before(deadline) {
		return timedOut()
	}
	next := d.now().Add(d.poll())
	if next.After(deadline) {
		next = deadline
	}
	return e.Park(ctx, next)
}
