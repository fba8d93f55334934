package rapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/corral/corral/internal/luxi"
	"github.com/corral/corral/internal/pair"
)

// PairPath is Corral's pairing resource: a cluster joining with a pairing
// token posts its request here, and corral-rapi relays it to corrald. It
// takes no RAPI user (the joining cluster has none): the token's secret,
// which only corrald can check, authenticates the request, and the answer
// is sealed for the joiner, so corral-rapi carries what it cannot read.
const PairPath = "/corral/pair"

// maxPairBody bounds a pairing request (a public key, a proof and the
// joining cluster's name, address and CA).
const maxPairBody = 64 << 10

// pairRedeemer is the Backend's optional pairing relay.
type pairRedeemer interface {
	PairRedeem(ctx context.Context, req pair.Request) (*pair.Reply, error)
}

// PairRedeem implements pairRedeemer over LUXI.
func (b *LuxiBackend) PairRedeem(ctx context.Context, req pair.Request) (reply *pair.Reply, err error) {
	err = b.with(ctx, func(c *luxi.Client) error { reply, err = c.PairRedeem(ctx, req); return err })
	return reply, err
}

func (h *Handler) servePair(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		h.writeError(w, errf(http.StatusNotImplemented, "Method %s is unsupported for path %s", r.Method, PairPath))
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.EqualFold(strings.TrimSpace(ct), "application/json") {
		h.writeError(w, errf(http.StatusUnsupportedMediaType, "Unsupported Content-Type %q, expected application/json", ct))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPairBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.writeError(w, errf(http.StatusRequestEntityTooLarge, "Request body too large (limit %d bytes)", maxPairBody))
			return
		}
		h.writeError(w, errf(http.StatusBadRequest, "Reading request body: %v", err))
		return
	}
	var req pair.Request
	if err := json.Unmarshal(data, &req); err != nil {
		h.writeError(w, errf(http.StatusBadRequest, "Unable to parse the pairing request"))
		return
	}
	be, ok := h.be.(pairRedeemer)
	if !ok {
		h.writeError(w, errf(http.StatusNotImplemented, "Not implemented in this server: pairing"))
		return
	}
	reply, err := be.PairRedeem(r.Context(), req)
	if err != nil {
		h.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}
