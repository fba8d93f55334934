package confdb

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/corral/corral/internal/store"
)

const pfxAgent = Prefix + "agent/"

// AgentRecord is what the conductor and a machine's agent share during
// one boot of the agent's ramdisk: the token the agent proves itself
// with (given out once, at its first lookup) and what its heartbeats
// said. It lives in the store only, never in the machine (the API shows
// machines), and is dropped when the action that booted the agent ends.
type AgentRecord struct {
	Machine string `json:"machine"` // uuid
	Token   string `json:"token"`
	// Issued is set by the first lookup: later lookups get no token.
	Issued        bool    `json:"issued,omitempty"`
	URL           string  `json:"callback_url,omitempty"`
	Version       string  `json:"agent_version,omitempty"`
	Status        string  `json:"agent_status,omitempty"`
	StatusMessage string  `json:"agent_status_message,omitempty"`
	LastHeartbeat float64 `json:"last_heartbeat,omitempty"`
	Heartbeats    int     `json:"heartbeats,omitempty"`
}

var agentRecords = records[AgentRecord]{
	prefix: pfxAgent,
	key:    func(r AgentRecord) string { return r.Machine },
	what:   "the agent records",
}

// AgentRecord reads a machine's agent record and the store revision it
// was last written at; nil when it has none.
func (db *DB) AgentRecord(ctx context.Context, machine string) (*AgentRecord, int64, error) {
	kv, err := db.st.Get(ctx, pfxAgent+machine)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the agent record of %s: %w", machine, err)
	}
	if kv == nil {
		return nil, 0, nil
	}
	var r AgentRecord
	if err := json.Unmarshal(kv.Value, &r); err != nil {
		return nil, 0, fmt.Errorf("decoding the agent record of %s: %w", machine, err)
	}
	return &r, kv.ModRevision, nil
}

// UpdateAgentRecord writes a record read at revision rev, failing the
// commit (ErrConflict) if it changed since: two lookups racing for the
// token cannot both get it.
func (tx *Tx) UpdateAgentRecord(r AgentRecord, rev int64) {
	tx.cmp(store.ModRevisionIs(pfxAgent+r.Machine, rev))
	agentRecords.put(tx, r)
}

// PutAgentRecord writes a machine's agent record.
func (tx *Tx) PutAgentRecord(r AgentRecord) { agentRecords.put(tx, r) }

// DropAgentRecord removes a machine's agent record.
func (tx *Tx) DropAgentRecord(machine string) { agentRecords.drop(tx, AgentRecord{Machine: machine}) }
