package master

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/opcodes"
)

// checkRootOnly refuses a submission holding an opcode that acts as root
// on the nodes (opcodes.Def.RootOnly) unless the caller is root on this
// corrald's LUXI socket: not corral-rapi or another member of corral-admin,
// and not a call forwarded from a standby, whose caller is unknown here.
// Ops it cannot read are left to the queue's own checks.
func checkRootOnly(ctx context.Context, ops []json.RawMessage) error {
	peer := luxi.Peer(ctx)
	if peer.Known && peer.UID == 0 {
		return nil
	}
	for _, raw := range ops {
		var head struct {
			ID string `json:"OP_ID"`
		}
		if json.Unmarshal(raw, &head) != nil {
			continue
		}
		if rootOnlyOps()[head.ID] {
			who := "a caller whose user is unknown (a forwarded call)"
			if peer.Known {
				who = fmt.Sprintf("uid %d", peer.UID)
			}
			return ecode.New(ecode.PermissionDenied, ecode.Inval,
				fmt.Sprintf("%s runs as root on the nodes: only root on the master's LUXI socket may submit it, not %s", head.ID, who))
		}
	}
	return nil
}

// rootOnlyOps are the ids of the RootOnly opcodes.
var rootOnlyOps = sync.OnceValue(func() map[string]bool {
	out := map[string]bool{}
	for _, d := range opcodes.Defs() {
		if d.RootOnly {
			out[d.ID] = true
		}
	}
	return out
})
