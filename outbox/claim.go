package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"herald/internal/store"
)

// Claim is an obligation this process has claimed: its row is attempting,
// stamped with our owner id, a fresh fencing token and a lease. Only the
// holder of the current fencing token can settle it.
type Claim struct {
	Obligation
	// Redelivery: the copy this claim sends may repeat an earlier one — an
	// earlier attempt may have landed: it failed ambiguously, or its owner
	// died or lost its lease mid-attempt (this reclaim counts). The send
	// carries Marker. A retry after a failure that proves the send did not
	// land (a refused connection, a 429) is not marked: the chat has no
	// earlier copy. This narrows SPEC §4 step 3 ("not pending or attempted
	// before"), which would mark a message whose only copy follows a 429.
	Redelivery bool
	// Reclaimed: the row was taken from an owner that died or whose lease
	// expired while it was attempting.
	Reclaimed bool
	// Boot: claimed by a boot sweep (its fault points are boot.*).
	Boot bool
}

type candidate struct {
	id       int64
	state    State
	fence    int64
	attempts int
	owner    string
	lease    time.Time
	platform string
}

// openChatHead is the condition that row o is open and the head (lowest
// open id) of its (platform, chat): the only row of a chat a claim may take,
// which keeps one obligation per chat in flight, in acceptance order.
const openChatHead = `o.state IN ('pending', 'attempting', 'failed')
		  AND o.id = (SELECT min(h.id) FROM obligations h
		              WHERE h.platform = o.platform AND h.chat_id = o.chat_id
		                AND h.state IN ('pending', 'attempting', 'failed'))`

// claimMode selects which rows a claim may take.
type claimMode int

const (
	// claimAll: due pending and failed chat heads, and orphaned attempting
	// rows (the worker's claim).
	claimAll claimMode = iota
	// claimOrphans: orphaned attempting rows and due failed rows only (the
	// boot sweep).
	claimOrphans
)

// candidates reads, outside any write lock, the rows a claim could take:
// the head (lowest open id) of each (platform, chat) — so at most one
// obligation per chat is ever in flight, and chats deliver in acceptance
// order — when it is due and its chat is not held by a rate limit, or when
// it is attempting for an owner that is dead or whose lease expired.
func (l *Ledger) candidates(ctx context.Context, now time.Time, mode claimMode, known func(string) bool, n int) ([]candidate, error) {
	q := `SELECT o.id, o.state, o.fencing_token, o.attempts, o.owner, o.lease_until, o.platform
		FROM obligations o
		WHERE ` + openChatHead + `
		  AND ((o.state IN ('pending', 'failed') AND o.next_attempt_at <= :now)
		    OR (o.state = 'attempting' AND (o.owner IS NULL OR o.owner != :self)))
		  AND NOT EXISTS (SELECT 1 FROM chat_holds c
		                  WHERE c.platform = o.platform AND c.chat_id IN (o.chat_id, '')
		                    AND c.not_before > :now)`
	if mode == claimOrphans {
		q += ` AND o.state IN ('attempting', 'failed')`
	}
	q += ` ORDER BY o.id LIMIT :scan`
	nowText := store.FormatTime(now)
	var out []candidate
	err := l.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, q, sql.Named("now", nowText), sql.Named("self", l.cfg.Owner), sql.Named("scan", n+256))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var c candidate
			var owner, lease sql.NullString
			var state string
			if err := rows.Scan(&c.id, &state, &c.fence, &c.attempts, &owner, &lease, &c.platform); err != nil {
				return err
			}
			c.state, c.owner = State(state), owner.String
			if c.lease, err = store.ParseNullTime(lease); err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("find claimable obligations: %w", err)
	}
	// Liveness is checked here, before the write lock is taken: it touches
	// the file system, and a stale answer is harmless because the claim is a
	// CAS on the fencing token.
	keep := out[:0]
	alive := map[string]bool{}
	for _, c := range out {
		if known != nil && !known(c.platform) {
			continue
		}
		if c.state == StateAttempting && c.lease.After(now) {
			a, seen := alive[c.owner]
			if !seen {
				a = l.live != nil && l.live.Alive(c.owner)
				alive[c.owner] = a
			}
			if a {
				continue
			}
		}
		keep = append(keep, c)
		if len(keep) == n {
			break
		}
	}
	return keep, nil
}

// Claim claims up to n obligations for this owner: due chat heads and rows
// orphaned by a dead or expired owner. known, when not nil, limits claims to
// platforms this process can send to. Each claim is a CAS on (id, state,
// fencing token); of several processes racing for a row exactly one wins.
func (l *Ledger) Claim(ctx context.Context, n int, known func(platform string) bool) ([]Claim, error) {
	return l.claim(ctx, n, claimAll, known)
}

