package config

import (
	"reflect"
	"slices"
	"time"
)

// Status is what Corral observed about a long-lived object, kept apart
// from the object's configuration (its spec): the state it is in, the
// state it is meant to reach, the last error met on the way, and
// conditions, each a named fact with a reason, as Kubernetes' Cluster API
// keeps them. Writing a status does not bump the object's serial number
// and cannot conflict with a change of its configuration (confdb stores
// it under its own key), and it never appears in a field Ganeti defines.
type Status struct {
	State      string      `json:"state,omitempty"`  // observed, e.g. "running"
	Target     string      `json:"target,omitempty"` // wanted, e.g. the admin state "up"
	LastError  string      `json:"last_error,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"` // sorted by type
}

// Condition values.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// Condition is one fact about an object: Type names it ("Running"),
// Status is True, False or Unknown, Reason is one CamelCase word for
// programs ("RestartGaveUp"), Message is for the operator, and Time is
// when Status last changed (seconds since the epoch, like ctime).
type Condition struct {
	Type    string  `json:"type"`
	Status  string  `json:"status"`
	Reason  string  `json:"reason,omitempty"`
	Message string  `json:"message,omitempty"`
	Time    float64 `json:"last_transition_time"`
}

// Clone copies the status; nil stays nil.
func (s *Status) Clone() *Status {
	if s == nil {
		return nil
	}
	c := *s
	c.Conditions = slices.Clone(s.Conditions)
	return &c
}

// Empty reports whether the status says nothing.
func (s *Status) Empty() bool {
	return s == nil || (s.State == "" && s.Target == "" && s.LastError == "" && len(s.Conditions) == 0)
}

// Condition finds the condition of type typ.
func (s *Status) Condition(typ string) (Condition, bool) {
	if s == nil {
		return Condition{}, false
	}
	for _, c := range s.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// IsTrue reports whether the condition of type typ is there and True.
func (s *Status) IsTrue(typ string) bool {
	c, ok := s.Condition(typ)
	return ok && c.Status == ConditionTrue
}

// SetCondition adds c or replaces the condition of its type. Its time is
// now when its status changes (or it is new); a new reason or message
// alone keeps the time of the last transition. It reports whether
// anything changed, so callers write only real changes.
func (s *Status) SetCondition(c Condition, now time.Time) bool {
	i, found := slices.BinarySearchFunc(s.Conditions, c.Type, func(x Condition, t string) int {
		switch {
		case x.Type < t:
			return -1
		case x.Type > t:
			return 1
		}
		return 0
	})
	if !found {
		c.Time = float64(now.UnixMicro()) / 1e6
		s.Conditions = slices.Insert(s.Conditions, i, c)
		return true
	}
	old := s.Conditions[i]
	if old.Status == c.Status {
		c.Time = old.Time
	} else {
		c.Time = float64(now.UnixMicro()) / 1e6
	}
	if c == old {
		return false
	}
	s.Conditions[i] = c
	return true
}

// RemoveCondition drops the condition of type typ, reporting whether
// there was one.
func (s *Status) RemoveCondition(typ string) bool {
	n := len(s.Conditions)
	s.Conditions = slices.DeleteFunc(s.Conditions, func(c Condition) bool { return c.Type == typ })
	return len(s.Conditions) != n
}

// ChangeStatus applies change to a copy of cur (nil: no status yet) and
// reports whether the result differs, so that writers write only changes.
// An object with no status that would get an empty one gets none.
func ChangeStatus(cur *Status, change func(s *Status, now time.Time), now time.Time) (*Status, bool) {
	next := cur.Clone()
	if next == nil {
		next = &Status{}
	}
	change(next, now)
	if reflect.DeepEqual(cur, next) || (cur == nil && next.Empty()) {
		return nil, false
	}
	return next, true
}
