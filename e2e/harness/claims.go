package harness

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"syscall"
	"time"

	"herald/internal/clock"
)

// OwnerLine matches the ready line of `herald serve` and captures the
// process's owner id: "herald: serving on URL (home DIR, owner ID)".
var OwnerLine = regexp.MustCompile(`^herald: serving on \S+ \(home .*, owner ([0-9A-Za-z_-]+)\)$`)

// OwnerID returns the node's owner id, as its ready line names it: the id
// the ledger stamps on every claim the node takes (executions.owner,
// obligations.owner) and its lock file under HOME/locks.
func (n *Node) OwnerID(ctx context.Context) (string, error) {
	m, err := n.WaitLine(ctx, OwnerLine)
	if err != nil {
		return "", err
	}
	return m[1], nil
}

// ExecutionsAfter returns the executions whose id is greater than after, by
// id: an incremental read for suites that look at the ledger after every
// step of a long run. Rows are only ever inserted with growing ids, so a
// caller that remembers the last id it saw reads each row once.
func (l *Ledger) ExecutionsAfter(ctx context.Context, after int64) ([]Execution, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, job_id, kind, slot, state, coalesce(cause, ''), coalesce(owner, ''),
		catchup, coalesce(message_id, 0), coalesce(output, '') FROM executions WHERE id > ? ORDER BY id`, after)
	if err != nil {
		return nil, fmt.Errorf("read executions after %d: %w", after, err)
	}
	defer rows.Close()
	var out []Execution
	for rows.Next() {
		var e Execution
		var slot string
		if err := rows.Scan(&e.ID, &e.JobID, &e.Kind, &slot, &e.State, &e.Cause, &e.Owner, &e.CatchUp, &e.MessageID, &e.Output); err != nil {
			return nil, err
		}
		if e.Slot, err = time.Parse(time.RFC3339Nano, slot); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// Claim is the fire claim an execution carries (SPEC §5): its owner,
// fencing token, expiry and last heartbeat, and the process group of its
// exec action.
type Claim struct {
	ExecutionID  int64
	JobID        int64
	Kind         string
	Slot         time.Time
	State        string
	Owner        string
	FencingToken int64
	// ExpiresAt and HeartbeatAt are zero when the row holds none.
	ExpiresAt   time.Time
	HeartbeatAt time.Time
	Pgid        int
}

// LedgerTimeFormat is the one format the ledger stores instants in (UTC,
// nanoseconds, fixed width, so that text order is time order): a query
// that matches an instant must spell it this way.
const LedgerTimeFormat = "2006-01-02T15:04:05.000000000Z"

// ErrNoExecution: no execution matches.
var ErrNoExecution = errors.New("no such execution")

// ClaimOf returns the claim of the execution of job (kind, slot); it wraps
// ErrNoExecution when there is none.
func (l *Ledger) ClaimOf(ctx context.Context, job int64, kind string, slot time.Time) (Claim, error) {
	c := Claim{JobID: job, Kind: kind}
	var gotSlot string
	var exp, hb sql.NullString
	err := l.db.QueryRowContext(ctx, `SELECT id, slot, state, coalesce(owner, ''), fencing_token, claim_expires_at, heartbeat_at,
		coalesce(pgid, 0) FROM executions WHERE job_id = ? AND kind = ? AND slot = ?`,
		job, kind, slot.UTC().Format(LedgerTimeFormat)).Scan(&c.ExecutionID, &gotSlot, &c.State, &c.Owner, &c.FencingToken, &exp, &hb, &c.Pgid)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("job %d %s %s: %w", job, kind, slot.UTC().Format(time.RFC3339), ErrNoExecution)
	}
	if err != nil {
		return c, fmt.Errorf("read claim of job %d %s %s: %w", job, kind, slot.UTC().Format(time.RFC3339), err)
	}
	if c.Slot, err = time.Parse(time.RFC3339Nano, gotSlot); err != nil {
		return c, err
	}
	for _, f := range []struct {
		v   sql.NullString
		dst *time.Time
	}{{exp, &c.ExpiresAt}, {hb, &c.HeartbeatAt}} {
		if f.v.Valid {
			if *f.dst, err = time.Parse(time.RFC3339Nano, f.v.String); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// LiveClaims describes every claim or lease the ledger still holds: an
// execution that names an owner or a claim expiry, an obligation that names
// an owner or a lease. Once every process has stopped and everything is
// terminal there must be none (SPEC §1: nothing a run held outlives it).
func (l *Ledger) LiveClaims(ctx context.Context) ([]string, error) {
	var out []string
	for _, q := range []struct{ what, query string }{
		{"execution", `SELECT id, state, coalesce(owner, ''), coalesce(claim_expires_at, '') FROM executions
			WHERE owner IS NOT NULL OR claim_expires_at IS NOT NULL ORDER BY id`},
		{"obligation", `SELECT id, state, coalesce(owner, ''), coalesce(lease_until, '') FROM obligations
			WHERE owner IS NOT NULL OR lease_until IS NOT NULL ORDER BY id`},
	} {
		rows, err := l.db.QueryContext(ctx, q.query)
		if err != nil {
			return nil, fmt.Errorf("read live %s claims: %w", q.what, err)
		}
		for rows.Next() {
			var id int64
			var state, owner, until string
			if err := rows.Scan(&id, &state, &owner, &until); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, fmt.Sprintf("%s %d (%s) still holds a claim: owner %q until %q", q.what, id, state, owner, until))
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HeldOwnerLocks returns the owner lock files under home/locks that some
// process still holds (SPEC §4: an owner holds an flock on
// locks/owner-<id>.lock for its lifetime). It tests each with a
// non-blocking exclusive flock, released at once; it removes nothing.
func HeldOwnerLocks(home string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(home, "locks", "owner-*.lock"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var held []string
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // released (and removed) meanwhile
		}
		if err != nil {
			return nil, err
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		case errors.Is(err, syscall.EWOULDBLOCK):
			held = append(held, filepath.Base(p))
		default:
			f.Close()
			return nil, fmt.Errorf("test lock %s: %w", p, err)
		}
		f.Close()
	}
	return held, nil
}

// SettledEvery is Settled with a chosen poll interval, for suites that step
// a virtual clock thousands of times and wait for every process to settle
// after each step: the 20 ms of Eventually would dominate their run time.
func SettledEvery(ctx context.Context, every time.Duration, at time.Time, nodes ...*Node) error {
	for _, n := range nodes {
		var last error
		for {
			if last = settledOnce(ctx, n, at); last == nil {
				break
			}
			if clock.Sleep(ctx, clock.Real{}, every) != nil {
				return fmt.Errorf("waiting for %s settled at %s: %w (last: %v)", n.Name, at.Format(time.RFC3339Nano), ctx.Err(), last)
			}
		}
	}
	return nil
}

func settledOnce(ctx context.Context, n *Node, at time.Time) error {
	if n.Exited() {
		return fmt.Errorf("%s exited: %v", n.Name, n.ExitErr())
	}
	var out struct {
		Settled bool     `json:"settled"`
		Reasons []string `json:"reasons"`
	}
	status, err := JSON(ctx, http.MethodGet, n.URL+"/v1/debug/settled?at="+at.UTC().Format(time.RFC3339Nano), nil, &out)
	if err != nil {
		return err
	}
	if status != http.StatusOK || !out.Settled {
		return fmt.Errorf("not settled: %v", out.Reasons)
	}
	return nil
}
