package nodeserver

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/corral/corral/internal/hypervisor"
	"github.com/corral/corral/internal/nodeapi"
)

// stopRecorder is a hypervisor that records how it was asked to stop.
type stopRecorder struct {
	hypervisor.Hypervisor
	timeout time.Duration
	force   bool
}

func (r *stopRecorder) Stop(_ context.Context, _ string, timeout time.Duration, force bool) error {
	r.timeout, r.force = timeout, force
	return nil
}

// A shutdown timeout of 0 stops the instance at once, as Ganeti's
// --shutdown-timeout=0 does; any other value gives the guest that long.
func TestShutdownTimeoutZeroStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		timeout     int
		force       bool
		wantForce   bool
		wantTimeout time.Duration
	}{
		{timeout: 0, wantForce: true},
		{timeout: 30, wantTimeout: 30 * time.Second},
		{timeout: 30, force: true, wantForce: true, wantTimeout: 30 * time.Second},
	} {
		rec := &stopRecorder{}
		s := &Server{hvs: map[string]hypervisor.Hypervisor{"rec": rec}, log: slog.New(slog.DiscardHandler), name: "node1"}
		args := nodeapi.ShutdownArgs{Instance: nodeapi.InstanceSpec{Name: "inst1", Hypervisor: "rec"}, Timeout: tc.timeout, Force: tc.force}
		if _, err := s.instanceShutdown(context.Background(), args); err != nil {
			t.Fatal(err)
		}
		if rec.force != tc.wantForce || rec.timeout != tc.wantTimeout {
			t.Errorf("timeout %d force %v: stopped with timeout %v force %v, want %v %v",
				tc.timeout, tc.force, rec.timeout, rec.force, tc.wantTimeout, tc.wantForce)
		}
	}
}
