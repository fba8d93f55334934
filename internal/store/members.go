package store

import "errors"

// Errors of the membership API of a replicated backend that callers act
// on; the backend wraps its client's errors in these, so that callers need
// not link that client.
var (
	// ErrLearnerNotReady: the learner has not caught up with the leader's
	// log yet; promoting it again later succeeds.
	ErrLearnerNotReady = errors.New("etcd learner is not in sync with the leader yet")
	// ErrMemberNotFound: no member with that id (already removed).
	ErrMemberNotFound = errors.New("etcd member not found")
	// ErrReconfigUnsafe: etcd refused a membership change because the
	// members left would not have been connected long enough to be sure
	// of a quorum (it checks for a few seconds after any change); the
	// same change succeeds later if the cluster is healthy.
	ErrReconfigUnsafe = errors.New("etcd refused the membership change for now: the cluster is not known healthy")
)
