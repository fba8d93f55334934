package luxi

import (
	"context"

	"github.com/corral/corral/internal/pair"
)

// MethodPairRedeem (Corral only) answers a cluster that joins with a
// pairing token: corral-rapi relays the joiner's request and the sealed
// reply.
const MethodPairRedeem = "PairRedeem"

// PairRedeem relays a pairing request to corrald.
func (c *Client) PairRedeem(ctx context.Context, req pair.Request) (*pair.Reply, error) {
	var r pair.Reply
	if err := c.Call(ctx, MethodPairRedeem, []any{req}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
