package cmdlib

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/impexp"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/pki"
	"github.com/corral/corral/internal/seconds"
	"github.com/corral/corral/internal/secret"
)

// Disk transfers: the master starts a listening import on one node and an
// export on another (or on a node of another cluster), then follows both
// through their status until every disk has arrived. Each end presents a
// transfer certificate made for this transfer on its own node and accepts
// exactly the other end's; the private keys never leave the nodes.

// transferCertValidity is how long a transfer certificate made for a move
// inside one cluster lives (a move between clusters asks for Ganeti's one
// day, RIE_CERT_VALIDITY).
const (
	transferCertValidity = time.Hour
	remoteCertValidity   = 24 * time.Hour
	// rieConnectTimeout is Ganeti's RIE_CONNECT_TIMEOUT: how long an
	// import of a move between clusters waits for its source, on top of
	// the source's shutdown timeout.
	rieConnectTimeout = 180
	// exportConnectTimeout and exportConnectRetries are Ganeti's per
	// attempt timeout and retries of an export's connection.
	exportConnectTimeout = 20
	exportConnectRetries = 10
)

// transferPoll is how often a transfer's status is read: the job sees a
// transfer's end this late (a status call costs a node well under a
// millisecond; half a second was a sixth of a 1 GiB disk's transfer).
// transferReport is how often its progress goes to the job log.
const (
	transferPoll   = 100 * time.Millisecond
	transferReport = 5 * time.Second
)

// transferEnd is one end of a transfer on a node of this cluster.
type transferEnd struct {
	node *config.Node
	name string // the import or export, once started
}

// diskTransfer is one disk's transfer inside this cluster.
type diskTransfer struct {
	Component string
	Src       *config.Node
	SrcIO     nodeapi.ImpExpIO
	Dst       *config.Node
	DstIO     nodeapi.ImpExpIO
}

// newCert makes a transfer certificate on node.
func (s *StepCtx) newCert(ctx context.Context, node *config.Node, validity time.Duration) (nodeapi.X509CertCreateReply, error) {
	var r nodeapi.X509CertCreateReply
	err := s.RPC(ctx, node, nodeapi.X509CertCreate, nodeapi.X509CertCreateArgs{Validity: int64(validity / time.Second)}, &r)
	if err != nil {
		return r, fmt.Errorf("creating a transfer certificate on %s: %w", node.Name, err)
	}
	return r, nil
}

// removeCert destroys a transfer key; a failure is logged, not fatal: the
// node sweeps expired keys.
func (s *StepCtx) removeCert(ctx context.Context, node *config.Node, name string) {
	if name == "" {
		return
	}
	if err := s.RPC(context.WithoutCancel(ctx), node, nodeapi.X509CertRemove, nodeapi.X509CertRemoveArgs{Name: name}, nil); err != nil {
		s.Logf(ctx, "Warning: could not remove transfer key %s on %s (it expires by itself): %v", name, node.Name, err)
	}
}

// runLocalTransfers moves disks between nodes of this cluster, all at
// once, and returns when every one arrived or the first failed (the others
// are then aborted).
func (s *StepCtx) runLocalTransfers(ctx context.Context, ts []diskTransfer, compress string) (err error) {
	certs := map[string]nodeapi.X509CertCreateReply{} // node uuid -> cert
	defer func() {
		for uuid, c := range certs {
			if n, ok := s.Cfg().Node(uuid); ok {
				s.removeCert(ctx, n, c.Name)
			}
		}
	}()
	for _, t := range ts {
		for _, n := range []*config.Node{t.Src, t.Dst} {
			if _, ok := certs[n.UUID]; ok {
				continue
			}
			c, err := s.newCert(ctx, n, transferCertValidity)
			if err != nil {
				return err
			}
			certs[n.UUID] = c
		}
	}
	var ends []transferEnd
	defer func() { s.finishTransfers(ctx, ends, err != nil) }()
	var follow []followed
	for _, t := range ts {
		magic := pki.ComputeMagic(pki.NewMagicBase(), t.Component, 0)
		dst, src := certs[t.Dst.UUID], certs[t.Src.UUID]
		var ir nodeapi.ImportStartReply
		iargs := nodeapi.ImportStartArgs{Component: t.Component, IO: t.DstIO, Options: nodeapi.ImpExpOptions{
			KeyName: dst.Name, PeerCertPEM: src.CertPEM, Compress: compress, Magic: magic, ConnectTimeout: 60}}
		if err := s.RPC(ctx, t.Dst, nodeapi.ImportStart, iargs, &ir); err != nil {
			return fmt.Errorf("%s: starting the import on %s: %w", t.Component, t.Dst.Name, err)
		}
		ends = append(ends, transferEnd{node: t.Dst, name: ir.Name})
		var er nodeapi.ExportStartReply
		eargs := nodeapi.ExportStartArgs{Component: t.Component, IO: t.SrcIO, Host: ir.Host, Port: ir.Port, Options: nodeapi.ImpExpOptions{
			KeyName: src.Name, PeerCertPEM: dst.CertPEM, Compress: compress, Magic: magic,
			ConnectTimeout: exportConnectTimeout, ConnectRetries: exportConnectRetries}}
		if err := s.RPC(ctx, t.Src, nodeapi.ExportStart, eargs, &er); err != nil {
			return fmt.Errorf("%s: starting the export on %s: %w", t.Component, t.Src.Name, err)
		}
		ends = append(ends, transferEnd{node: t.Src, name: er.Name})
		follow = append(follow, followed{label: t.Component, sizeMiB: t.SrcIO.SizeMiB,
			ends: []transferEnd{{node: t.Dst, name: ir.Name}, {node: t.Src, name: er.Name}}})
	}
	return s.followTransfers(ctx, follow)
}

