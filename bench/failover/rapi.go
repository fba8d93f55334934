package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral/corral/internal/devcluster"
)

// rapiPoll is the pause between two GET /2/info of the probe.
const rapiPoll = 20 * time.Millisecond

// waitRecovered waits until RAPI answered after t0 following its first
// failure, or a second of answers passed without any failure.
func waitRecovered(p *devcluster.RAPIProbe, t0 time.Time, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		o := p.Since(t0)
		if o.Recovered() || (o.Failed == 0 && o.Calls > int(time.Second/rapiPoll)) {
			return nil
		}
		time.Sleep(rapiPoll)
	}
	return errors.New("RAPI did not answer again within a minute of the kill")
}

// moveOffRAPI hands the master role to another candidate when the master
// is the corrald corral-rapi talks to (the first one).
func moveOffRAPI(ctx context.Context, st *devcluster.State, bin string) error {
	lead, err := devcluster.WaitLeader(ctx, st, time.Minute)
	if err != nil {
		return err
	}
	cands := st.Candidates()
	if lead.Proc != cands[0].Proc {
		return nil
	}
	to := cands[1]
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "corral"), "cluster", "master-failover", "--to", to.Name)
	cmd.Env = append(os.Environ(), "CORRAL_SOCKET="+to.Socket, "CORRAL_STATE_DIR="+st.StateDir, "CORRAL_RUN_DIR="+st.RunDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("master-failover --to %s: %w: %s", to.Name, err, out)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l, err := devcluster.Leader(ctx, st); err == nil && l.Proc == to.Proc {
			return waitStandby(ctx, cands[0].Socket)
		}
	}
	return fmt.Errorf("%s did not take over", to.Name)
}

// logOffsets records the size of each corrald's log.
func logOffsets(st *devcluster.State) map[string]int64 {
	offs := map[string]int64{}
	for _, p := range st.Procs {
		if fi, err := os.Stat(p.Log); err == nil && strings.HasPrefix(p.Name, "corrald") {
			offs[p.Name] = fi.Size()
		}
	}
	return offs
}

// elections counts "elected master" lines the candidates other than
// frozen logged since offs.
func elections(st *devcluster.State, offs map[string]int64, frozen string) int {
	n := 0
	for _, p := range st.Procs {
		off, ok := offs[p.Name]
		if !ok || p.Name == frozen {
			continue
		}
		b, err := os.ReadFile(p.Log)
		if err != nil || int64(len(b)) < off {
			continue
		}
		n += strings.Count(string(b[off:]), "elected master")
	}
	return n
}
