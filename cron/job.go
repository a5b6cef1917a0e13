package cron

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"herald/internal/store"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: no job or execution with that id (or the job is deleted).
	ErrNotFound = errors.New("not found")
	// ErrInvalidJob: a job definition the scheduler refuses; the message says
	// which field and why.
	ErrInvalidJob = errors.New("invalid job")
	// ErrConflict: a live job already has that name.
	ErrConflict = errors.New("conflict")
)

// CatchUp is what happens to occurrences missed while no scheduler ran
// (SPEC §5).
type CatchUp string

const (
	// CatchUpLatest (default): the most recent missed occurrence fires once on
	// the first tick after the outage; older ones are recorded as missed.
	CatchUpLatest CatchUp = "latest"
	// CatchUpSkip: missed occurrences never fire; they are recorded.
	CatchUpSkip CatchUp = "skip"
	// CatchUpAll: every missed occurrence fires, oldest first, up to the
	// job's catch-up cap (the most recent ones); the rest are recorded.
	CatchUpAll CatchUp = "all"
)

// AllCatchUps returns every catch-up policy.
func AllCatchUps() []CatchUp { return []CatchUp{CatchUpLatest, CatchUpSkip, CatchUpAll} }

// Defaults for job definitions.
const (
	DefaultBudget     = time.Hour
	DefaultCatchUpCap = 10
	MaxCatchUpCap     = 1000
	// DefaultOneShotGrace: a one-shot missed by more than this never fires
	// (SPEC §5).
	DefaultOneShotGrace = 120 * time.Second
)

// Job is a scheduled job.
type Job struct {
	ID   int64
	Name string
	// Spec is the schedule (`30 2 * * *`, `every 2h`, `at 2026-12-01T09:00`).
	Spec string
	// Zone is the job's IANA zone; empty means the server zone.
	Zone string
	// Anchor is the origin of an interval's grid (UTC); the creation instant
	// unless given.
	Anchor time.Time
	Action Action
	// Platform and ChatID name where the output is delivered; empty when
	// the output is kept only in the execution record.
	Platform string
	ChatID   string
	CatchUp  CatchUp
	// CatchUpCap bounds how many missed occurrences CatchUpAll runs.
	CatchUpCap int
	// Grace is how late an occurrence may start and still count as on time;
	// zero derives clamp(period/2, 2 min, 2 h) (SPEC §5).
	Grace time.Duration
	// Budget is the run budget: the wall-clock timeout of one execution.
	Budget time.Duration
	// RerunInterrupted opts in to re-running, once, an execution whose
	// owner died.
	RerunInterrupted bool
	Paused           bool
	// NextRunAt is the next occurrence (UTC), zero when there is none (a
	// spent one-shot).
	NextRunAt time.Time
	// Missed counts occurrences that never ran (outages, catch-up policy,
	// a one-shot past its grace); LastMissedAt/LastMissedReason the latest.
	Missed           int
	LastMissedAt     time.Time
	LastMissedReason string
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// JobDef is what a caller gives to create a job, or (nil fields unchanged)
// to patch one.
type JobDef struct {
	Name             *string        `json:"name,omitempty"`
	Spec             *string        `json:"spec,omitempty"`
	Zone             *string        `json:"zone,omitempty"`
	Anchor           *time.Time     `json:"anchor,omitempty"`
	Action           *Action        `json:"action,omitempty"`
	Platform         *string        `json:"platform,omitempty"`
	ChatID           *string        `json:"chat_id,omitempty"`
	CatchUp          *CatchUp       `json:"catchup,omitempty"`
	CatchUpCap       *int           `json:"catchup_cap,omitempty"`
	Grace            *time.Duration `json:"-"`
	Budget           *time.Duration `json:"-"`
	RerunInterrupted *bool          `json:"rerun_interrupted,omitempty"`
	Paused           *bool          `json:"paused,omitempty"`
}

var jobNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidJob, fmt.Sprintf(format, args...))
}