// followed is one disk's transfer as the master follows it: its ends in
// this cluster (one for a move between clusters, two inside one).
type followed struct {
	label   string
	sizeMiB int64
	ends    []transferEnd
	done    bool
}

// followTransfers polls the transfers until all are done, logging
// progress; the first failure ends it with that end's error.
func (s *StepCtx) followTransfers(ctx context.Context, fs []followed) error {
	tick := time.NewTicker(transferPoll)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		pending := 0
		report := time.Since(lastReport) >= transferReport
		for i := range fs {
			f := &fs[i]
			if f.done {
				continue
			}
			all := true
			var progress *nodeapi.TransferStatus
			for _, e := range f.ends {
				st, err := s.transferStatus(ctx, e)
				if err != nil {
					return err
				}
				if st.Done && !st.OK {
					return ecode.ExecErrorf("%s: the transfer on %s failed: %s%s", f.label, e.node.Name, st.Error, recentOutput(st.Recent))
				}
				if !st.Done {
					all = false
				}
				if progress == nil || st.Bytes > progress.Bytes {
					progress = &st
				}
			}
			if all {
				f.done = true
				s.Logf(ctx, "%s: done, %s", f.label, progressText(progress, f.sizeMiB, true))
				continue
			}
			pending++
			if report {
				s.Logf(ctx, "%s: %s", f.label, progressText(progress, f.sizeMiB, false))
			}
		}
		if report {
			lastReport = time.Now()
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

func (s *StepCtx) transferStatus(ctx context.Context, e transferEnd) (nodeapi.TransferStatus, error) {
	var r nodeapi.ImpExpStatusReply
	// Status reads are not operations: they go without an operation id
	// so that every poll gets a fresh answer.
	if err := s.p.RPC.Call(ctx, e.node, nodeapi.ImpExpStatus, "", nodeapi.ImpExpNames{Names: []string{e.name}}, &r); err != nil {
		return nodeapi.TransferStatus{}, fmt.Errorf("reading the status of %s on %s: %w", e.name, e.node.Name, err)
	}
	if len(r.Status) != 1 || !r.Status[0].Known {
		return nodeapi.TransferStatus{}, ecode.ExecErrorf("transfer %s is unknown to node %s (did its daemon restart?)", e.name, e.node.Name)
	}
	return r.Status[0], nil
}

// finishTransfers forgets finished transfers on their nodes, aborting them
// first when the whole operation failed.
func (s *StepCtx) finishTransfers(ctx context.Context, ends []transferEnd, failed bool) {
	ctx = context.WithoutCancel(ctx)
	for _, e := range ends {
		args := nodeapi.ImpExpNames{Names: []string{e.name}}
		if failed {
			_ = s.p.RPC.Call(ctx, e.node, nodeapi.ImpExpAbort, "", args, nil)
		}
		if err := s.p.RPC.Call(ctx, e.node, nodeapi.ImpExpCleanup, "", args, nil); err != nil {
			s.p.Log.Warn("transfer cleanup failed", "transfer", e.name, "node", e.node.Name, "err", err)
		}
	}
}

func recentOutput(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "; last output:\n" + strings.Join(lines, "\n")
}

// progressText renders a transfer's progress: MiB done, percent,
// throughput and the time left.
func progressText(st *nodeapi.TransferStatus, sizeMiB int64, done bool) string {
	if st == nil {
		return "waiting"
	}
	if !st.Connected && st.Bytes == 0 && !done {
		return "waiting for the connection"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%.1f MiB", float64(st.Bytes)/(1<<20))
	if sizeMiB > 0 {
		fmt.Fprintf(&b, " of %d MiB", sizeMiB)
		pct := st.Percent
		if pct == 0 {
			pct = 100 * float64(st.Bytes) / float64(sizeMiB<<20)
		}
		if done {
			pct = 100
		}
		fmt.Fprintf(&b, " (%.0f%%)", pct)
	}
	if st.Throughput > 0 {
		fmt.Fprintf(&b, ", %.1f MiB/s", st.Throughput)
	}
	if !done && st.ETA > 0 {
		fmt.Fprintf(&b, ", ETA %s", seconds.Duration(st.ETA).Round(time.Second))
	}
	return b.String()
}

// peerStreamNote names, for the job log, the stream the nodes use with the
// other cluster: the node daemons choose it from the peer's transfer
// certificate (impexp.StreamFor), and this says which they will choose.
func peerStreamNote(peerPEM string) string {
	certs, err := pki.ParseCertificatesPEM([]byte(peerPEM))
	if err != nil || len(certs) != 1 || impexp.StreamFor(certs[0]) == impexp.StreamCorral {
		return "Corral's stream"
	}
	return "Ganeti's stream (the other cluster's transfer certificate is not Corral's)"
}

// domainSecret reads the cluster domain secret (on each use, so a renewed
// secret applies without a restart).
func (p *Processor) domainSecret() (secret.Secret, error) {
	if p.Secrets == nil {
		return "", ecode.Errorf(ecode.Environ, "The cluster domain secret is not available on this master")
	}
	v, err := p.Secrets.DomainSecret()
	if err != nil {
		return "", ecode.Errorf(ecode.Environ, "The cluster domain secret is not available on this master: %v", err)
	}
	return v, nil
}
