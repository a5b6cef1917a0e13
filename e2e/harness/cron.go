package harness

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"herald/internal/clock"
)

// VirtualClock is a clock file shared by every process of a suite
// (HERALD_CLOCK_FILE).
type VirtualClock struct {
	Path string
	now  time.Time
}

// NewVirtualClock writes t to dir/clock and returns the clock.
func NewVirtualClock(tb testing.TB, dir string, t time.Time) *VirtualClock {
	tb.Helper()
	c := &VirtualClock{Path: filepath.Join(dir, "clock")}
	c.Set(tb, t)
	return c
}

// Env is the environment entry that puts a process on this clock.
func (c *VirtualClock) Env() string { return clock.EnvFile + "=" + c.Path }

// Now is the instant last written.
func (c *VirtualClock) Now() time.Time { return c.now }

// Set writes t (atomically).
func (c *VirtualClock) Set(tb testing.TB, t time.Time) {
	tb.Helper()
	if err := clock.WriteFile(c.Path, t); err != nil {
		tb.Fatal(err)
	}
	c.now = t.UTC()
}

// Advance moves the clock by d.
func (c *VirtualClock) Advance(tb testing.TB, d time.Duration) { c.Set(tb, c.now.Add(d)) }

// Settled waits until every node reports (GET /v1/debug/settled?at=) that
// all due at or before at is done.
func Settled(ctx context.Context, at time.Time, nodes ...*Node) error {
	return SettledEvery(ctx, 20*time.Millisecond, at, nodes...)
}

// Job is the part of a job the suites send and read (POST /v1/jobs).
type Job struct {
	ID               int64          `json:"id,omitempty"`
	Name             string         `json:"name"`
	Spec             string         `json:"spec"`
	Zone             string         `json:"zone,omitempty"`
	Anchor           string         `json:"anchor,omitempty"`
	Action           map[string]any `json:"action"`
	Platform         string         `json:"platform,omitempty"`
	ChatID           string         `json:"chat_id,omitempty"`
	CatchUp          string         `json:"catchup,omitempty"`
	Budget           string         `json:"budget,omitempty"`
	RerunInterrupted bool           `json:"rerun_interrupted,omitempty"`
	NextRunAt        string         `json:"next_run_at,omitempty"`
}

// CreateJob posts j to the node and returns the stored job.
func (n *Node) CreateJob(ctx context.Context, j Job) (Job, error) {
	var out Job
	status, err := JSON(ctx, http.MethodPost, n.URL+"/v1/jobs", j, &out)
	if err == nil && status != http.StatusCreated {
		err = fmt.Errorf("create job %s: status %d", j.Name, status)
	}
	return out, err
}

// RunJob asks the node for a manual run of job (id or name).
func (n *Node) RunJob(ctx context.Context, job string) error {
	status, err := JSON(ctx, http.MethodPost, n.URL+"/v1/jobs/"+job+"/run", nil, nil)
	if err == nil && status != http.StatusAccepted {
		err = fmt.Errorf("run job %s: status %d", job, status)
	}
	return err
}

// Execution is one execution row as the ledger holds it.
type Execution struct {
	ID, JobID    int64
	Kind         string
	Slot         time.Time
	State, Cause string
	Owner        string
	CatchUp      bool
	MessageID    int64
	Output       string
}

// Executions returns every execution, by id.
func (l *Ledger) Executions(ctx context.Context) ([]Execution, error) {
	return l.ExecutionsAfter(ctx, 0)
}

// JobRow is one job as the ledger holds it.
type JobRow struct {
	ID        int64
	Name      string
	NextRunAt time.Time
	Missed    int
}

// Jobs returns every live job, by id.
func (l *Ledger) Jobs(ctx context.Context) ([]JobRow, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT id, name, next_run_at, missed FROM jobs WHERE deleted = 0 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read jobs: %w", err)
	}
	defer rows.Close()
	var out []JobRow
	for rows.Next() {
		var j JobRow
		var next sql.NullString
		if err := rows.Scan(&j.ID, &j.Name, &next, &j.Missed); err != nil {
			return nil, err
		}
		if next.Valid {
			if j.NextRunAt, err = time.Parse(time.RFC3339Nano, next.String); err != nil {
				return nil, err
			}
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

// FireAttempt is one attempt to claim an occurrence.
type FireAttempt struct {
	JobID   int64
	Slot    time.Time
	Owner   string
	Outcome string
}

// FireAttempts returns the claim attempts, in order.
func (l *Ledger) FireAttempts(ctx context.Context) ([]FireAttempt, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT job_id, slot, owner, outcome FROM fire_attempts ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read fire attempts: %w", err)
	}
	defer rows.Close()
	var out []FireAttempt
	for rows.Next() {
		var a FireAttempt
		var slot string
		if err := rows.Scan(&a.JobID, &slot, &a.Owner, &a.Outcome); err != nil {
			return nil, err
		}
		if a.Slot, err = time.Parse(time.RFC3339Nano, slot); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// CheckTermination returns every violation of the termination invariants
// (SPEC §1): every execution terminal with a cause and no live claim; every
// obligation terminal; every delivered obligation backed by a journal copy
// (checked by CheckDelivery).
func CheckTermination(execs []Execution, rows []Row) []string {
	var bad []string
	for _, e := range execs {
		switch e.State {
		case "succeeded", "failed", "interrupted", "cancelled":
		default:
			bad = append(bad, fmt.Sprintf("execution %d (job %d slot %s) is %s, not terminal", e.ID, e.JobID, e.Slot.Format(time.RFC3339), e.State))
		}
		if e.Cause == "" && e.State != "claimed" && e.State != "running" {
			bad = append(bad, fmt.Sprintf("execution %d ended %s without a cause", e.ID, e.State))
		}
		if e.Owner != "" && e.State != "claimed" && e.State != "running" {
			bad = append(bad, fmt.Sprintf("execution %d ended %s but still names owner %s", e.ID, e.State, e.Owner))
		}
	}
	for _, r := range rows {
		if !r.Terminal() {
			bad = append(bad, fmt.Sprintf("obligation %d is %s, not terminal", r.ID, r.State))
		}
		if r.Owner != "" {
			bad = append(bad, fmt.Sprintf("obligation %d (%s) still names owner %s", r.ID, r.State, r.Owner))
		}
	}
	return bad
}
