package rapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral/corral/internal/ecode"
	"github.com/corral/corral/internal/pair"
)

// pairFake is a backend that relays pairing requests.
type pairFake struct {
	*fakeBackend
	got []pair.Request
	err error
}

func (p *pairFake) PairRedeem(_ context.Context, req pair.Request) (*pair.Reply, error) {
	p.got = append(p.got, req)
	if p.err != nil {
		return nil, p.err
	}
	return &pair.Reply{Pub: []byte{1}, Box: []byte{2}, Inviter: pair.Peer{Cluster: "a"}}, nil
}

func TestPairRelay(t *testing.T) {
	be := &pairFake{fakeBackend: newFakeBackend()}
	h := NewHandler(Config{Backend: be, Users: ParseUsers([]byte(testUsers)), RequireAuth: true})
	post := func(method, ct, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, PairPath, strings.NewReader(body))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	// No RAPI user, even with authentication required: the token is the
	// credential, and corrald checks it.
	w := post(http.MethodPost, "application/json", `{"id":"0123456789abcdef","pub":"AQ==","proof":"x","joiner":{"cluster":"b"}}`)
	if w.Code != http.StatusOK {
		t.Fatalf("relay: %d %s", w.Code, w.Body)
	}
	var reply pair.Reply
	if err := json.Unmarshal(w.Body.Bytes(), &reply); err != nil || reply.Inviter.Cluster != "a" {
		t.Fatalf("reply %s: %v", w.Body, err)
	}
	if len(be.got) != 1 || be.got[0].ID != "0123456789abcdef" || be.got[0].Joiner.Cluster != "b" {
		t.Fatalf("relayed %+v", be.got)
	}
	for _, c := range []struct {
		method, ct, body string
		code             int
	}{
		{http.MethodGet, "", "", http.StatusNotImplemented},
		{http.MethodPost, "text/plain", "{}", http.StatusUnsupportedMediaType},
		{http.MethodPost, "application/json", "{", http.StatusBadRequest},
		{http.MethodPost, "application/json", `{"id":"` + strings.Repeat("a", maxPairBody) + `"}`, http.StatusRequestEntityTooLarge},
	} {
		if w := post(c.method, c.ct, c.body); w.Code != c.code {
			t.Errorf("%s %s %.20q: %d, want %d", c.method, c.ct, c.body, w.Code, c.code)
		}
	}
	if len(be.got) != 1 {
		t.Fatalf("refused requests reached corrald: %d", len(be.got))
	}
	be.err = ecode.Errorf(ecode.Inval, "pair: the request does not match the invitation")
	if w := post(http.MethodPost, "application/json", `{}`); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "does not match") {
		t.Fatalf("refusal: %d %s", w.Code, w.Body)
	}
	// A backend without the relay answers 501.
	h2 := NewHandler(Config{Backend: newFakeBackend()})
	r := httptest.NewRequest(http.MethodPost, PairPath, strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	w = httptest.NewRecorder()
	h2.ServeHTTP(w, r)
	if w.Code != http.StatusNotImplemented {
		t.Fatalf("no relay: %d", w.Code)
	}
}
