package cron

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"herald/internal/store"
)

// ExecState is where an execution stands (SPEC §5):
// claimed → running → succeeded | failed | interrupted | cancelled.
type ExecState string

const (
	// ExecClaimed: a process holds the fire claim for the occurrence; the
	// action has not started. The tick that claims the occurrence moves a
	// row in; the owner moves it to running, or recovery to interrupted.
	ExecClaimed ExecState = "claimed"
	// ExecRunning: the action runs; the owner's heartbeat keeps the claim
	// alive. The owner moves it to a terminal state, or recovery (owner dead
	// or claim expired) to interrupted.
	ExecRunning ExecState = "running"
	// ExecSucceeded: the action finished without error; its output, if the
	// job delivers, was recorded in the outbox in the same transaction.
	ExecSucceeded ExecState = "succeeded"
	// ExecFailed: the action ended with an error (cause says which).
	ExecFailed ExecState = "failed"
	// ExecInterrupted: the owner died or lost its claim before finishing
	// (cause "owner lost: …"); nothing was delivered for it.
	ExecInterrupted ExecState = "interrupted"
	// ExecCancelled: the run was cut off — its budget expired (cause
	// "deadline") or the process shut down (cause "shutdown").
	ExecCancelled ExecState = "cancelled"
)

// AllExecStates returns every execution state, in protocol order.
func AllExecStates() []ExecState {
	return []ExecState{ExecClaimed, ExecRunning, ExecSucceeded, ExecFailed, ExecInterrupted, ExecCancelled}
}

// Terminal reports whether an execution in state s never changes again.
func (s ExecState) Terminal() bool {
	return s == ExecSucceeded || s == ExecFailed || s == ExecInterrupted || s == ExecCancelled
}

// ExecKind says why an execution exists.
type ExecKind string

const (
	// ExecScheduled runs an occurrence of the schedule; slot is the
	// occurrence.
	ExecScheduled ExecKind = "scheduled"
	// ExecManual is a run by hand; slot is when it was asked for. It never
	// moves or consumes the next scheduled occurrence.
	ExecManual ExecKind = "manual"
	// ExecRerun re-runs, once, an occurrence whose execution was
	// interrupted, for jobs that opt in.
	ExecRerun ExecKind = "rerun"
)

// Execution is one run of a job.
type Execution struct {
	ID    int64
	JobID int64
	Kind  ExecKind
	// Slot is the occurrence (UTC); for a manual run, when it was asked for.
	Slot  time.Time
	State ExecState
	// Cause says how a terminal execution ended: "ok", "exit status 1",
	// "deadline", "owner lost: …", "shutdown", …
	Cause string
	// Late is how long after its slot the execution was claimed.
	Late time.Duration
	// CatchUp marks a run fired by the catch-up policy after an outage.
	CatchUp        bool
	Owner          string
	FencingToken   int64
	ClaimExpiresAt time.Time
	HeartbeatAt    time.Time
	Output         string
	Truncated      bool
	// MessageID is the outbox message carrying the output, 0 if none.
	MessageID  int64
	ClaimedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

const execColumns = `id, job_id, kind, slot, state, coalesce(cause, ''), late_ms, catchup, coalesce(owner, ''),
	fencing_token, claim_expires_at, heartbeat_at, coalesce(output, ''), truncated, coalesce(message_id, 0),
	claimed_at, started_at, finished_at`

func scanExecution(r scanner) (Execution, error) {
	var e Execution
	var kind, state, slot, claimed string
	var lateMS int64
	var expires, hb, started, finished sql.NullString
	err := r.Scan(&e.ID, &e.JobID, &kind, &slot, &state, &e.Cause, &lateMS, &e.CatchUp, &e.Owner, &e.FencingToken,
		&expires, &hb, &e.Output, &e.Truncated, &e.MessageID, &claimed, &started, &finished)
	if err != nil {
		return e, err
	}
	e.Kind, e.State, e.Late = ExecKind(kind), ExecState(state), time.Duration(lateMS)*time.Millisecond
	var perr [6]error
	e.Slot, perr[0] = store.ParseTime(slot)
	e.ClaimExpiresAt, perr[1] = store.ParseNullTime(expires)
	e.HeartbeatAt, perr[2] = store.ParseNullTime(hb)
	e.ClaimedAt, perr[3] = store.ParseTime(claimed)
	e.StartedAt, perr[4] = store.ParseNullTime(started)
	e.FinishedAt, perr[5] = store.ParseNullTime(finished)
	return e, errors.Join(perr[:]...)
}

// GetExecution returns execution id. Errors: ErrNotFound.
func (s *Scheduler) GetExecution(ctx context.Context, id int64) (Execution, error) {
	e, err := scanExecution(s.db.QueryRow(ctx, `SELECT `+execColumns+` FROM executions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("execution %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return e, fmt.Errorf("get execution %d: %w", id, err)
	}
	return e, nil
}

// ListExecutions returns up to limit executions of job id, newest first
// (limit ≤ 0: 100). A deleted job's executions are still listed.
func (s *Scheduler) ListExecutions(ctx context.Context, jobID int64, limit int) ([]Execution, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	var out []Execution
	err := s.db.Read(ctx, func(tx *store.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE id = ?`, jobID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("job %d: %w", jobID, ErrNotFound)
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+execColumns+` FROM executions WHERE job_id = ? ORDER BY id DESC LIMIT ?`, jobID, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanExecution(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list executions of job %d: %w", jobID, err)
	}
	return out, nil
}
