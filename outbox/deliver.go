package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"herald/internal/clock"
	"herald/internal/faultpoint"
	"herald/internal/store"
)

// leaseMargin is how much of a lease must remain for a send to start: a send
// that could outlive its claim might race a reclaimer's marked copy with an
// unmarked one of ours.
func (l *Ledger) leaseMargin() time.Duration { return l.cfg.SendTimeout }

// Outcome is what one Deliver did.
type Outcome struct {
	// State the row was settled to (delivered, failed, abandoned); empty
	// when nothing was settled (the send was not made, or the fence was
	// stale).
	State State
	// Sent: the send was made (whatever its result).
	Sent bool
	// Err is the classified send error, if the send failed.
	Err *SendError
}

// Deliver carries out steps 3 and 4 of the protocol for one claim: send
// through s (with Marker and the redelivery flag when c.Redelivery), then
// settle the row with a CAS on the claim's fencing token. The fault points
// outbox.claimed / outbox.sent / outbox.settled (boot.claimed / boot.sent for
// boot claims) sit in their windows. Errors: ErrLeaseExpired (nothing sent),
// ErrStaleFence (another owner took the row; our result was discarded), store
// errors from settling, or an injected fault.
func (l *Ledger) Deliver(ctx context.Context, c Claim, s Sender) (Outcome, error) {
	claimed, sent := faultpoint.OutboxClaimed, faultpoint.OutboxSent
	if c.Boot {
		claimed, sent = faultpoint.BootClaimed, faultpoint.BootSent
	}
	if err := l.faults.Hit(ctx, claimed); err != nil {
		return Outcome{}, err
	}
	if remain := c.LeaseUntil.Sub(l.clk.Now()); remain < l.leaseMargin() {
		return Outcome{}, l.release(ctx, c, fmt.Errorf("%w: %s of lease left, need %s", ErrLeaseExpired, remain, l.leaseMargin()))
	}
	out := Outgoing{
		ObligationID: c.ID,
		Platform:     c.Platform,
		ChatID:       c.ChatID,
		Text:         c.Text,
		DeliveryKey:  c.DeliveryKey,
		Redelivery:   c.Redelivery,
		Part:         c.Part,
		Parts:        c.Parts,
	}
	if c.Redelivery {
		out.Text = Marker + c.Text
	}
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.SendTimeout)
	stop := context.AfterFunc(ctx, cancel) // a hard stop still ends the send
	pmid, sendErr := s.Send(sendCtx, out)
	stop()
	cancel()
	if err := l.faults.Hit(ctx, sent); err != nil {
		return Outcome{Sent: true}, err
	}
	var se *SendError
	if sendErr != nil {
		se = Classify(sendErr)
	}
	st, err := l.settle(ctx, c, pmid, se)
	oc := Outcome{State: st, Sent: true, Err: se}
	if err != nil {
		return oc, err
	}
	if err := l.faults.Hit(ctx, faultpoint.OutboxSettled); err != nil {
		return oc, err
	}
	return oc, nil
}

// settle moves the claimed row to its outcome with a CAS on (id,
// attempting, fencing token), retrying briefly while the store is busy: a
// lost settle costs a marked redelivery after the lease.
func (l *Ledger) settle(ctx context.Context, c Claim, pmid string, se *SendError) (State, error) {
	var st State
	var err error
	for try := 0; ; try++ {
		st, err = l.settleOnce(ctx, c, pmid, se)
		if err == nil || !errors.Is(err, store.ErrBusy) || try >= 5 || ctx.Err() != nil {
			break
		}
		if clock.Sleep(ctx, l.clk, time.Duration(try+1)*100*time.Millisecond) != nil {
			break
		}
	}
	return st, err
}

