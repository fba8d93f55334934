package cli

import (
	"strings"
)

// statusBlock prints an object's status (config.Status, as the master
// sends it) under the object's other fields:
//
//	Status: down (target up)
//	  Last error: restart job 12: ...
//	  Conditions:
//	    - Running: False (RestartGaveUp) since 2026-01-02 03:04:05: did not stay up ...
//
// Nothing is printed for an absent or empty status.
func (f *formatter) statusBlock(b *strings.Builder, indent string, v any) {
	m, _ := v.(map[string]any)
	if len(m) == 0 {
		return
	}
	text := func(k string, from map[string]any) string { s, _ := from[k].(string); return s }
	head := "Status:"
	if s := text("state", m); s != "" {
		head += " " + s
	}
	if t := text("target", m); t != "" {
		head += " (target " + t + ")"
	}
	line(b, indent, head)
	if e := text("last_error", m); e != "" {
		line(b, indent+"  ", "Last error: "+e)
	}
	conds, _ := m["conditions"].([]any)
	if len(conds) == 0 {
		return
	}
	line(b, indent+"  ", "Conditions:")
	for _, c := range conds {
		cm, _ := c.(map[string]any)
		s := "- " + text("type", cm) + ": " + text("status", cm)
		if r := text("reason", cm); r != "" {
			s += " (" + r + ")"
		}
		if t, ok := cm["last_transition_time"].(float64); ok && t > 0 {
			s += " since " + f.time(t)
		}
		if msg := text("message", cm); msg != "" {
			s += ": " + msg
		}
		line(b, indent+"    ", s)
	}
}
