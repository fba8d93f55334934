package luxi

import "context"

// Corral's own methods for corrald's reconcilers; Ganeti has none.
const (
	// MethodQueryReconcilers lists the reconcilers: [] -> []ReconcilerState.
	MethodQueryReconcilers = "QueryReconcilers"
	// MethodSetReconcilerPause sets one reconciler's own pause switch:
	// [name, until] with until a Unix time, 0 for until resumed, or null
	// to resume it.
	MethodSetReconcilerPause = "SetReconcilerPause"
)

// ReconcilerState is one of corrald's periodic reconcilers as
// QueryReconcilers reports it. The counters and the last run count from
// the start of the master that answers.
type ReconcilerState struct {
	Name string `json:"name"`
	// Interval is the time between two rounds, in seconds; 0: it does not
	// run on its own (corrald's --watcher-interval 0).
	Interval float64 `json:"interval"`
	// PausedUntil is its own pause: the Unix time it ends, 0 until it is
	// resumed, null when it is not paused.
	PausedUntil *float64 `json:"paused_until"`
	// WatcherPaused reports that the watcher pause holds it, as it holds
	// every reconciler.
	WatcherPaused bool `json:"watcher_paused"`
	// LastRun is the Unix time its last round started (null: none yet),
	// LastDuration how long that round took in seconds.
	LastRun       *float64 `json:"last_run"`
	LastDuration  float64  `json:"last_duration"`
	Runs          uint64   `json:"runs"`
	Errors        uint64   `json:"errors"`
	LastError     string   `json:"last_error"`
	JobsSubmitted uint64   `json:"jobs_submitted"`
	PausedRounds  uint64   `json:"paused_rounds"`
}

// QueryReconcilers lists corrald's reconcilers, sorted by name.
func (c *Client) QueryReconcilers(ctx context.Context) ([]ReconcilerState, error) {
	var out []ReconcilerState
	err := c.Call(ctx, MethodQueryReconcilers, []any{}, &out)
	return out, err
}

// SetReconcilerPause pauses the named reconciler until the Unix time
// until (0: until resumed), or resumes it when until is nil.
func (c *Client) SetReconcilerPause(ctx context.Context, name string, until *float64) error {
	var arg any
	if until != nil {
		arg = *until
	}
	return c.Call(ctx, MethodSetReconcilerPause, []any{name, arg}, nil)
}