// apply copies the set fields of d onto j.
func (d JobDef) apply(j *Job) {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&j.Name, d.Name)
	set(&j.Spec, d.Spec)
	set(&j.Zone, d.Zone)
	set(&j.Platform, d.Platform)
	set(&j.ChatID, d.ChatID)
	if d.Anchor != nil {
		j.Anchor = d.Anchor.UTC()
	}
	if d.Action != nil {
		j.Action = *d.Action
	}
	if d.CatchUp != nil {
		j.CatchUp = *d.CatchUp
	}
	if d.CatchUpCap != nil {
		j.CatchUpCap = *d.CatchUpCap
	}
	if d.Grace != nil {
		j.Grace = *d.Grace
	}
	if d.Budget != nil {
		j.Budget = *d.Budget
	}
	if d.RerunInterrupted != nil {
		j.RerunInterrupted = *d.RerunInterrupted
	}
	if d.Paused != nil {
		j.Paused = *d.Paused
	}
}

// validate checks j (after defaults) and returns its parsed schedule.
// Errors wrap ErrInvalidJob, ErrBadSpec, ErrUnknownZone or ErrBadAction and
// say which field is wrong.
func (s *Scheduler) validate(j *Job, now time.Time, rescheduled bool) (*Schedule, error) {
	if !jobNameRE.MatchString(j.Name) {
		return nil, invalid("name %q: want 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", j.Name)
	}
	if strings.Trim(j.Name, "0123456789") == "" {
		return nil, invalid("name %q: a name of digits only would read as a job id", j.Name)
	}
	if j.Spec == "" {
		return nil, invalid("spec is required (e.g. \"30 2 * * *\", \"every 2h\", \"at 2026-12-01T09:00\")")
	}
	loc, err := s.zone(j.Zone)
	if err != nil {
		return nil, fmt.Errorf("zone: %w", err)
	}
	sched, err := ParseSchedule(j.Spec, loc, j.Anchor)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	if sched.Kind() == KindOneShot {
		if _, ok := sched.Next(now); !ok && rescheduled {
			at, _ := sched.Prev(now)
			return nil, invalid("spec %q: the one-shot at %s is in the past (now %s)", j.Spec,
				at.In(loc).Format(time.RFC3339), now.In(loc).Format(time.RFC3339))
		}
	}
	if err := j.Action.Validate(); err != nil {
		return nil, fmt.Errorf("action: %w", err)
	}
	if (j.Platform == "") != (j.ChatID == "") {
		return nil, invalid("platform and chat_id go together: give both to deliver the output, or neither")
	}
	if j.Action.Kind == ActionMessage && j.Platform == "" {
		return nil, invalid("a message action needs a platform and chat_id to deliver to")
	}
	if j.Platform != "" && s.cfg.KnownPlatform != nil && !s.cfg.KnownPlatform(j.Platform) {
		return nil, invalid("platform %q is not configured", j.Platform)
	}
	switch j.CatchUp {
	case CatchUpLatest, CatchUpSkip, CatchUpAll:
	default:
		return nil, invalid("catchup %q: want latest, skip or all", j.CatchUp)
	}
	if j.CatchUpCap < 1 || j.CatchUpCap > MaxCatchUpCap {
		return nil, invalid("catchup_cap %d: want 1..%d", j.CatchUpCap, MaxCatchUpCap)
	}
	if j.Budget <= 0 {
		return nil, invalid("budget %s: the run budget must be positive", j.Budget)
	}
	if j.Grace < 0 {
		return nil, invalid("grace %s: must not be negative", j.Grace)
	}
	return sched, nil
}

