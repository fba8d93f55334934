package baremetal

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/corral/corral/internal/baremetal/states"
	"github.com/corral/corral/internal/confdb"
	"github.com/corral/corral/internal/config"
	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/machinewire"
)

// HeartbeatTimeout is the heartbeat_timeout the lookup gives the agent:
// it heartbeats well within it.
const HeartbeatTimeout = 300

// maskedToken is what a lookup answers once the token was given out.
const maskedToken = "******"

// errNotFound is the lookup's answer for an unknown machine and for one
// not in a state where its agent may look it up, on purpose the same.
func errNotFound() error { return ecode.Errorf(ecode.NoEnt, "Resource could not be found.") }

// newAgentToken makes the token of one boot of the agent.
func newAgentToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making an agent token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Lookup answers an agent looking up its machine by MAC or uuid, only
// while the machine runs the agent's ramdisk for an action. The first
// lookup of a boot gets the token in clear; later ones get it masked.
func (d *Deps) Lookup(ctx context.Context, a machinewire.LookupArgs) (*machinewire.LookupReply, error) {
	m := d.lookupMachine(a)
	if m == nil || !states.LookupAllowed(states.State(m.ProvisionState)) {
		return nil, errNotFound()
	}
	for attempt := 0; ; attempt++ {
		rec, rev, err := d.Cfg.AgentRecord(ctx, m.UUID)
		if err != nil {
			return nil, err
		}
		if rec == nil {
			return nil, errNotFound()
		}
		reply := &machinewire.LookupReply{Machine: m, Token: maskedToken, HeartbeatTimeout: HeartbeatTimeout}
		if rec.Issued {
			return reply, nil
		}
		rec.Issued = true
		tx := d.Cfg.Begin()
		tx.UpdateAgentRecord(*rec, rev)
		err = d.Cfg.Commit(ctx, tx)
		if errors.Is(err, confdb.ErrConflict) && attempt < 3 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("recording the agent's lookup: %w", err)
		}
		reply.Token = rec.Token
		return reply, nil
	}
}

func (d *Deps) lookupMachine(a machinewire.LookupArgs) *config.Machine {
	if a.UUID != "" {
		m, _ := d.Cfg.Machine(a.UUID)
		return m
	}
	for _, mac := range a.Addresses {
		if p, ok := d.Cfg.PortByMAC(strings.TrimSpace(mac)); ok {
			if m, ok := d.Cfg.Machine(p.Machine); ok {
				return m
			}
		}
	}
	return nil
}

// Heartbeat records an agent's heartbeat, checked against the token of
// the boot, and wakes the job waiting for the agent.
func (d *Deps) Heartbeat(ctx context.Context, a machinewire.HeartbeatArgs) error {
	m, ok := d.Cfg.Machine(a.Machine)
	if !ok {
		return ecode.Errorf(ecode.NoEnt, "Node %s could not be found.", a.Machine)
	}
	if a.Token == "" {
		return ecode.Errorf(ecode.Inval, "Agent token is required for heartbeat processing.")
	}
	switch a.AgentStatus {
	case "", "start", "end", "error":
	default:
		return ecode.Errorf(ecode.Inval, "Unknown agent status %s.", a.AgentStatus)
	}
	for attempt := 0; ; attempt++ {
		rec, rev, err := d.Cfg.AgentRecord(ctx, m.UUID)
		if err != nil {
			return err
		}
		if rec == nil || subtle.ConstantTimeCompare([]byte(rec.Token), []byte(a.Token)) != 1 {
			return ecode.Errorf(ecode.Inval, "Invalid or missing agent token received.")
		}
		if rec.URL != "" && a.CallbackURL != rec.URL {
			return ecode.Errorf(ecode.Inval, "Agent callback URL changed from %s to %s within one boot.", rec.URL, a.CallbackURL)
		}
		rec.URL, rec.Version, rec.Status, rec.StatusMessage = a.CallbackURL, a.AgentVersion, a.AgentStatus, a.StatusMessage
		rec.LastHeartbeat = float64(d.now().UnixMicro()) / 1e6
		rec.Heartbeats++
		tx := d.Cfg.Begin()
		tx.UpdateAgentRecord(*rec, rev)
		err = d.Cfg.Commit(ctx, tx)
		if errors.Is(err, confdb.ErrConflict) && attempt < 3 {
			continue
		}
		if err != nil {
			return fmt.Errorf("recording the agent's heartbeat: %w", err)
		}
		break
	}
	if d.Notify != nil {
		return d.Notify(AgentEvent(m.UUID))
	}
	return nil
}
