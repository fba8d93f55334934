package master

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
)

// COESigner signs certificate requests with a COE cluster's CA, whose key
// is kept sealed in the store (config.COECertificate.KeySealed): corrald
// wires the implementation that can unseal it (Options.COESigner).
type COESigner interface {
	// SignCSR signs a PEM certificate request with ca and returns the
	// certificate (PEM). A request that is not a valid CSR is an Inval
	// error; the key never leaves the signer.
	SignCSR(ctx context.Context, ca *config.COECertificate, csrPEM string) (string, error)
}

// coeSubmitWait bounds how long COESubmit waits for an op to show under
// way; a busy queue answers with the job id before it.
const coeSubmitWait = 30 * time.Second

func (h *luxiHandler) luxiCOETemplates(ctx context.Context, args []json.RawMessage) (any, error) {
	ts, err := namedOrAll(args, h.d.cfg.COETemplates, h.d.cfg.MustCOETemplate)
	if err != nil {
		return nil, err
	}
	return listOf(ts), nil
}

func (h *luxiHandler) luxiCOEClusters(ctx context.Context, args []json.RawMessage) (any, error) {
	cfg := h.d.cfg
	cs, err := namedOrAll(args, cfg.COEClusters, cfg.MustCOECluster)
	if err != nil {
		return nil, err
	}
	out := make([]coewire.ClusterRecord, len(cs))
	for i, c := range cs {
		out[i] = coewire.ClusterRecord{Cluster: c, NodeGroups: listOf(cfg.COENodeGroups(c.UUID)), Status: cfg.COEClusterStatus(c.UUID)}
		if t, ok := cfg.COETemplate(c.Template); ok {
			out[i].TemplateLabels = t.Labels
		}
	}
	return out, nil
}

