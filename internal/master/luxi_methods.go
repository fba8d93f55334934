package master

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/corral/corral/internal/coewire"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/machinewire"
	"github.com/corral/corral/internal/pair"
	"github.com/corral/corral/internal/seconds"
)

// luxiMethod answers one LUXI method.
type luxiMethod func(h *luxiHandler, ctx context.Context, args []json.RawMessage) (any, error)

// luxiMethods are the LUXI methods corrald answers. The dispatcher serves
// exactly these and the metrics label requests by these names (any other
// name counts as "other"), so a method cannot be served and go uncounted.
var luxiMethods = map[string]luxiMethod{
	luxi.MethodSubmitJob:               submitJob(false),
	luxi.MethodSubmitJobToDrainedQueue: submitJob(true),
	luxi.MethodSubmitManyJobs:          (*luxiHandler).luxiSubmitManyJobs,
	luxi.MethodWaitForJobChange:        (*luxiHandler).waitForJobChange,
	luxi.MethodCancelJob:               (*luxiHandler).luxiCancelJob,
	luxi.MethodChangeJobPriority:       (*luxiHandler).luxiChangeJobPriority,
	luxi.MethodArchiveJob:              (*luxiHandler).luxiArchiveJob,
	luxi.MethodAutoArchiveJobs:         (*luxiHandler).luxiAutoArchiveJobs,
	luxi.MethodQueryJobs:               (*luxiHandler).luxiQueryJobs,
	luxi.MethodQuery:                   (*luxiHandler).luxiQueryResource,
	luxi.MethodQueryFields:             (*luxiHandler).luxiQueryFields,
	"QueryExports":                     (*luxiHandler).luxiQueryExports,
	luxi.MethodQueryInstances:          classicQuery("instance"),
	luxi.MethodQueryNodes:              classicQuery("node"),
	luxi.MethodQueryGroups:             classicQuery("group"),
	luxi.MethodQueryNetworks:           classicQuery("network"),
	luxi.MethodQueryClusterInfo:        (*luxiHandler).luxiQueryClusterInfo,
	luxi.MethodQueryConfigValues:       (*luxiHandler).luxiQueryConfigValues,
	luxi.MethodQueryTags:               (*luxiHandler).luxiQueryTags,
	luxi.MethodSetDrainFlag:            (*luxiHandler).luxiSetDrainFlag,
	luxi.MethodSetWatcherPause:         (*luxiHandler).luxiSetWatcherPause,
	luxi.MethodQueryReconcilers:        (*luxiHandler).luxiQueryReconcilers,
	luxi.MethodSetReconcilerPause:      (*luxiHandler).luxiSetReconcilerPause,
	"CreateJoinToken":                  (*luxiHandler).luxiCreateJoinToken,
	"BackupStore":                      (*luxiHandler).luxiBackupStore,
	"DebugLocks":                       (*luxiHandler).luxiDebugLocks,
	"QueryStats":                       (*luxiHandler).luxiQueryStats,
	luxi.MethodQueryMetrics:            (*luxiHandler).luxiQueryMetrics,
	luxi.MethodNotifyEvent:             (*luxiHandler).luxiNotifyEvent,
	luxi.MethodPairRedeem:              (*luxiHandler).luxiPairRedeem,
	"MasterFailover":                   (*luxiHandler).luxiMasterFailover,
	machinewire.MethodQuery:            (*luxiHandler).luxiMachineQuery,
	machinewire.MethodPorts:            (*luxiHandler).luxiMachinePorts,
	machinewire.MethodDrivers:          (*luxiHandler).luxiMachineDrivers,
	machinewire.MethodSubmit:           (*luxiHandler).luxiMachineSubmit,
	machinewire.MethodLookup:           (*luxiHandler).luxiMachineLookup,
	machinewire.MethodHeartbeat:        (*luxiHandler).luxiMachineHeartbeat,
	coewire.MethodTemplates:            (*luxiHandler).luxiCOETemplates,
	coewire.MethodClusters:             (*luxiHandler).luxiCOEClusters,
	coewire.MethodNodeGroups:           (*luxiHandler).luxiCOENodeGroups,
	coewire.MethodQuotas:               (*luxiHandler).luxiCOEQuotas,
	coewire.MethodFederations:          (*luxiHandler).luxiCOEFederations,
	coewire.MethodCA:                   (*luxiHandler).luxiCOECA,
	coewire.MethodSign:                 (*luxiHandler).luxiCOESign,
	coewire.MethodServices:             (*luxiHandler).luxiCOEServices,
	coewire.MethodSubmit:               (*luxiHandler).luxiCOESubmit,
}

