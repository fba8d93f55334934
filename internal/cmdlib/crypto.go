package cmdlib

import (
	"context"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/engine"
	"github.com/corral/corral/internal/locking"
	"github.com/corral/corral/internal/opcodes"
	"github.com/corral/corral/internal/pki"
)

// cryptoUnits are the units of the cluster crypto opcodes.
func (p *Processor) cryptoUnits() []engine.Op {
	return []engine.Op{
		p.unit("OP_CLUSTER_RENEW_CRYPTO", func() LU { return &renewCryptoLU{} }),
	}
}

// renewCryptoLU replaces cluster secrets. The domain secret is written on
// the master, which reads it on each use: moves signed from then on use
// the new one, with no restart.
type renewCryptoLU struct {
	NewDomainSecret    bool `json:"new_cds"`
	StagedDomainSecret bool `json:"staged_cds"`
	// SSH renews the nodes' SSH keys (sshrenew.go); nil: not asked.
	SSH *sshRenewPlan `json:"ssh,omitempty"`
	// NodeCerts renews the node daemons' certificates (certrenew.go);
	// nil: not asked.
	NodeCerts *nodeCertPlan `json:"node_certs,omitempty"`
	// ClusterCert renews corrald's own certificate (certrenew.go).
	ClusterCert bool `json:"cluster_cert,omitempty"`
}

func (lu *renewCryptoLU) Locks(p *Processor, op *opcodes.Op) []locking.Request {
	return []locking.Request{bgl(locking.Exclusive)}
}

func (lu *renewCryptoLU) Prereq(ctx context.Context, p *Processor, op *opcodes.Op) error {
	if op.Bool("node_certificates") {
		lu.NodeCerts = &nodeCertPlan{}
	}
	lu.ClusterCert = op.Bool("new_cluster_certificate")
	if (lu.NodeCerts != nil || lu.ClusterCert) && p.Certs == nil {
		return ecode.Errorf(ecode.Environ, "This master cannot sign certificates")
	}
	if op.Bool("renew_ssh_keys") {
		var err error
		if lu.SSH, err = planSSHRenew(p, op); err != nil {
			return err
		}
	} else if op.Bool("upgrade_ssh") {
		return ecode.Errorf(ecode.Inval, "upgrade_ssh needs renew_ssh_keys")
	}
	lu.NewDomainSecret, lu.StagedDomainSecret = op.Bool("new_cluster_domain_secret"), op.Bool("staged_cluster_domain_secret")
	if lu.NewDomainSecret && lu.StagedDomainSecret {
		return ecode.Errorf(ecode.Inval, "Give either a new cluster domain secret or a staged one, not both")
	}
	if !lu.NewDomainSecret && !lu.StagedDomainSecret {
		if lu.SSH != nil || lu.NodeCerts != nil || lu.ClusterCert {
			return nil
		}
		return ecode.Errorf(ecode.Inval, "Nothing to renew")
	}
	if p.Secrets == nil {
		return ecode.Errorf(ecode.Environ, "This master keeps no cluster domain secret")
	}
	if lu.StagedDomainSecret {
		if _, err := p.Secrets.StagedDomainSecret(); err != nil {
			return ecode.Errorf(ecode.Environ, "%v", err)
		}
	}
	return nil
}

func (lu *renewCryptoLU) Steps() []Step {
	var steps []Step
	if lu.NewDomainSecret || lu.StagedDomainSecret {
		steps = append(steps, lu.domainSecretStep())
	}
	if lu.SSH != nil {
		steps = append(steps, lu.SSH.steps()...)
	}
	if lu.NodeCerts != nil {
		steps = append(steps, lu.NodeCerts.steps()...)
	}
	if lu.ClusterCert {
		steps = append(steps, clusterCertStep())
	}
	return steps
}

func (lu *renewCryptoLU) domainSecretStep() Step {
	return Step{"domain-secret", func(ctx context.Context, s *StepCtx) error {
		v := pki.NewDomainSecret()
		if lu.StagedDomainSecret {
			var err error
			if v, err = s.p.Secrets.StagedDomainSecret(); err != nil {
				return ecode.Errorf(ecode.Environ, "%v", err)
			}
		}
		if err := s.p.Secrets.SetDomainSecret(ctx, v); err != nil {
			return ecode.ExecErrorf("Could not write the cluster domain secret: %v", err)
		}
		if lu.StagedDomainSecret {
			s.Logf(ctx, "Installed the given cluster domain secret")
		} else {
			s.Logf(ctx, "Made a new cluster domain secret")
		}
		s.Logf(ctx, "Moves from and to this cluster now need the new secret on the other cluster too")
		return nil
	}}
}

func (lu *renewCryptoLU) Result() any { return nil }
