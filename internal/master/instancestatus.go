package master

import (
	"context"
	"fmt"
	"time"

	"github.com/corral/corral/internal/config"
)

// The watcher records what it did about an instance that should run
// (admin state up) in the instance's status (config.Status, kept apart
// from its configuration): condition Running with the reason, and the
// observed and target states. An instance the watcher never had to act
// on has no status, and none is written while nothing changes.
const (
	condRunning = "Running"

	reasonRestarting    = "Restarting"          // found down, a restart job submitted
	reasonNotSubmitted  = "RestartNotSubmitted" // the restart job could not be queued
	reasonRestartGaveUp = "RestartGaveUp"       // down after maxRestartTries restarts
	reasonRestarted     = "Restarted"           // running again after restarts
	observedRunning     = "running"
	observedNotRunning  = "down"
)

// updateInstanceStatus applies change to inst's status and writes it when
// it changed. A failed write is logged: the status is a report, and the
// next round writes it again.
func (d *Daemon) updateInstanceStatus(ctx context.Context, inst *config.Instance, change func(s *config.Status, now time.Time)) {
	next, changed := changedStatus(d.cfg.InstanceStatus(inst.UUID), change)
	if !changed {
		return
	}
	tx := d.cfg.Begin()
	if !tx.PutInstanceStatus(inst.UUID, next) {
		return // removed meanwhile
	}
	if err := d.cfg.Commit(ctx, tx); err != nil {
		d.log.Warn("watcher: cannot record an instance's status", "instance", inst.Name, "err", err)
	}
}

// updateNodeStatus is updateInstanceStatus for a node.
func (d *Daemon) updateNodeStatus(ctx context.Context, node *config.Node, change func(s *config.Status, now time.Time)) {
	next, changed := changedStatus(d.cfg.NodeStatus(node.UUID), change)
	if !changed {
		return
	}
	tx := d.cfg.Begin()
	if !tx.PutNodeStatus(node.UUID, next) {
		return
	}
	if err := d.cfg.Commit(ctx, tx); err != nil {
		d.log.Warn("watcher: cannot record a node's status", "node", node.Name, "err", err)
	}
}

// changedStatus is config.ChangeStatus at the current time.
func changedStatus(cur *config.Status, change func(s *config.Status, now time.Time)) (*config.Status, bool) {
	return config.ChangeStatus(cur, change, time.Now())
}

// restartingStatus: inst was found down and restart try of maxRestartTries
// was submitted as job. The last error (of an earlier restart) stays.
func restartingStatus(inst *config.Instance, try int, job int64) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		s.State, s.Target = observedNotRunning, inst.AdminState
		s.SetCondition(config.Condition{Type: condRunning, Status: config.ConditionFalse, Reason: reasonRestarting,
			Message: fmt.Sprintf("found down, restart %d of %d submitted as job %d", try, maxRestartTries, job)}, now)
	}
}

// notSubmittedStatus: the restart job could not be queued.
func notSubmittedStatus(inst *config.Instance, err error) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		s.State, s.Target, s.LastError = observedNotRunning, inst.AdminState, err.Error()
		s.SetCondition(config.Condition{Type: condRunning, Status: config.ConditionFalse, Reason: reasonNotSubmitted,
			Message: "found down, and its restart could not be queued"}, now)
	}
}

// gaveUpStatus: inst did not stay up after maxRestartTries restarts.
func gaveUpStatus(inst *config.Instance) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		s.State, s.Target = observedNotRunning, inst.AdminState
		s.SetCondition(config.Condition{Type: condRunning, Status: config.ConditionFalse, Reason: reasonRestartGaveUp,
			Message: fmt.Sprintf("did not stay up after %d restarts; the watcher no longer restarts it", maxRestartTries)}, now)
	}
}

// runningStatus: inst runs. Only an instance the watcher acted on has a
// status to update; the others keep none.
func runningStatus(inst *config.Instance) func(*config.Status, time.Time) {
	return func(s *config.Status, now time.Time) {
		c, ok := s.Condition(condRunning)
		if !ok || c.Status == config.ConditionTrue {
			return
		}
		s.State, s.Target, s.LastError = observedRunning, inst.AdminState, ""
		s.SetCondition(config.Condition{Type: condRunning, Status: config.ConditionTrue, Reason: reasonRestarted,
			Message: "running again after the watcher restarted it"}, now)
	}
}

// notWantedStatus: inst is no longer meant to run, so what the watcher
// recorded about keeping it up no longer applies.
func notWantedStatus(s *config.Status, _ time.Time) {
	s.RemoveCondition(condRunning)
	if len(s.Conditions) == 0 {
		*s = config.Status{}
	}
}