// submitJob answers SubmitJob, or SubmitJobToDrainedQueue if drained.
func submitJob(drained bool) luxiMethod {
	return func(h *luxiHandler, ctx context.Context, args []json.RawMessage) (any, error) {
		q := h.d.queue
		ops, err := arg[[]json.RawMessage](args, 0, "ops")
		if err != nil {
			return nil, err
		}
		if err := checkRootOnly(ctx, ops); err != nil {
			return nil, err
		}
		if !drained {
			return q.Submit(ctx, ops)
		}
		return q.SubmitToDrained(ctx, ops)
	}
}

func (h *luxiHandler) luxiSubmitManyJobs(ctx context.Context, args []json.RawMessage) (any, error) {
	q := h.d.queue
	jobs, err := arg[[][]json.RawMessage](args, 0, "jobs")
	if err != nil {
		return nil, err
	}
	for _, ops := range jobs {
		if err := checkRootOnly(ctx, ops); err != nil {
			return nil, err
		}
	}
	res, err := q.SubmitMany(ctx, jobs)
	if err != nil {
		return nil, err
	}
	out := make([][2]any, len(res))
	for i, r := range res {
		if r.OK {
			out[i] = [2]any{true, r.JobID}
		} else {
			out[i] = [2]any{false, r.Err.Error()}
		}
	}
	return out, nil
}

func (h *luxiHandler) luxiCancelJob(ctx context.Context, args []json.RawMessage) (any, error) {
	q := h.d.queue
	id, err := jobID(args, 0)
	if err != nil {
		return nil, err
	}
	kill, err := optArg(args, 1, false)
	if err != nil {
		return nil, err
	}
	ok, msg, err := q.Cancel(ctx, id, kill)
	if err != nil {
		return nil, err
	}
	return []any{ok, msg}, nil
}

func (h *luxiHandler) luxiChangeJobPriority(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	q := h.d.queue
	id, err := jobID(args, 0)
	if err != nil {
		return nil, err
	}
	prio, err := arg[int](args, 1, "priority")
	if err != nil {
		return nil, err
	}
	ok, msg, err := q.ChangePriority(ctx, id, prio)
	if err != nil {
		return nil, err
	}
	if ok {
		// An op blocked on its locks is queued in the lock manager at
		// the priority it started with: move it too, or the change
		// would show in the job but not decide who gets the lock.
		// The engine names lock owners "job ID/op N OP_ID".
		owner := fmt.Sprintf("job %d/", id)
		if _, err := d.locks.SetWaitPriority(func(o string) bool { return strings.HasPrefix(o, owner) }, prio); err != nil {
			return nil, err
		}
	}
	return []any{ok, msg}, nil
}

func (h *luxiHandler) luxiArchiveJob(ctx context.Context, args []json.RawMessage) (any, error) {
	q := h.d.queue
	id, err := jobID(args, 0)
	if err != nil {
		return nil, err
	}
	return q.Archive(ctx, id)
}

func (h *luxiHandler) luxiAutoArchiveJobs(ctx context.Context, args []json.RawMessage) (any, error) {
	q := h.d.queue
	age, err := arg[float64](args, 0, "age")
	if err != nil {
		return nil, err
	}
	tmo, err := optArg[float64](args, 1, 89)
	if err != nil {
		return nil, err
	}
	a := seconds.Duration(age)
	if age < 0 {
		a = -1
	}
	n, rem, err := q.AutoArchive(ctx, a, seconds.Duration(tmo))
	if err != nil {
		return nil, err
	}
	return []any{n, rem}, nil
}

func (h *luxiHandler) luxiQueryJobs(ctx context.Context, args []json.RawMessage) (any, error) {
	q := h.d.queue
	ids, err := optArg[[]any](args, 0, nil)
	if err != nil {
		return nil, err
	}
	fields, err := arg[[]string](args, 1, "fields")
	if err != nil {
		return nil, err
	}
	var idl []int64
	for i, v := range ids {
		raw, _ := json.Marshal(v)
		id, err := jobID([]json.RawMessage{raw}, 0)
		if err != nil {
			return nil, fmt.Errorf("job id %d: %w", i, err)
		}
		idl = append(idl, id)
	}
	rows, err := q.Query(ctx, idl, fields)
	if err != nil {
		return nil, err
	}
	redactJobRows(h.d.engine.Ops(), fields, rows)
	return rows, nil
}

func (h *luxiHandler) luxiQueryResource(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	what, err := arg[string](args, 0, "resource")
	if err != nil {
		return nil, err
	}
	fields, err := arg[[]string](args, 1, "fields")
	if err != nil {
		return nil, err
	}
	filter, err := optArg[any](args, 2, nil)
	if err != nil {
		return nil, err
	}
	return d.query(ctx, what, fields, filter)
}

