package master

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/corral/corral/internal/ganetidropin"
	"github.com/corral/corral/internal/luxi"
)

// Retry pacing of drop-in mode's sockets and ssconf files.
const (
	dropinRetry     = time.Second
	dropinWarnEvery = 30 * time.Second
	// ssconfRewriteWait bounds redist-conf's wait for the ssconf writer.
	ssconfRewriteWait = 30 * time.Second
)

// serveGanetiDropin runs Ganeti drop-in mode when the cluster has it on
// (config.Cluster.GanetiDropin): LUXI on Ganeti's socket paths, under the
// same limits as main (corrald's own socket), and Ganeti's ssconf files
// kept current. Both run in goroutines of wg until ctx ends. Neither makes
// corrald fail: a socket path held by a live server (a predecessor still
// stopping, or a real Ganeti) is retried in the background, and so is an
// ssconf file that cannot be written, with warnings in the log.
func (d *Daemon) serveGanetiDropin(ctx context.Context, wg *sync.WaitGroup, main *luxi.Server) {
	c := d.cfg.Cluster()
	if !c.GanetiDropin {
		return
	}
	l := ganetidropin.Layout{Root: c.GanetiRoot}
	d.log.Info("Ganeti drop-in mode: serving Ganeti's LUXI sockets and ssconf files", "root", l.DataDir(), "sockets", l.Sockets())
	wg.Go(func() { d.keepSsconf(ctx, l) })
	for _, path := range l.Sockets() {
		wg.Go(func() { d.serveDropinSocket(ctx, path, main) })
	}
}

// serveDropinSocket serves LUXI on one of Ganeti's socket paths until ctx
// ends. The socket directory is setgid to the access group (see
// ganetidropin.Prepare), so the socket gets the group from it.
func (d *Daemon) serveDropinSocket(ctx context.Context, path string, main *luxi.Server) {
	var warned time.Time
	for {
		lo := d.opts.luxiOptions()
		lo.Path, lo.Mode, lo.Logger, lo.ShareLimits = path, 0o660, d.log, main
		err := luxi.NewServer(&luxiHandler{d}, lo).Serve(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			return
		}
		if time.Since(warned) >= dropinWarnEvery {
			d.log.Warn("Ganeti drop-in socket unavailable; retrying", "socket", path, "err", err)
			warned = time.Now()
		}
		if !sleepCtx(ctx, dropinRetry) {
			return
		}
	}
}

// keepSsconf writes the ssconf files now and after every configuration
// change, until ctx ends.
func (d *Daemon) keepSsconf(ctx context.Context, l ganetidropin.Layout) {
	w := ganetidropin.NewSsconfWriter(l)
	var warned time.Time
	var asked chan error // a rewrite's answer, sent after the next write
	for {
		// Ask for the next change before reading, so none is missed.
		changed := d.cfg.Changed()
		err := w.Write(ganetidropin.Values(d.ssconfSnapshot()))
		if asked != nil {
			asked <- err
			asked = nil
		}
		if err != nil {
			if time.Since(warned) >= dropinWarnEvery {
				d.log.Warn("Ganeti drop-in: cannot write the ssconf files; retrying", "err", err)
				warned = time.Now()
			}
			if !sleepCtx(ctx, dropinRetry) {
				return
			}
			continue
		}
		warned = time.Time{}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case asked = <-d.ssconfRewrites:
			// A new writer checks every file on disk again.
			w = ganetidropin.NewSsconfWriter(l)
		}
	}
}

// rewriteSsconf has keepSsconf check every ssconf file on disk and
// rewrite those that differ (cmdlib.Processor.RewriteSsconf).
func (d *Daemon) rewriteSsconf(ctx context.Context) (bool, error) {
	if !d.cfg.Cluster().GanetiDropin {
		return false, nil
	}
	ctx, cancel := context.WithTimeoutCause(ctx, ssconfRewriteWait, errors.New("the ssconf writer did not answer"))
	defer cancel()
	answer := make(chan error, 1)
	select {
	case d.ssconfRewrites <- answer:
	case <-ctx.Done():
		return true, context.Cause(ctx)
	}
	select {
	case err := <-answer:
		return true, err
	case <-ctx.Done():
		return true, context.Cause(ctx)
	}
}

// ssconfSnapshot is the configuration the ssconf files show.
func (d *Daemon) ssconfSnapshot() ganetidropin.Snapshot {
	c := d.cfg.Cluster()
	s := ganetidropin.Snapshot{Cluster: c, Nodes: d.cfg.Nodes(), Groups: d.cfg.Groups(), Instances: d.cfg.Instances(), Networks: d.cfg.Networks(), Release: Version}
	s.MasterIP = d.masterIP()
	return s
}

// masterIP is the cluster's master address as ssconf and QueryClusterInfo
// show it: the cluster IP when there is one, else the master node's
// primary IP.
func (d *Daemon) masterIP() string {
	c := d.cfg.Cluster()
	if c.ClusterIP != "" {
		return c.ClusterIP
	}
	if n, ok := d.cfg.Node(c.MasterNode); ok {
		return n.PrimaryIP
	}
	return ""
}

// sleepCtx waits for dur; false if ctx ended first.
func sleepCtx(ctx context.Context, dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
