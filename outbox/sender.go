package outbox

import (
	"context"

	"herald/internal/split"
)

// Marker is the visible prefix on every copy that may repeat an earlier one
// (SPEC §1, §4 step 3): a redelivery after a claim was lost, a retry after an
// ambiguous failure, any send after the first attempt.
const Marker = "[possible duplicate] "

// Outgoing is one send of one obligation, as a platform adapter receives it.
type Outgoing struct {
	// ObligationID is the ledger row being delivered.
	ObligationID int64
	// Platform is the configured platform name; ChatID the chat on it.
	Platform string
	ChatID   string
	// Text is what the chat will show, Marker included when Redelivery.
	Text string
	// DeliveryKey is the obligation's idempotency key for the platform
	// (Discord nonce, Standard Webhooks webhook-id, the fake's key): stable
	// across every attempt of this obligation, at most 24 characters.
	DeliveryKey string
	// Redelivery is true when this copy may repeat an earlier one; adapters
	// that have a header or field for it set it (webhooks, the fake).
	Redelivery bool
	// Part and Parts place this obligation in its message (0-based, count).
	Part, Parts int
}

// Sender delivers to one platform. Send returns the platform's message id,
// or an error: a *SendError says what the failure proves; any other error is
// taken as ClassAmbiguous. Send must honour ctx's deadline.
type Sender interface {
	Send(ctx context.Context, m Outgoing) (platformMessageID string, err error)
	// Limit is the platform's longest text per message, in its own unit;
	// Max 0 means no limit.
	Limit() split.Limit
}