// CreateJob validates def and stores a new job whose next occurrence is the
// first one strictly after now. Errors: ErrInvalidJob, ErrBadSpec,
// ErrUnknownZone, ErrBadAction (all caller errors), ErrConflict for a name in
// use, store errors.
func (s *Scheduler) CreateJob(ctx context.Context, def JobDef) (Job, error) {
	var out Job
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		j := Job{CatchUp: CatchUpLatest, CatchUpCap: DefaultCatchUpCap, Budget: DefaultBudget, Anchor: tx.Now}
		def.apply(&j)
		sched, err := s.validate(&j, tx.Now, true)
		if err != nil {
			return err
		}
		j.NextRunAt, _ = sched.Next(tx.Now)
		j.CreatedAt, j.UpdatedAt = tx.Now, tx.Now
		var exists int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE name = ? AND deleted = 0`, j.Name).Scan(&exists); err != nil {
			return err
		}
		if exists > 0 {
			return fmt.Errorf("%w: a job named %q already exists", ErrConflict, j.Name)
		}
		action, err := json.Marshal(j.Action)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO jobs (name, spec, zone, anchor, action, platform, chat_id,
			catchup, catchup_cap, grace_ms, budget_ms, rerun_interrupted, paused, next_run_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			j.Name, j.Spec, j.Zone, store.FormatTime(j.Anchor), string(action), j.Platform, j.ChatID,
			string(j.CatchUp), j.CatchUpCap, j.Grace.Milliseconds(), j.Budget.Milliseconds(), j.RerunInterrupted, j.Paused,
			store.NullTime(j.NextRunAt), store.FormatTime(tx.Now), store.FormatTime(tx.Now))
		if err != nil {
			return fmt.Errorf("create job %q: %w", j.Name, err)
		}
		j.ID, err = res.LastInsertId()
		out = j
		return err
	})
	if err != nil {
		return Job{}, err
	}
	s.Notify()
	return out, nil
}

// UpdateJob applies the set fields of def to job id. A change of spec, zone
// or anchor, and a resume, recompute the next occurrence from now (a resumed
// job does not catch up on what it missed while paused). Errors as CreateJob,
// plus ErrNotFound.
func (s *Scheduler) UpdateJob(ctx context.Context, id int64, def JobDef) (Job, error) {
	var out Job
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		j, err := getJobTx(ctx, tx, id)
		if err != nil {
			return err
		}
		before := j
		def.apply(&j)
		rescheduled := j.Spec != before.Spec || j.Zone != before.Zone || !j.Anchor.Equal(before.Anchor)
		sched, err := s.validate(&j, tx.Now, rescheduled)
		if err != nil {
			return err
		}
		if j.Name != before.Name {
			var exists int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE name = ? AND deleted = 0 AND id != ?`, j.Name, id).Scan(&exists); err != nil {
				return err
			}
			if exists > 0 {
				return fmt.Errorf("%w: a job named %q already exists", ErrConflict, j.Name)
			}
		}
		if rescheduled || (before.Paused && !j.Paused) {
			j.NextRunAt, _ = sched.Next(tx.Now)
		}
		action, err := json.Marshal(j.Action)
		if err != nil {
			return err
		}
		j.UpdatedAt = tx.Now
		_, err = tx.ExecContext(ctx, `UPDATE jobs SET name = ?, spec = ?, zone = ?, anchor = ?, action = ?, platform = ?,
			chat_id = ?, catchup = ?, catchup_cap = ?, grace_ms = ?, budget_ms = ?, rerun_interrupted = ?, paused = ?,
			next_run_at = ?, updated_at = ? WHERE id = ? AND deleted = 0`,
			j.Name, j.Spec, j.Zone, store.FormatTime(j.Anchor), string(action), j.Platform, j.ChatID,
			string(j.CatchUp), j.CatchUpCap, j.Grace.Milliseconds(), j.Budget.Milliseconds(), j.RerunInterrupted, j.Paused,
			store.NullTime(j.NextRunAt), store.FormatTime(tx.Now), id)
		if err != nil {
			return fmt.Errorf("update job %d: %w", id, err)
		}
		out = j
		return nil
	})
	if err != nil {
		return Job{}, err
	}
	s.Notify()
	return out, nil
}