func (h *luxiHandler) luxiCOENodeGroups(ctx context.Context, args []json.RawMessage) (any, error) {
	a, err := arg[coewire.NodeGroupArgs](args, 0, "node group query")
	if err != nil {
		return nil, err
	}
	cfg := h.d.cfg
	c, err := cfg.MustCOECluster(a.Cluster)
	if err != nil {
		return nil, err
	}
	if len(a.Names) == 0 {
		return listOf(cfg.COENodeGroups(c.UUID)), nil
	}
	out := make([]*config.COENodeGroup, 0, len(a.Names))
	for _, n := range a.Names {
		g, err := cfg.COENodeGroup(c.UUID, n)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func (h *luxiHandler) luxiCOEQuotas(ctx context.Context, args []json.RawMessage) (any, error) {
	return listOf(h.d.cfg.COEQuotas()), nil
}

func (h *luxiHandler) luxiCOEFederations(ctx context.Context, args []json.RawMessage) (any, error) {
	fs, err := namedOrAll(args, h.d.cfg.COEFederations, h.d.cfg.MustCOEFederation)
	if err != nil {
		return nil, err
	}
	return listOf(fs), nil
}

// coeCA finds a cluster's CA: NoEnt while the cluster has none yet.
func (d *Daemon) coeCA(cluster string) (*config.COECluster, *config.COECertificate, error) {
	c, err := d.cfg.MustCOECluster(cluster)
	if err != nil {
		return nil, nil, err
	}
	ca, ok := d.cfg.COECertificate(c.UUID)
	if !ok || ca.CertPEM == "" {
		return nil, nil, ecode.Errorf(ecode.NoEnt, "Cluster %s has no CA yet.", c.UUID)
	}
	return c, ca, nil
}

func (h *luxiHandler) luxiCOECA(ctx context.Context, args []json.RawMessage) (any, error) {
	cluster, err := arg[string](args, 0, "cluster")
	if err != nil {
		return nil, err
	}
	c, ca, err := h.d.coeCA(cluster)
	if err != nil {
		return nil, err
	}
	return coewire.Certificate{ClusterUUID: c.UUID, PEM: ca.CertPEM}, nil
}

func (h *luxiHandler) luxiCOESign(ctx context.Context, args []json.RawMessage) (any, error) {
	a, err := arg[coewire.SignArgs](args, 0, "sign")
	if err != nil {
		return nil, err
	}
	c, ca, err := h.d.coeCA(a.Cluster)
	if err != nil {
		return nil, err
	}
	signer := h.d.opts.COESigner
	if signer == nil {
		return nil, ecode.Errorf(ecode.Environ, "this corrald cannot sign with cluster CAs: no COE certificate signer is configured")
	}
	pem, err := signer.SignCSR(ctx, ca, a.CSR)
	if err != nil {
		return nil, err
	}
	return coewire.Certificate{ClusterUUID: c.UUID, PEM: pem}, nil
}

// luxiCOEServices answers the master's corrald as the service acting for
// the API (Magnum's conductor).
func (h *luxiHandler) luxiCOEServices(ctx context.Context, args []json.RawMessage) (any, error) {
	cl := h.d.cfg.Cluster()
	host := cl.MasterNode
	if n, ok := h.d.cfg.Node(cl.MasterNode); ok {
		host = n.Name
	}
	return []coewire.Service{{Host: host, Binary: "corrald", Up: true, Since: cl.CTime}}, nil
}

// coeTarget is what a COE op acts on, to see it under way: an object's
// presence and serial.
type coeTarget func() (exists bool, serial int64)

// coeTargetOf picks how to watch op: a created object appears, a changed
// one's serial moves; nil: only the job's end tells (templates, quotas).
func (d *Daemon) coeTargetOf(op map[string]any) coeTarget {
	id, _ := op["OP_ID"].(string)
	str := func(k string) string { s, _ := op[k].(string); return s }
	cfg := d.cfg
	cluster := func(ident string) coeTarget {
		return func() (bool, int64) {
			c, ok := cfg.COECluster(ident)
			if !ok {
				return false, 0
			}
			return true, c.Serial
		}
	}
	group := func(clusterIdent, ident string) coeTarget {
		return func() (bool, int64) {
			c, ok := cfg.COECluster(clusterIdent)
			if !ok {
				return false, 0
			}
			g, err := cfg.COENodeGroup(c.UUID, ident)
			if err != nil {
				return false, 0
			}
			return true, g.Serial
		}
	}
	federation := func(ident string) coeTarget {
		return func() (bool, int64) {
			f, ok := cfg.COEFederation(ident)
			if !ok {
				return false, 0
			}
			return true, f.Serial
		}
	}
	switch id {
	case "OP_COE_FEDERATION_CREATE":
		return federation(str("uuid"))
	case "OP_COE_FEDERATION_MODIFY", "OP_COE_FEDERATION_REMOVE":
		return federation(str("federation"))
	case "OP_COE_CLUSTER_CREATE":
		return cluster(str("uuid"))
	case "OP_COE_CLUSTER_MODIFY", "OP_COE_CLUSTER_RESIZE", "OP_COE_CLUSTER_UPGRADE", "OP_COE_CLUSTER_REMOVE", "OP_COE_CA_ROTATE":
		return cluster(str("cluster"))
	case "OP_COE_NODEGROUP_CREATE":
		return group(str("cluster"), str("uuid"))
	case "OP_COE_NODEGROUP_MODIFY", "OP_COE_NODEGROUP_REMOVE":
		return group(str("cluster"), str("nodegroup"))
	}
	return nil
}

// luxiCOESubmit submits one OP_COE_* op and waits until its object shows
// it under way (see coewire.MethodSubmit), the job ended, or
// coeSubmitWait passed; a failed op answers with its error.
func (h *luxiHandler) luxiCOESubmit(ctx context.Context, args []json.RawMessage) (any, error) {
	raw, err := arg[json.RawMessage](args, 0, "op")
	if err != nil {
		return nil, err
	}
	var op map[string]any
	if err := json.Unmarshal(raw, &op); err != nil {
		return nil, ecode.Errorf(ecode.Inval, "COESubmit takes one OP_COE_* opcode")
	}
	if id, _ := op["OP_ID"].(string); !strings.HasPrefix(id, "OP_COE_") {
		return nil, ecode.Errorf(ecode.Inval, "COESubmit takes one OP_COE_* opcode")
	}
	target := h.d.coeTargetOf(op)
	var had bool
	var serial int64
	if target != nil {
		had, serial = target()
	}
	q := h.d.queue
	id, err := q.Submit(ctx, []json.RawMessage{raw})
	if err != nil {
		return nil, err
	}
	reply := coewire.SubmitReply{JobID: id}
	sub, err := q.Subscribe(id)
	if err != nil {
		return reply, nil // ended and gone already: nothing to wait for
	}
	defer sub.Close()
	timer := time.NewTimer(coeSubmitWait)
	defer timer.Stop()
	for {
		changed := h.d.cfg.Changed()
		done, err := h.d.machineJobOutcome(ctx, id)
		if done || err != nil {
			return reply, err
		}
		if target != nil {
			if has, s := target(); has != had || s != serial {
				return reply, nil
			}
		}
		select {
		case <-changed:
		case <-sub.C:
		case <-timer.C:
			return reply, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// listOf is s, or an empty slice for nil, so a reply is a JSON list.
func listOf[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