func (l *Ledger) claim(ctx context.Context, n int, mode claimMode, known func(string) bool) ([]Claim, error) {
	if n <= 0 {
		return nil, nil
	}
	cands, err := l.candidates(ctx, l.clk.Now().UTC(), mode, known, n)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	var claims []Claim
	err = l.db.Write(ctx, func(tx *store.Tx) error {
		claims = claims[:0]
		lease := store.FormatTime(tx.Now.Add(l.cfg.Lease))
		now := store.FormatTime(tx.Now)
		for _, c := range cands {
			reclaimed := c.state == StateAttempting
			lost := 0
			if reclaimed {
				lost = 1
			}
			res, err := tx.ExecContext(ctx, `UPDATE obligations
				SET state = 'attempting', attempts = attempts + 1, fencing_token = fencing_token + 1,
				    owner = ?, lease_until = ?, ambiguous = ambiguous + ?, updated_at = ?
				WHERE id = ? AND state = ? AND fencing_token = ?`,
				l.cfg.Owner, lease, lost, now, c.id, string(c.state), c.fence)
			if err != nil {
				return fmt.Errorf("claim obligation %d: %w", c.id, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("claim obligation %d: %w", c.id, err)
			} else if n == 0 {
				continue // another process won this row
			}
			if reclaimed {
				why := "lease expired"
				if c.lease.After(tx.Now) {
					why = "owner dead"
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO attempts
					(obligation_id, attempt, fencing_token, owner, outcome, error_class, error, redelivery, at)
					VALUES (?, ?, ?, ?, 'lost', ?, ?, 0, ?)`,
					c.id, c.attempts, c.fence, c.owner, string(ClassAmbiguous),
					fmt.Sprintf("claim lost: %s (owner %s); the send may have landed", why, c.owner), now); err != nil {
					return fmt.Errorf("record lost attempt of obligation %d: %w", c.id, err)
				}
			}
			o, err := scanObligation(tx.QueryRowContext(ctx, `SELECT `+obligationColumns+` FROM obligations WHERE id = ?`, c.id))
			if err != nil {
				return fmt.Errorf("read claimed obligation %d: %w", c.id, err)
			}
			claims = append(claims, Claim{
				Obligation: o,
				Redelivery: o.Ambiguous > 0,
				Reclaimed:  reclaimed,
				Boot:       mode == claimOrphans,
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// NextWake returns the earliest instant after which a claim could find new
// work without anything else happening: a failed row's next attempt, a
// foreign lease's expiry, or a chat hold's end. ok is false when nothing is
// waiting on time.
func (l *Ledger) NextWake(ctx context.Context) (time.Time, bool, error) {
	var best time.Time
	err := l.db.Read(ctx, func(tx *store.Tx) error {
		var a, b, c sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT
			(SELECT min(next_attempt_at) FROM obligations WHERE state IN ('pending', 'failed') AND next_attempt_at > :now),
			(SELECT min(lease_until) FROM obligations WHERE state = 'attempting' AND owner != :self AND lease_until > :now),
			(SELECT min(not_before) FROM chat_holds WHERE not_before > :now)`,
			sql.Named("self", l.cfg.Owner), sql.Named("now", store.FormatTime(tx.Now))).Scan(&a, &b, &c)
		if err != nil {
			return err
		}
		for _, s := range []sql.NullString{a, b, c} {
			t, err := store.ParseNullTime(s)
			if err != nil {
				return err
			}
			if !t.IsZero() && (best.IsZero() || t.Before(best)) {
				best = t
			}
		}
		return nil
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next wake: %w", err)
	}
	return best, !best.IsZero(), nil
}

// DueBy counts the obligations that should have been delivered by at but
// are not: chat heads in flight, or pending/failed and due at or before at
// with their chat not held. Rows waiting behind a backed-off head, or for a
// retry after at, are not counted.
func (l *Ledger) DueBy(ctx context.Context, at time.Time) (int, error) {
	var n int
	err := l.db.QueryRow(ctx, `SELECT count(*) FROM obligations o
		WHERE `+openChatHead+`
		  AND (o.state = 'attempting' OR (o.next_attempt_at <= :at
		       AND NOT EXISTS (SELECT 1 FROM chat_holds c WHERE c.platform = o.platform
		                       AND c.chat_id IN (o.chat_id, '') AND c.not_before > :at)))`,
		sql.Named("at", store.FormatTime(at))).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count due obligations: %w", err)
	}
	return n, nil
}
