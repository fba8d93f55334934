package master

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral/corral/internal/cmdlib"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/nodeapi"
	"github.com/corral/corral/internal/query"
)

// TestRestartLeavesARescuedInstanceAlone: the instance-restart reconciler
// finds three instances down on a node that answers: one in rescue that
// should run (its rescue ramdisk was stopped behind Corral's back), one in
// rescue that was shut down, and one that is not in rescue. It restarts
// only the last; the rescued instances' statuses stay as their rescue
// jobs wrote them, round after round.
func TestRestartLeavesARescuedInstanceAlone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	d := reconcilerDaemon(t, Options{WatcherInterval: time.Minute}, succeed)
	n1, _ := d.cfg.Node("n1")
	rescue := &config.Status{State: cmdlib.StateRescue, Target: cmdlib.StateRescue}
	rescue.SetCondition(config.Condition{Type: cmdlib.CondRescue, Status: config.ConditionTrue, Reason: "Rescued", Message: "runs the rescue ramdisk"}, time.Now())
	for _, in := range []struct {
		name    string
		admin   string
		rescued bool
	}{{"rescued", config.AdminUp, true}, {"rescued-down", config.AdminDown, true}, {"plain", config.AdminUp, false}} {
		tx := d.cfg.Begin()
		tx.PutInstance(&config.Instance{Meta: config.Meta{Name: in.name}, PrimaryNode: n1.UUID, AdminState: in.admin,
			Hypervisor: "kvm", DiskTemplate: config.DTDiskless})
		if err := d.cfg.Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
		if !in.rescued {
			continue
		}
		inst, _ := d.cfg.Instance(in.name)
		tx = d.cfg.Begin()
		tx.PutInstanceStatus(inst.UUID, rescue.Clone())
		if err := d.cfg.Commit(ctx, tx); err != nil {
			t.Fatal(err)
		}
	}
	w := newWatcher(d)
	nothingRuns := map[string]*instanceLive{n1.UUID: {state: query.RSNormal, byID: map[string]*nodeapi.RunningInstance{}}}
	for round := 1; round <= 3; round++ {
		n, err := w.restartInstancesSeen(ctx, nothingRuns)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if round == 1 && n != 1 {
			t.Fatalf("round 1 submitted %d restarts, want 1 (plain's)", n)
		}
		for _, name := range []string{"rescued", "rescued-down"} {
			st := d.cfg.InstanceStatus(name)
			if !cmdlib.InRescue(st) || st.State != cmdlib.StateRescue || len(st.Conditions) != 1 || st.LastError != "" {
				t.Fatalf("round %d: %s's status %+v, want its rescue status alone", round, name, st)
			}
		}
		if _, ok := d.cfg.InstanceStatus("plain").Condition("Running"); !ok {
			t.Fatalf("round %d: plain's status does not record its restart: %+v", round, d.cfg.InstanceStatus("plain"))
		}
	}
	rows, err := d.queue.Query(ctx, nil, []string{"id", "ops"})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		b, _ := json.Marshal(r[1])
		if strings.Contains(string(b), `"instance_name":"rescued`) {
			t.Errorf("a job for a rescued instance: %s", b)
		}
	}
	if w.tries[mustInstanceUUID(t, d, "rescued")] != 0 {
		t.Error("the rescued instance counts restart tries")
	}
}

func mustInstanceUUID(t *testing.T, d *Daemon, name string) string {
	t.Helper()
	inst, ok := d.cfg.Instance(name)
	if !ok {
		t.Fatalf("no instance %s", name)
	}
	return inst.UUID
}
