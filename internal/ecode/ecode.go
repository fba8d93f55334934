// Package ecode defines the error classes Corral carries on the wire. They are
// Ganeti's ECODE_* values, so RAPI and LUXI clients written for Ganeti can
// classify our errors. Exit codes and HTTP statuses derive from the class here,
// in one place, never from message text.
package ecode

import (
	"errors"
	"fmt"
	"net/http"
)

// Class is a Ganeti error classification (the second argument of OpPrereqError).
type Class string

const (
	Resolver  Class = "resolver_error"              // ECODE_RESOLVER
	NoRes     Class = "insufficient_resources"      // ECODE_NORES
	TempNoRes Class = "temp_insufficient_resources" // ECODE_TEMP_NORES
	Inval     Class = "wrong_input"                 // ECODE_INVAL
	State     Class = "wrong_state"                 // ECODE_STATE
	NoEnt     Class = "unknown_entity"              // ECODE_NOENT
	Exists    Class = "already_exists"              // ECODE_EXISTS
	NotUnique Class = "resource_not_unique"         // ECODE_NOTUNIQUE
	Fault     Class = "internal_error"              // ECODE_FAULT
	Environ   Class = "environment_error"           // ECODE_ENVIRON
	// Quota is Corral's own class (Ganeti has none): a project reached
	// the hard limit of a resource, which the Container Infra API
	// answers with 403 as Magnum's ResourceLimitExceeded.
	Quota Class = "quota_exceeded"
)

// Kind is the Ganeti exception class name used when an error is encoded as
// [Kind, [args...]] in job results and LUXI replies.
type Kind string

const (
	OpPrereqError     Kind = "OpPrereqError"
	OpExecError       Kind = "OpExecError"
	OpCodeUnknown     Kind = "OpCodeUnknown"
	JobLost           Kind = "JobLost"
	JobQueueDrainErr  Kind = "JobQueueDrainError"
	JobQueueFull      Kind = "JobQueueFull"
	ProgrammerError   Kind = "ProgrammerError"
	LuxiError         Kind = "LuxiError"
	ParameterError    Kind = "ParameterError"
	GenericError      Kind = "GenericError"
	OpResultError     Kind = "OpResultError"
	HypervisorError   Kind = "HypervisorError"
	QuitGanetiError   Kind = "QuitGanetiException"
	PermissionDenied  Kind = "PermissionError"
	ConfigurationErr  Kind = "ConfigurationError"
	UnitParseError    Kind = "UnitParseError"
	TypeEnforcement   Kind = "TypeEnforcementError"
	BlockDeviceError  Kind = "BlockDeviceError"
	RemoteError       Kind = "RemoteError"
	CommandError      Kind = "CommandError"
	JobFileCorrupted  Kind = "JobFileCorrupted"
	OpRetryNotAllowed Kind = "OpRetryNotAllowedError"
)

// Error is a classified error. Msg must never contain secrets.
type Error struct {
	Kind  Kind
	Class Class
	Msg   string
	Err   error // optional wrapped cause, not sent on the wire
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// Encode returns Ganeti's wire form: [Kind, [msg, class]] for OpPrereqError,
// [Kind, [msg]] otherwise.
func (e *Error) Encode() []any {
	if e.Kind == OpPrereqError && e.Class != "" {
		return []any{string(e.Kind), []any{e.Msg, string(e.Class)}}
	}
	return []any{string(e.Kind), []any{e.Msg}}
}

// Errorf makes an OpPrereqError of the given class: the kind Ganeti uses for
// input and state checks done before anything changes.
func Errorf(c Class, format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: OpPrereqError, Class: c, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// ExecErrorf makes an OpExecError: a failure while the change was being made.
func ExecErrorf(format string, args ...any) *Error {
	err := fmt.Errorf(format, args...)
	return &Error{Kind: OpExecError, Class: Fault, Msg: err.Error(), Err: errors.Unwrap(err)}
}

// New makes an error of an arbitrary kind and class.
func New(k Kind, c Class, msg string) *Error { return &Error{Kind: k, Class: c, Msg: msg} }

// As extracts the classified error from err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// ClassOf returns err's class, Fault when it has none.
func ClassOf(err error) Class {
	if e, ok := As(err); ok && e.Class != "" {
		return e.Class
	}
	return Fault
}

// Wrap converts any error into a classified one, keeping an existing class.
func Wrap(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := As(err); ok {
		return e
	}
	return &Error{Kind: OpExecError, Class: Fault, Msg: err.Error(), Err: err}
}

// Decode parses Ganeti's wire form [Kind, [args...]] back into an Error.
func Decode(v any) *Error {
	l, ok := v.([]any)
	if !ok || len(l) != 2 {
		return &Error{Kind: GenericError, Class: Fault, Msg: fmt.Sprint(v)}
	}
	kind, _ := l[0].(string)
	e := &Error{Kind: Kind(kind), Class: Fault}
	switch args := l[1].(type) {
	case []any:
		if len(args) > 0 {
			e.Msg = fmt.Sprint(args[0])
		}
		if len(args) > 1 {
			if c, ok := args[1].(string); ok {
				e.Class = Class(c)
			}
		}
	default:
		e.Msg = fmt.Sprint(args)
	}
	switch e.Kind {
	case JobLost:
		e.Class = NoEnt
	case JobQueueFull, JobQueueDrainErr:
		e.Class = TempNoRes
	}
	return e
}

// ExitCode maps a class to the CLI's exit status.
func ExitCode(c Class) int {
	switch c {
	case Inval:
		return 2
	case NoEnt:
		return 3
	case Exists, NotUnique:
		return 4
	case State:
		return 5
	case NoRes, TempNoRes, Quota:
		return 6
	case Environ, Resolver:
		return 7
	default:
		return 1
	}
}

// HTTPStatus maps an error to the RAPI status code.
func HTTPStatus(err error) int {
	e, ok := As(err)
	if !ok {
		return http.StatusInternalServerError
	}
	switch e.Kind {
	case JobLost:
		return http.StatusNotFound
	case JobQueueFull, JobQueueDrainErr:
		return http.StatusServiceUnavailable
	case PermissionDenied:
		return http.StatusForbidden
	}
	switch e.Class {
	case Quota:
		return http.StatusForbidden
	case Inval:
		return http.StatusBadRequest
	case NoEnt:
		return http.StatusNotFound
	case Exists, NotUnique, State:
		return http.StatusConflict
	case NoRes, TempNoRes:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}
