package etcdstore

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func TestSlogCore(t *testing.T) {
	tests := []struct {
		name  string
		level slog.Level
		log   func(*zap.Logger)
		want  []string // parts of the one line written; nil = nothing written
	}{
		{"warn with fields", slog.LevelDebug, func(l *zap.Logger) {
			l.With(zap.String("target", "etcd-endpoints://x")).Warn("retrying of unary invoker failed", zap.Int("attempt", 0), zap.Error(errors.New("boom")))
		}, []string{"level=WARN", `msg="retrying of unary invoker failed"`, "logger=etcd-client", "target=etcd-endpoints://x", "attempt=0", "error=boom"}},
		{"info becomes debug", slog.LevelDebug, func(l *zap.Logger) { l.Info("opened snapshot stream") },
			[]string{"level=DEBUG", `msg="opened snapshot stream"`}},
		{"info filtered at info", slog.LevelInfo, func(l *zap.Logger) { l.Info("opened snapshot stream") }, nil},
		{"error kept at warn", slog.LevelWarn, func(l *zap.Logger) { l.Error("lost", zap.Strings("eps", []string{"a", "b"})) },
			[]string{"level=ERROR", "msg=lost", `eps="[a b]"`}},
		{"debug filtered at warn", slog.LevelWarn, func(l *zap.Logger) { l.Debug("noise") }, nil},
	}
	for _, tc := range tests {
		var buf bytes.Buffer
		h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level})
		tc.log(zap.New(newSlogCore(h)).Named("etcd-client"))
		out := buf.String()
		if tc.want == nil {
			if out != "" {
				t.Errorf("%s: wrote %q, want nothing", tc.name, out)
			}
			continue
		}
		if strings.Count(out, "\n") != 1 {
			t.Errorf("%s: %q, want one line", tc.name, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: %q lacks %q", tc.name, out, w)
			}
		}
	}
}