// DeleteJob removes job id from scheduling and listings. Its executions stay
// (an execution in flight finishes and keeps its record). Errors:
// ErrNotFound.
func (s *Scheduler) DeleteJob(ctx context.Context, id int64) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET deleted = 1, next_run_at = NULL, updated_at = ? WHERE id = ? AND deleted = 0`,
			store.FormatTime(tx.Now), id)
		if err != nil {
			return fmt.Errorf("delete job %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("job %d: %w", id, ErrNotFound)
		}
		return nil
	})
}

// GetJob returns job id. Errors: ErrNotFound.
func (s *Scheduler) GetJob(ctx context.Context, id int64) (Job, error) {
	var j Job
	err := s.db.Read(ctx, func(tx *store.Tx) error {
		var err error
		j, err = getJobTx(ctx, tx, id)
		return err
	})
	return j, err
}

// GetJobByName returns the live job called name. Errors: ErrNotFound.
func (s *Scheduler) GetJobByName(ctx context.Context, name string) (Job, error) {
	var id int64
	err := s.db.QueryRow(ctx, `SELECT id FROM jobs WHERE name = ? AND deleted = 0`, name).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return Job{}, fmt.Errorf("job %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return Job{}, err
	}
	return s.GetJob(ctx, id)
}

// ListJobs returns the live jobs by id.
func (s *Scheduler) ListJobs(ctx context.Context) ([]Job, error) {
	var out []Job
	err := s.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE deleted = 0 ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			j, err := scanJob(rows)
			if err != nil {
				return err
			}
			out = append(out, j)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return out, nil
}

const jobColumns = `id, name, spec, zone, anchor, action, platform, chat_id, catchup, catchup_cap, grace_ms,
	budget_ms, rerun_interrupted, paused, next_run_at, missed, last_missed_at, coalesce(last_missed_reason, ''),
	created_at, updated_at`

func getJobTx(ctx context.Context, tx *store.Tx, id int64) (Job, error) {
	j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = ? AND deleted = 0`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("get job %d: %w", id, err)
	}
	return j, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanJob(r scanner) (Job, error) {
	var j Job
	var anchor, action, catchup, created, updated string
	var next, lastMissed sql.NullString
	var graceMS, budgetMS int64
	err := r.Scan(&j.ID, &j.Name, &j.Spec, &j.Zone, &anchor, &action, &j.Platform, &j.ChatID, &catchup, &j.CatchUpCap,
		&graceMS, &budgetMS, &j.RerunInterrupted, &j.Paused, &next, &j.Missed, &lastMissed, &j.LastMissedReason,
		&created, &updated)
	if err != nil {
		return j, err
	}
	j.CatchUp = CatchUp(catchup)
	j.Grace, j.Budget = time.Duration(graceMS)*time.Millisecond, time.Duration(budgetMS)*time.Millisecond
	if err := json.Unmarshal([]byte(action), &j.Action); err != nil {
		return j, fmt.Errorf("job %d: stored action: %w", j.ID, err)
	}
	var perr [5]error
	j.Anchor, perr[0] = store.ParseTime(anchor)
	j.NextRunAt, perr[1] = store.ParseNullTime(next)
	j.LastMissedAt, perr[2] = store.ParseNullTime(lastMissed)
	j.CreatedAt, perr[3] = store.ParseTime(created)
	j.UpdatedAt, perr[4] = store.ParseTime(updated)
	return j, errors.Join(perr[:]...)
}

// GraceFor returns the catch-up grace of a job with schedule sched: its own
// Grace if set, else clamp(period/2, 2 min, 2 h) (SPEC §5); one-shots use
// the one-shot grace.
func (s *Scheduler) GraceFor(j Job, sched *Schedule) time.Duration {
	if j.Grace > 0 {
		return j.Grace
	}
	if sched.Kind() == KindOneShot {
		return s.cfg.OneShotGrace
	}
	g := sched.Period() / 2
	if g < 2*time.Minute {
		g = 2 * time.Minute
	}
	if g > 2*time.Hour {
		g = 2 * time.Hour
	}
	return g
}
