package outbox

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: no message or obligation with that id.
	ErrNotFound = errors.New("not found")
	// ErrConflict: an idempotency key reused with a different payload.
	ErrConflict = errors.New("idempotency key conflict")
	// ErrStaleFence: the row moved on since this claim (another owner
	// reclaimed it, or it was settled): the write was refused, nothing changed.
	ErrStaleFence = errors.New("stale fencing token")
	// ErrLeaseExpired: the claim's lease ran out before the send; the send was
	// not made, another owner may take the row.
	ErrLeaseExpired = errors.New("lease expired before send")
	// ErrInvalid: a message the ledger refuses to record (empty text, no
	// chat, a text that cannot be split under the platform's limit …).
	ErrInvalid = errors.New("invalid message")
)

// ErrorClass says what a failed send proves (PLATFORMS.md, "Consequences").
type ErrorClass string

const (
	// ClassRetryable: the send provably did not land (the connection was
	// never made); retry with backoff.
	ClassRetryable ErrorClass = "retryable"
	// ClassRateLimited: the platform said 429; retry no sooner than its
	// Retry-After, which is kept per chat in the ledger.
	ClassRateLimited ErrorClass = "rate_limited"
	// ClassPermanent: the platform refused the message for good (chat gone,
	// bot blocked, a validation 4xx); abandon it with the cause.
	ClassPermanent ErrorClass = "permanent"
	// ClassAmbiguous: the send may have landed (timeout after the request was
	// written, connection reset, 5xx); retry, and the next copy is marked.
	ClassAmbiguous ErrorClass = "ambiguous"
)

// AllErrorClasses returns every error class.
func AllErrorClasses() []ErrorClass {
	return []ErrorClass{ClassRetryable, ClassRateLimited, ClassPermanent, ClassAmbiguous}
}

// SendError is a classified send failure, as a platform adapter returns it.
type SendError struct {
	Class ErrorClass
	// RetryAfter is the platform's requested wait (for ClassRateLimited);
	// zero when it gave none.
	RetryAfter time.Duration
	// Global marks a rate limit on the whole platform, not one chat
	// (Discord's "global": true).
	Global bool
	Err    error
}

func (e *SendError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("%s (retry after %s): %v", e.Class, e.RetryAfter, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

func (e *SendError) Unwrap() error { return e.Err }

// Classify returns err's class: the class of a *SendError in its chain, or
// ClassAmbiguous for anything unclassified (never assume a send did not land).
func Classify(err error) *SendError {
	var se *SendError
	if errors.As(err, &se) {
		return se
	}
	return &SendError{Class: ClassAmbiguous, Err: err}
}
