package etcdproc

import (
	"net/http"
	"strings"
	"testing"
)

func TestParseHealth(t *testing.T) {
	tests := []struct {
		status int
		body   string
		want   string // "" = healthy, else a part of the error
	}{
		{200, `{"health":"true"}`, ""},
		{200, `{"health":"true","reason":""}`, ""},
		{503, `{"health":"false","reason":"RAFT NO LEADER"}`, "RAFT NO LEADER"},
		{200, `{"health":"false"}`, `healthy "false"`},
		{503, `{"health":"true"}`, "HTTP 503"},
		{200, `{}`, `healthy ""`},
		{200, `not json`, "unreadable"},
		{200, ``, "unreadable"},
		{404, `404 page not found`, "HTTP 404"},
	}
	for _, tc := range tests {
		err := parseHealth(tc.status, []byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d %q: %v, want healthy", tc.status, tc.body, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d %q: %v, want an error mentioning %q", tc.status, tc.body, err, tc.want)
		}
	}
}

// FuzzParseHealth: any answer is either healthy or an error, never a panic,
// and only a 200 saying "true" is healthy.
func FuzzParseHealth(f *testing.F) {
	f.Add(200, []byte(`{"health":"true"}`))
	f.Add(503, []byte(`{"health":"false","reason":"ALARM NOSPACE"}`))
	f.Add(200, []byte(`{"health":true}`))
	f.Add(200, []byte(`[]`))
	f.Add(500, []byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		err := parseHealth(status, body)
		if err == nil && status != http.StatusOK {
			t.Fatalf("status %d judged healthy", status)
		}
	})
}