func (l *Ledger) settleOnce(ctx context.Context, c Claim, pmid string, se *SendError) (State, error) {
	var st State
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		now := store.FormatTime(tx.Now)
		var res interface{ RowsAffected() (int64, error) }
		var err error
		outcome, class, text, ambiguous := "delivered", "", "", 0
		if se == nil {
			st = StateDelivered
			res, err = tx.ExecContext(ctx, `UPDATE obligations
				SET state = 'delivered', platform_message_id = ?, owner = NULL, lease_until = NULL,
				    error_class = NULL, error = NULL, updated_at = ?
				WHERE id = ? AND state = 'attempting' AND fencing_token = ?`,
				pmid, now, c.ID, c.FencingToken)
		} else {
			var next time.Time
			st, next, text = l.afterFailure(tx.Now, c, se)
			outcome, class = string(st), string(se.Class)
			if se.Class == ClassAmbiguous {
				ambiguous = 1
			}
			res, err = tx.ExecContext(ctx, `UPDATE obligations
				SET state = ?, next_attempt_at = ?, error_class = ?, error = ?, owner = NULL,
				    lease_until = NULL, ambiguous = ambiguous + ?, updated_at = ?
				WHERE id = ? AND state = 'attempting' AND fencing_token = ?`,
				string(st), store.FormatTime(next), class, text, ambiguous, now, c.ID, c.FencingToken)
			if err == nil && se.Class == ClassRateLimited {
				err = l.holdChat(ctx, tx, c, se, next)
			}
		}
		if err != nil {
			return fmt.Errorf("settle obligation %d: %w", c.ID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("settle obligation %d: %w", c.ID, err)
		} else if n == 0 {
			return fmt.Errorf("settle obligation %d (fencing token %d): %w", c.ID, c.FencingToken, ErrStaleFence)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO attempts
			(obligation_id, attempt, fencing_token, owner, outcome, error_class, error, redelivery, at)
			VALUES (?, ?, ?, ?, ?, NULLIF(?, ''), NULLIF(?, ''), ?, ?)`,
			c.ID, c.Attempts, c.FencingToken, l.cfg.Owner, outcome, class, text, c.Redelivery, now)
		if err != nil {
			return fmt.Errorf("record attempt of obligation %d: %w", c.ID, err)
		}
		return nil
	})
	return st, err
}

// afterFailure decides where a failed attempt leaves its row: abandoned for
// a permanent error, an exhausted attempt budget or the age limit; otherwise
// failed, to be tried again at the returned instant (the platform's
// Retry-After for a rate limit, else exponential backoff with jitter).
func (l *Ledger) afterFailure(now time.Time, c Claim, se *SendError) (State, time.Time, string) {
	msg := se.Error()
	switch {
	case se.Class == ClassPermanent:
		return StateAbandoned, now, "permanent platform error: " + msg
	case c.Attempts >= l.cfg.MaxAttempts:
		return StateAbandoned, now, fmt.Sprintf("attempt budget of %d exhausted; last error: %s", l.cfg.MaxAttempts, msg)
	case now.Sub(c.CreatedAt) >= l.cfg.MaxAge:
		return StateAbandoned, now, fmt.Sprintf("age limit of %s exceeded; last error: %s", l.cfg.MaxAge, msg)
	}
	wait := l.jitter(l.Backoff(c.Attempts))
	if se.Class == ClassRateLimited && se.RetryAfter > 0 {
		wait = se.RetryAfter
	}
	return StateFailed, now.Add(wait), msg
}

// holdChat records a platform's rate limit so that every process and every
// restart waits it out before sending to that chat (or, for a global limit,
// to that platform) again.
func (l *Ledger) holdChat(ctx context.Context, tx *store.Tx, c Claim, se *SendError, until time.Time) error {
	chat := c.ChatID
	if se.Global {
		chat = ""
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO chat_holds (platform, chat_id, not_before, reason) VALUES (?, ?, ?, ?)
		ON CONFLICT (platform, chat_id) DO UPDATE SET not_before = max(not_before, excluded.not_before), reason = excluded.reason`,
		c.Platform, chat, store.FormatTime(until), se.Error())
	if err != nil {
		return fmt.Errorf("hold chat %s/%s: %w", c.Platform, chat, err)
	}
	return nil
}

// release gives a claim back without sending: the row returns to failed,
// due at once, so the next claim (ours or another's) takes it — marked, since
// it has been attempted. It returns cause (or the store's error).
func (l *Ledger) release(ctx context.Context, c Claim, cause error) error {
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		now := store.FormatTime(tx.Now)
		_, err := tx.ExecContext(ctx, `UPDATE obligations
			SET state = 'failed', next_attempt_at = ?, error_class = ?, error = ?, owner = NULL,
			    lease_until = NULL, updated_at = ?
			WHERE id = ? AND state = 'attempting' AND fencing_token = ?`,
			now, string(ClassRetryable), "claim released unsent: "+cause.Error(), now, c.ID, c.FencingToken)
		return err
	})
	if err != nil {
		return errors.Join(cause, fmt.Errorf("release obligation %d: %w", c.ID, err))
	}
	return cause
}
