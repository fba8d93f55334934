package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	s := Secret("hunter2")
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "pw", s)
	j, _ := json.Marshal(struct{ P Secret }{s})
	out := strings.Join([]string{fmt.Sprint(s), fmt.Sprintf("%v %s %+v %#v %q", s, s, s, s, s), buf.String(), string(j)}, "|")
	if strings.Contains(out, "hunter2") {
		t.Fatalf("secret leaked: %s", out)
	}
	if s.Reveal() != "hunter2" {
		t.Fatal("Reveal lost the value")
	}
}