func (h *luxiHandler) luxiQueryFields(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	what, err := arg[string](args, 0, "resource")
	if err != nil {
		return nil, err
	}
	fields, err := optArg[[]string](args, 1, nil)
	if err != nil {
		return nil, err
	}
	return d.queryFields(what, fields)
}

func (h *luxiHandler) luxiQueryExports(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	// [nodes, use_locking]: rows of [node, export].
	nodes, err := optArg[[]string](args, 0, nil)
	if err != nil {
		return nil, err
	}
	if lock, _ := optArg(args, 1, false); lock {
		return nil, ecode.Errorf(ecode.Inval, "Locking queries are not supported")
	}
	return d.classicQuery(ctx, "export", nodes, []string{"node", "export"})
}

// classicQuery answers QueryInstances, QueryNodes, QueryGroups or
// QueryNetworks: the resource what.
func classicQuery(what string) luxiMethod {
	return func(h *luxiHandler, ctx context.Context, args []json.RawMessage) (any, error) {
		d := h.d
		names, err := optArg[[]string](args, 0, nil)
		if err != nil {
			return nil, err
		}
		fields, err := arg[[]string](args, 1, "fields")
		if err != nil {
			return nil, err
		}
		if lock, _ := optArg(args, 2, false); lock {
			return nil, ecode.Errorf(ecode.Inval, "Locking queries are not supported")
		}
		return d.classicQuery(ctx, what, names, fields)
	}
}

func (h *luxiHandler) luxiQueryClusterInfo(ctx context.Context, args []json.RawMessage) (any, error) {
	return h.d.clusterInfo(), nil
}

func (h *luxiHandler) luxiQueryConfigValues(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	fields, err := arg[[]string](args, 0, "fields")
	if err != nil {
		return nil, err
	}
	return d.configValues(fields)
}

func (h *luxiHandler) luxiQueryTags(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	kind, err := arg[string](args, 0, "kind")
	if err != nil {
		return nil, err
	}
	name, _ := optArg(args, 1, "")
	return d.tags(kind, name)
}

func (h *luxiHandler) luxiSetDrainFlag(ctx context.Context, args []json.RawMessage) (any, error) {
	q := h.d.queue
	flag, err := arg[bool](args, 0, "flag")
	if err != nil {
		return nil, err
	}
	return true, q.SetDrained(ctx, flag)
}

// luxiNotifyEvent delivers an event to the ops suspended on it.
func (h *luxiHandler) luxiNotifyEvent(ctx context.Context, args []json.RawMessage) (any, error) {
	event, err := arg[string](args, 0, "event")
	if err != nil {
		return nil, err
	}
	return nil, h.d.engine.Notify(event)
}

func (h *luxiHandler) luxiSetWatcherPause(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	until, err := optArg[*float64](args, 0, nil)
	if err != nil {
		return nil, err
	}
	return d.setWatcherPause(ctx, until)
}

func (h *luxiHandler) luxiCreateJoinToken(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	node, err := arg[string](args, 0, "node name")
	if err != nil {
		return nil, err
	}
	ttl, err := optArg[float64](args, 1, 3600)
	if err != nil {
		return nil, err
	}
	readd, err := optArg[bool](args, 2, false)
	if err != nil {
		return nil, err
	}
	return d.createJoinToken(ctx, node, seconds.Duration(ttl), readd)
}

func (h *luxiHandler) luxiBackupStore(ctx context.Context, args []json.RawMessage) (any, error) {
	return h.d.backupStore(ctx)
}

func (h *luxiHandler) luxiDebugLocks(ctx context.Context, args []json.RawMessage) (any, error) {
	return h.d.locks.Info(), nil
}

func (h *luxiHandler) luxiQueryStats(ctx context.Context, args []json.RawMessage) (any, error) {
	return h.d.queue.Stats(), nil
}

func (h *luxiHandler) luxiQueryMetrics(ctx context.Context, args []json.RawMessage) (any, error) {
	return h.d.metrics.text()
}

func (h *luxiHandler) luxiPairRedeem(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	// Corral only: [request] of a cluster joining through a pairing
	// token (see pair.go).
	req, err := arg[pair.Request](args, 0, "pairing request")
	if err != nil {
		return nil, err
	}
	return d.pairRedeem(ctx, req)
}

func (h *luxiHandler) luxiMasterFailover(ctx context.Context, args []json.RawMessage) (any, error) {
	d := h.d
	// [target]: the candidate to hand the role to; null or "" lets
	// the candidates elect one.
	to, err := optArg(args, 0, "")
	if err != nil {
		return nil, err
	}
	return d.failover(ctx, to)
}
