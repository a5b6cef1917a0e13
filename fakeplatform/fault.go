package fakeplatform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"
)

// FaultKind is what an armed fault does to the operation it matches.
type FaultKind string

const (
	// FaultTimeoutBeforeAccept never accepts and never answers: the request
	// is held until the client gives up, Release is called or the server
	// closes, and then the connection is dropped without a response.
	FaultTimeoutBeforeAccept FaultKind = "timeout_before_accept"
	// FaultAckLost accepts the operation (journal + fsync), then resets the
	// connection without a response: the client cannot know it landed. (A
	// request the fake rejects, e.g. an empty text, is not journalled, and
	// its connection is reset all the same.)
	FaultAckLost FaultKind = "ack_lost"
	// FaultRateLimit answers 429 with Retry-After; nothing is accepted.
	FaultRateLimit FaultKind = "rate_limit"
	// FaultServerError answers 500; nothing is accepted.
	FaultServerError FaultKind = "server_error"
	// FaultReset resets the connection (RST) before accepting anything.
	FaultReset FaultKind = "reset"
	// FaultHoldBeforeAccept waits (Hold, or until released), then processes
	// the operation normally — it is accepted even if the client has given
	// up meanwhile, like a slow platform that landed it.
	FaultHoldBeforeAccept FaultKind = "hold_before_accept"
	// FaultHoldAfterAccept accepts the operation (journal + fsync), waits
	// (Hold, or until released), then answers if the client is still there.
	FaultHoldAfterAccept FaultKind = "hold_after_accept"
	// FaultOverLength rejects with the over-length 400 whatever the text.
	FaultOverLength FaultKind = "over_length"
)

// AllFaultKinds returns every fault kind, in a stable order.
func AllFaultKinds() []FaultKind {
	return []FaultKind{
		FaultTimeoutBeforeAccept, FaultAckLost, FaultRateLimit, FaultServerError,
		FaultReset, FaultHoldBeforeAccept, FaultHoldAfterAccept, FaultOverLength,
	}
}

func (k FaultKind) valid() bool {
	for _, x := range AllFaultKinds() {
		if k == x {
			return true
		}
	}
	return false
}

// DefaultRetryAfter is a rate_limit fault's retry_after when none is given.
const DefaultRetryAfter = 1.0

// Fault is one programmed failure. It matches operations by Op, ChatID and
// Profile (an empty field matches anything) and affects the next Count
// matching operations. When several armed faults match, the oldest is used.
type Fault struct {
	// Op is send, edit, delete, or empty for any.
	Op Op
	// ChatID is the chat to match, or empty for any.
	ChatID string
	// Profile is the profile to match ("webhook" for the webhook
	// receiver), or empty for any.
	Profile string
	// Kind is what happens to a matching operation.
	Kind FaultKind
	// Count is how many matching operations the fault affects; 0 means 1.
	Count int
	// RetryAfter is a rate_limit fault's retry_after in seconds (may be
	// fractional); 0 means DefaultRetryAfter.
	RetryAfter float64
	// Hold is how long a hold_before_accept or hold_after_accept fault
	// waits, in real time; 0 waits until released.
	Hold time.Duration
}

// faultWire is Fault on the control API: hold as a Go duration string.
type faultWire struct {
	Op         Op        `json:"op"`
	ChatID     string    `json:"chat_id"`
	Profile    string    `json:"profile,omitempty"`
	Kind       FaultKind `json:"kind"`
	Count      int       `json:"count"`
	RetryAfter float64   `json:"retry_after,omitempty"`
	Hold       string    `json:"hold,omitempty"`
}

// UnmarshalJSON reads a fault as the control API takes it:
// {"op","chat_id","profile","kind","count","retry_after","hold":"250ms"}.
// Unknown fields are rejected, so a misspelt field does not silently arm a
// broader fault.
func (f *Fault) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var w faultWire
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("decode fault: %w", err)
	}
	var hold time.Duration
	if w.Hold != "" {
		d, err := time.ParseDuration(w.Hold)
		if err != nil {
			return fmt.Errorf("decode fault hold: %w", err)
		}
		hold = d
	}
	*f = Fault{Op: w.Op, ChatID: w.ChatID, Profile: w.Profile, Kind: w.Kind, Count: w.Count, RetryAfter: w.RetryAfter, Hold: hold}
	return nil
}

// MarshalJSON writes a fault in the control API's shape.
func (f Fault) MarshalJSON() ([]byte, error) { return json.Marshal(f.wire()) }

func (f Fault) wire() faultWire {
	w := faultWire{Op: f.Op, ChatID: f.ChatID, Profile: f.Profile, Kind: f.Kind, Count: f.Count, RetryAfter: f.RetryAfter}
	if f.Hold != 0 {
		w.Hold = f.Hold.String()
	}
	return w
}

// ErrInvalidFault is returned by AddFault for a fault it cannot arm.
var ErrInvalidFault = errors.New("invalid fault")

// normalize validates f and fills its defaults.
func (f Fault) normalize() (Fault, error) {
	switch {
	case !f.Kind.valid():
		return f, fmt.Errorf("%w: unknown kind %q", ErrInvalidFault, f.Kind)
	case f.Op != "" && !f.Op.valid():
		return f, fmt.Errorf("%w: unknown op %q (want send, edit, delete or empty)", ErrInvalidFault, f.Op)
	case f.Count < 0:
		return f, fmt.Errorf("%w: negative count %d", ErrInvalidFault, f.Count)
	case f.RetryAfter < 0 || math.IsNaN(f.RetryAfter) || math.IsInf(f.RetryAfter, 0):
		return f, fmt.Errorf("%w: retry_after %v", ErrInvalidFault, f.RetryAfter)
	case f.Hold < 0:
		return f, fmt.Errorf("%w: negative hold %v", ErrInvalidFault, f.Hold)
	}
	if f.Profile != "" && f.Profile != ProfileWebhook {
		if _, ok := LookupProfile(f.Profile); !ok {
			return f, fmt.Errorf("%w: unknown profile %q", ErrInvalidFault, f.Profile)
		}
	}
	if f.Count == 0 {
		f.Count = 1
	}
	if f.Kind == FaultRateLimit && f.RetryAfter == 0 {
		f.RetryAfter = DefaultRetryAfter
	}
	return f, nil
}

func (f Fault) matches(op Op, profile, chatID string) bool {
	return (f.Op == "" || f.Op == op) &&
		(f.ChatID == "" || f.ChatID == chatID) &&
		(f.Profile == "" || f.Profile == profile)
}

// ArmedFault is a fault waiting to fire, as AddFault armed it.
type ArmedFault struct {
	// ID is the id AddFault returned; ids increase in arming order.
	ID int64
	// Fault is the fault as armed (defaults filled in).
	Fault Fault
	// Remaining is how many more matching operations it will affect.
	Remaining int
}

// MarshalJSON writes the armed fault flat: the fault's fields plus "id"
// and "remaining".
func (a ArmedFault) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID int64 `json:"id"`
		faultWire
		Remaining int `json:"remaining"`
	}{a.ID, a.Fault.wire(), a.Remaining})
}
