package outbox

import (
	"context"
	"fmt"
	"sync"

	"herald/internal/store"
)

// BootReport is what a boot sweep did.
type BootReport struct {
	// Claimed rows (orphaned attempting rows and due failed rows).
	Claimed int
	// Delivered, Failed and Abandoned count the settled outcomes.
	Delivered, Failed, Abandoned int
	// Unsettled counts claims whose outcome could not be written (a stale
	// fence: another sweeper or worker took the row; a store error).
	Unsettled int
}

// BootSweep recovers what earlier processes left behind before this one
// serves: rows attempting for a dead owner or past their lease, and failed
// rows now due, are claimed (each one a CAS — of several sweepers exactly one
// wins a row) and redelivered marked, concurrency at a time, until nothing is
// left to claim or rounds run out. Fault points: boot.claimed, boot.sent.
func (l *Ledger) BootSweep(ctx context.Context, senders Senders, concurrency int) (BootReport, error) {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	known := func(p string) bool { _, ok := senders(p); return ok }
	var rep BootReport
	const rounds = 8 // a row that fails again waits for its backoff: the worker finishes it
	for r := 0; r < rounds; r++ {
		claims, err := l.claim(ctx, concurrency, claimOrphans, known)
		if err != nil {
			return rep, fmt.Errorf("boot sweep: %w", err)
		}
		if len(claims) == 0 {
			break
		}
		rep.Claimed += len(claims)
		var mu sync.Mutex
		var wg sync.WaitGroup
		var firstErr error
		for _, c := range claims {
			s, _ := senders(c.Platform)
			wg.Add(1)
			go func() {
				defer wg.Done()
				oc, err := l.Deliver(ctx, c, s)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					rep.Unsettled++
					l.log.Warn("boot redelivery not settled", "obligation", c.ID, "err", err)
					if firstErr == nil && ctx.Err() != nil {
						firstErr = ctx.Err()
					}
				case oc.State == StateDelivered:
					rep.Delivered++
				case oc.State == StateAbandoned:
					rep.Abandoned++
				default:
					rep.Failed++
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return rep, fmt.Errorf("boot sweep: %w", firstErr)
		}
	}
	return rep, nil
}

// AbandonExpired abandons pending and failed obligations recorded longer ago
// than the age limit, and returns how many it abandoned.
func (l *Ledger) AbandonExpired(ctx context.Context) (int64, error) {
	var n int64
	err := l.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE obligations
			SET state = 'abandoned', error = ? || coalesce('; last error: ' || error, ''),
			    owner = NULL, lease_until = NULL, updated_at = ?
			WHERE state IN ('pending', 'failed') AND created_at < ?`,
			fmt.Sprintf("age limit of %s exceeded before delivery", l.cfg.MaxAge),
			store.FormatTime(tx.Now), store.FormatTime(tx.Now.Add(-l.cfg.MaxAge)))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("abandon expired obligations: %w", err)
	}
	return n, nil
}

// Prune deletes messages whose every part is terminal and older than the
// retention (with their obligations and attempt history), in batches, and
// expired chat holds. It returns how many messages it deleted. After
// pruning, a reused idempotency key records a new message.
func (l *Ledger) Prune(ctx context.Context) (int64, error) {
	if l.cfg.Retention < 0 {
		return 0, nil
	}
	var total int64
	for {
		var n int64
		err := l.db.Write(ctx, func(tx *store.Tx) error {
			cutoff := store.FormatTime(tx.Now.Add(-l.cfg.Retention))
			res, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id IN (
				SELECT m.id FROM messages m
				WHERE m.created_at < ?
				  AND NOT EXISTS (SELECT 1 FROM obligations o WHERE o.message_id = m.id
				                  AND (o.state NOT IN ('delivered', 'abandoned') OR o.updated_at >= ?))
				ORDER BY m.id LIMIT 500)`, cutoff, cutoff)
			if err != nil {
				return err
			}
			if n, err = res.RowsAffected(); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `DELETE FROM chat_holds WHERE not_before < ?`, store.FormatTime(tx.Now))
			return err
		})
		if err != nil {
			return total, fmt.Errorf("prune: %w", err)
		}
		total += n
		if n < 500 {
			return total, nil
		}
	}
}
