package platform

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"

	"herald/internal/split"
	"herald/outbox"
)

// Console is the console: platform. It prints each message to a writer
// (stdout in production) as one block,
//
//	[console] chat=<chat_id> msg=<obligation id>: <text>
//
// with the text as is (it may span lines) and a final newline. It is the
// zero-config default, named DefaultName. It has no length limit and no
// idempotency key: a redelivered copy prints again, marked.
type Console struct {
	// mu makes each block one uninterrupted write, so concurrent sends
	// never interleave their lines.
	mu sync.Mutex
	w  io.Writer
}

// NewConsole returns a Console printing to w.
func NewConsole(w io.Writer) *Console { return &Console{w: w} }

// Send prints m and returns "console-<obligation id>". A write that failed
// before any byte went out is retryable; one that failed part-way is
// ambiguous, since part of the message is already on screen.
func (c *Console) Send(ctx context.Context, m outbox.Outgoing) (string, error) {
	where := fmt.Sprintf("send to console chat %q", m.ChatID)
	if err := ctx.Err(); err != nil {
		return "", sendErr(outbox.ClassRetryable, where, "not sent: %w", err)
	}
	block := fmt.Appendf(nil, "[console] chat=%s msg=%d: %s\n", m.ChatID, m.ObligationID, m.Text)
	c.mu.Lock()
	n, err := c.w.Write(block)
	c.mu.Unlock()
	if err == nil && n < len(block) {
		err = io.ErrShortWrite
	}
	switch {
	case err != nil && n == 0:
		return "", sendErr(outbox.ClassRetryable, where, "write: %w", err)
	case err != nil:
		return "", sendErr(outbox.ClassAmbiguous, where, "write (%d of %d bytes written): %w", n, len(block), err)
	}
	return "console-" + strconv.FormatInt(m.ObligationID, 10), nil
}

// Limit is no limit (Max 0): a terminal takes any length.
func (c *Console) Limit() split.Limit { return split.Limit{} }
