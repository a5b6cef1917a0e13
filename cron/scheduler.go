package cron

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"herald/internal/clock"
	"herald/internal/faultpoint"
	"herald/internal/split"
	"herald/internal/store"
	"herald/outbox"
)

// Defaults for Config.
const (
	DefaultClaimTTL      = 300 * time.Second
	DefaultPollInterval  = 500 * time.Millisecond
	DefaultMaxDuePerTick = 100
	DefaultFinishBudget  = 30 * time.Second
	// maxCatchUpScan bounds how many missed occurrences one claim walks;
	// beyond it the missed count is a lower bound.
	maxCatchUpScan = 100000
)

// Config tunes a Scheduler. Zero fields take the Default… values.
type Config struct {
	// Owner is this process's owner id (internal/owner); required.
	Owner string
	// ServerZone is the zone of jobs without one (HERALD_TZ, else local).
	ServerZone *time.Location
	// ClaimTTL is how long a fire claim lives without a heartbeat.
	ClaimTTL time.Duration
	// Heartbeat is how often a running execution refreshes its claim
	// (default ClaimTTL/5).
	Heartbeat time.Duration
	// OneShotGrace: a one-shot later than this never fires (default 120 s).
	OneShotGrace time.Duration
	// PollInterval is how often, in real time, an idle scheduler looks for
	// changes other processes made.
	PollInterval time.Duration
	// MaxDuePerTick bounds the jobs one tick claims.
	MaxDuePerTick int
	// FinishBudget bounds (in real time) the writing of an execution's
	// terminal record, retried while the store is busy.
	FinishBudget time.Duration
	// KnownPlatform reports whether a platform is configured (job
	// validation); nil accepts any.
	KnownPlatform func(platform string) bool
	// Limit returns a platform's text limit, for splitting a job's output.
	Limit func(platform string) split.Limit
	// Delivered is called after an execution's output was recorded in the
	// outbox (the delivery worker's Notify).
	Delivered func()
}

// Validate reports whether c (with defaults filled in) is usable: an owner,
// and a heartbeat shorter than the claim TTL.
func (c Config) Validate() error { return c.fill() }

func (c *Config) fill() error {
	if c.Owner == "" {
		return errors.New("scheduler config: owner is required")
	}
	if c.ServerZone == nil {
		c.ServerZone = time.Local
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = c.ClaimTTL / 5
	}
	if c.Heartbeat >= c.ClaimTTL {
		return fmt.Errorf("scheduler config: heartbeat %s must be shorter than the claim TTL %s", c.Heartbeat, c.ClaimTTL)
	}
	if c.OneShotGrace <= 0 {
		c.OneShotGrace = DefaultOneShotGrace
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxDuePerTick <= 0 {
		c.MaxDuePerTick = DefaultMaxDuePerTick
	}
	if c.FinishBudget <= 0 {
		c.FinishBudget = DefaultFinishBudget
	}
	if c.Limit == nil {
		c.Limit = func(string) split.Limit { return split.Limit{} }
	}
	if c.Delivered == nil {
		c.Delivered = func() {}
	}
	return nil
}

// Scheduler fires jobs' occurrences: each exactly once across processes on
// one database, through fire claims kept alive by heartbeats.
type Scheduler struct {
	db     *store.DB
	clk    clock.Clock
	faults *faultpoint.Set
	live   outbox.Liveness
	log    *slog.Logger
	cfg    Config

	wake     chan struct{}
	running  sync.WaitGroup
	mu       sync.Mutex
	zones    map[string]*time.Location
	inflight map[int64]bool
	runCtx   context.Context // set by Start: executions run under it
	closed   bool            // set when Run returns: no execution starts after
	// pendingReruns are reruns claimed by Recover before Run started.
	pendingReruns []claim
	lastTick      atomic.Int64 // unix nanos of the last completed tick's instant
}

// New returns a Scheduler. faults and log may be nil.
func New(db *store.DB, faults *faultpoint.Set, live outbox.Liveness, log *slog.Logger, cfg Config) (*Scheduler, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{
		db: db, clk: db.Clock(), faults: faults, live: live, log: log, cfg: cfg,
		wake: make(chan struct{}, 1), zones: map[string]*time.Location{}, inflight: map[int64]bool{},
	}, nil
}

// Config returns the scheduler's configuration with defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Notify tells the scheduler to look again now (a job was created or
// changed).
func (s *Scheduler) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// zone resolves a job's zone name, caching loaded zones for this scheduler.
func (s *Scheduler) zone(name string) (*time.Location, error) {
	if name == "" {
		return s.cfg.ServerZone, nil
	}
	s.mu.Lock()
	loc, ok := s.zones[name]
	s.mu.Unlock()
	if ok {
		return loc, nil
	}
	loc, err := LoadZone(name, s.cfg.ServerZone)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.zones[name] = loc
	s.mu.Unlock()
	return loc, nil
}

// ScheduleOf parses job j's schedule in its zone.
func (s *Scheduler) ScheduleOf(j Job) (*Schedule, error) {
	loc, err := s.zone(j.Zone)
	if err != nil {
		return nil, err
	}
	return ParseSchedule(j.Spec, loc, j.Anchor)
}

// TickReport is what one tick did.
type TickReport struct {
	// At is the instant the tick ran at.
	At time.Time
	// Started are the executions this tick claimed and started.
	Started []int64
	// NotAcquired counts occurrences another process claimed first.
	NotAcquired int
	// Missed counts occurrences recorded as missed.
	Missed int
	// Interrupted counts executions of dead owners marked interrupted.
	Interrupted int
}

// ErrNotRunning: a manual run was asked of a scheduler whose Run has not
// started (or has returned).
var ErrNotRunning = errors.New("the scheduler is not running")

// errNotAcquired: another process advanced the job first.
var errNotAcquired = errors.New("occurrence claimed by another process")

// RunOnce is one tick: it marks executions of dead owners interrupted, then
// claims every due occurrence (each claim in the transaction that advances
// the job's next occurrence) and starts its execution under runCtx. It
// returns what it did.
func (s *Scheduler) RunOnce(ctx, runCtx context.Context) (TickReport, error) {
	now := s.clk.Now().UTC()
	rep := TickReport{At: now}
	n, reruns, err := s.recoverOrphans(ctx)
	rep.Interrupted = n
	if err != nil {
		return rep, err
	}
	for _, c := range reruns {
		s.start(runCtx, c)
		rep.Started = append(rep.Started, c.exec.ID)
	}
	due, err := s.dueJobs(ctx, now)
	if err != nil {
		return rep, err
	}
	for _, d := range due {
		if err := s.faults.Hit(ctx, faultpoint.CronDue); err != nil {
			return rep, err
		}
		claims, missed, err := s.claimJob(ctx, d.id, d.next)
		rep.Missed += missed
		switch {
		case errors.Is(err, errNotAcquired):
			rep.NotAcquired++
			continue
		case err != nil:
			s.log.Error("claim occurrence", "job", d.id, "slot", d.next, "err", err)
			continue
		}
		for _, c := range claims {
			if err := s.faults.Hit(ctx, faultpoint.CronClaimed); err != nil {
				return rep, err
			}
			s.start(runCtx, c)
			rep.Started = append(rep.Started, c.exec.ID)
		}
	}
	s.lastTick.Store(now.UnixNano())
	return rep, nil
}

type dueJob struct {
	id   int64
	next time.Time
}

// dueJobs reads the jobs whose next occurrence is at or before now: one
// probe of the jobs_due index.
func (s *Scheduler) dueJobs(ctx context.Context, now time.Time) ([]dueJob, error) {
	var out []dueJob
	err := s.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, next_run_at FROM jobs
			WHERE paused = 0 AND deleted = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?
			ORDER BY next_run_at LIMIT ?`, store.FormatTime(now), s.cfg.MaxDuePerTick)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d dueJob
			var next string
			if err := rows.Scan(&d.id, &next); err != nil {
				return err
			}
			if d.next, err = store.ParseTime(next); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("scan due jobs: %w", err)
	}
	return out, nil
}

// claim is an execution this process holds the fire claim of, with its job.
type claim struct {
	exec Execution
	job  Job
}

// plan is what a claim fires and what it records as missed.
type plan struct {
	fire        []time.Time // ascending
	catchUp     map[time.Time]bool
	missed      int
	atLeast     bool // missed is a lower bound (the scan was capped)
	firstMissed time.Time
	lastMissed  time.Time
	reason      string
}

// decide applies the catch-up policy of SPEC §5 to the occurrences due in
// [seen, now]: those within the grace fire (late but on time); older ones
// were missed, and the policy decides which of them still fire.
func (s *Scheduler) decide(j Job, sched *Schedule, seen, now time.Time) plan {
	var p plan
	p.catchUp = map[time.Time]bool{}
	grace := s.GraceFor(j, sched)
	if sched.Kind() == KindOneShot {
		if late := now.Sub(seen); late > grace {
			p.missed, p.firstMissed, p.lastMissed = 1, seen, seen
			p.reason = fmt.Sprintf("one-shot missed by %s, beyond its grace of %s; it never fires", late.Round(time.Second), grace)
		} else {
			p.fire = []time.Time{seen}
		}
		return p
	}
	latest, ok := sched.Prev(now)
	if !ok || latest.Before(seen) {
		return p
	}
	// Walk back from the latest due occurrence through the ones within the
	// grace; cursor ends on the newest missed one (older than the grace).
	var inGrace []time.Time
	cursor, valid := latest, true
	for now.Sub(cursor) <= grace && len(inGrace) < MaxCatchUpCap {
		inGrace = append(inGrace, cursor)
		cursor, valid = sched.Prev(cursor.Add(-time.Nanosecond))
		if !valid || cursor.Before(seen) {
			valid = false
			break
		}
	}
	reverse(inGrace)
	if !valid {
		p.fire = inGrace
		return p
	}
	all, truncated := sched.Occurrences(seen, cursor.Add(time.Nanosecond), maxCatchUpScan)
	total := len(all)
	p.atLeast = truncated
	p.firstMissed = seen
	// tail: the newest missed occurrences, up to the catch-up cap, ascending.
	var tail []time.Time
	for t, ok := cursor, true; ok && !t.Before(seen) && len(tail) < j.CatchUpCap; t, ok = sched.Prev(t.Add(-time.Nanosecond)) {
		tail = append(tail, t)
	}
	reverse(tail)
	prevOf := func(t time.Time) time.Time { p, _ := sched.Prev(t.Add(-time.Nanosecond)); return p }
	switch {
	case j.CatchUp == CatchUpLatest && len(inGrace) == 0:
		p.fire = []time.Time{cursor}
		p.catchUp[cursor] = true
		p.missed = total - 1
		p.lastMissed = prevOf(cursor)
	case j.CatchUp == CatchUpAll:
		for _, t := range tail {
			p.catchUp[t] = true
		}
		p.fire = append(tail, inGrace...)
		p.missed = total - len(tail)
		p.lastMissed = prevOf(tail[0])
	default: // skip; or latest when a more recent occurrence is on time
		p.fire = inGrace
		p.missed = total
		p.lastMissed = cursor
	}
	if p.missed > 0 {
		bound := ""
		if p.atLeast {
			bound = "at least "
		}
		p.reason = fmt.Sprintf("%s%d occurrence(s) missed while no scheduler ran (catch-up %s, grace %s)", bound, p.missed, j.CatchUp, grace)
	}
	return p
}

func reverse(ts []time.Time) {
	for i, k := 0, len(ts)-1; i < k; i, k = i+1, k-1 {
		ts[i], ts[k] = ts[k], ts[i]
	}
}

// claimJob claims the due occurrences of job id whose next occurrence was
// read as seen. In one transaction it advances the job's next occurrence
// (a CAS on the value it read: of several processes exactly one wins),
// inserts a claimed execution per occurrence to fire (UNIQUE (job, kind,
// slot)) and records what was missed. A loser records its attempt as
// not acquired and returns errNotAcquired.
func (s *Scheduler) claimJob(ctx context.Context, id int64, seen time.Time) ([]claim, int, error) {
	var claims []claim
	var missed int
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		claims, missed = nil, 0
		j, err := getJobTx(ctx, tx, id)
		if errors.Is(err, ErrNotFound) {
			return errNotAcquired
		}
		if err != nil {
			return err
		}
		if j.Paused || !j.NextRunAt.Equal(seen) {
			return errNotAcquired
		}
		sched, err := s.ScheduleOf(j)
		if err != nil {
			return fmt.Errorf("job %d: %w", id, err)
		}
		now := tx.Now
		p := s.decide(j, sched, seen, now)
		next, _ := sched.Next(now)
		nowText := store.FormatTime(now)
		var lastMissed sql.NullString
		var reason any
		if p.missed > 0 {
			lastMissed = store.NullTime(p.lastMissed)
			reason = p.reason
		}
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET next_run_at = ?, missed = missed + ?,
			last_missed_at = coalesce(?, last_missed_at), last_missed_reason = coalesce(?, last_missed_reason), updated_at = ?
			WHERE id = ? AND next_run_at = ? AND paused = 0 AND deleted = 0`,
			store.NullTime(next), p.missed, lastMissed, reason, nowText, id, store.FormatTime(seen))
		if err != nil {
			return fmt.Errorf("advance job %d: %w", id, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errNotAcquired
		}
		if p.missed > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO missed_occurrences (job_id, first_slot, last_slot, count, reason, at)
				VALUES (?, ?, ?, ?, ?, ?)`, id, store.FormatTime(p.firstMissed), store.FormatTime(p.lastMissed),
				p.missed, p.reason, nowText); err != nil {
				return fmt.Errorf("record missed occurrences of job %d: %w", id, err)
			}
		}
		missed = p.missed
		expires := now.Add(s.cfg.ClaimTTL)
		for _, slot := range p.fire {
			e, ok, err := s.insertExecution(ctx, tx, j, ExecScheduled, slot, now, expires, p.catchUp[slot])
			if err != nil {
				return err
			}
			outcome := "not_acquired"
			if ok {
				outcome = "acquired"
				claims = append(claims, claim{exec: e, job: j})
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO fire_attempts (job_id, slot, owner, outcome, at) VALUES (?, ?, ?, ?, ?)`,
				id, store.FormatTime(slot), s.cfg.Owner, outcome, nowText); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, errNotAcquired) {
		if rerr := s.recordNotAcquired(ctx, id, seen); rerr != nil {
			s.log.Warn("record lost fire claim", "job", id, "err", rerr)
		}
		return nil, 0, err
	}
	return claims, missed, err
}

func (s *Scheduler) recordNotAcquired(ctx context.Context, id int64, slot time.Time) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO fire_attempts (job_id, slot, owner, outcome, at) VALUES (?, ?, ?, 'not_acquired', ?)`,
			id, store.FormatTime(slot), s.cfg.Owner, store.FormatTime(tx.Now))
		return err
	})
}

// insertExecution inserts a claimed execution owned by this process; ok is
// false when (job, kind, slot) already has one.
func (s *Scheduler) insertExecution(ctx context.Context, tx *store.Tx, j Job, kind ExecKind, slot, now, expires time.Time, catchUp bool) (Execution, bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT INTO executions (job_id, kind, slot, state, late_ms, catchup, owner,
		fencing_token, claim_expires_at, claimed_at) VALUES (?, ?, ?, 'claimed', ?, ?, ?, 1, ?, ?)
		ON CONFLICT (job_id, kind, slot) DO NOTHING`,
		j.ID, string(kind), store.FormatTime(slot), now.Sub(slot).Milliseconds(), catchUp, s.cfg.Owner,
		store.FormatTime(expires), store.FormatTime(now))
	if err != nil {
		return Execution{}, false, fmt.Errorf("claim %s occurrence %s of job %d: %w", kind, slot.Format(time.RFC3339), j.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return Execution{}, false, nil
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Execution{}, false, err
	}
	return Execution{ID: id, JobID: j.ID, Kind: kind, Slot: slot, State: ExecClaimed, Owner: s.cfg.Owner,
		FencingToken: 1, ClaimExpiresAt: expires, ClaimedAt: now, Late: now.Sub(slot), CatchUp: catchUp}, true, nil
}

// RunNow starts a manual run of job id at once, paused or not. It never
// moves or consumes the job's next occurrence. Errors: ErrNotFound, or a
// scheduler that is not running.
func (s *Scheduler) RunNow(ctx context.Context, id int64) (Execution, error) {
	s.mu.Lock()
	runCtx := s.runCtx
	closed := s.closed
	s.mu.Unlock()
	if runCtx == nil || closed {
		return Execution{}, fmt.Errorf("run job %d: %w", id, ErrNotRunning)
	}
	var c claim
	err := s.db.Write(ctx, func(tx *store.Tx) error {
		j, err := getJobTx(ctx, tx, id)
		if err != nil {
			return err
		}
		for slot := tx.Now; ; slot = slot.Add(time.Nanosecond) {
			e, ok, err := s.insertExecution(ctx, tx, j, ExecManual, slot, tx.Now, tx.Now.Add(s.cfg.ClaimTTL), false)
			if err != nil {
				return err
			}
			if ok {
				e.Late = 0
				c = claim{exec: e, job: j}
				return nil
			}
		}
	})
	if err != nil {
		return Execution{}, err
	}
	s.start(runCtx, c)
	return c.exec, nil
}

// recoverOrphans marks interrupted (cause "owner lost: …") every claimed or
// running execution whose owner is dead or whose claim expired — once: each
// is a CAS on (id, state, fencing token). For jobs that opt in, it claims a
// rerun of the occurrence (at most one per occurrence) and returns it.
func (s *Scheduler) recoverOrphans(ctx context.Context) (int, []claim, error) {
	type orphan struct {
		id, job int64
		kind    ExecKind
		slot    time.Time
		state   ExecState
		owner   string
		fence   int64
		expires time.Time
		pgid    int
	}
	var cands []orphan
	err := s.db.Read(ctx, func(tx *store.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, job_id, kind, slot, state, coalesce(owner, ''), fencing_token, claim_expires_at,
			coalesce(pgid, 0) FROM executions WHERE state IN ('claimed', 'running') AND (owner IS NULL OR owner != ?)`, s.cfg.Owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var o orphan
			var kind, state, slot string
			var exp sql.NullString
			if err := rows.Scan(&o.id, &o.job, &kind, &slot, &state, &o.owner, &o.fence, &exp, &o.pgid); err != nil {
				return err
			}
			o.kind, o.state = ExecKind(kind), ExecState(state)
			if o.slot, err = store.ParseTime(slot); err != nil {
				return err
			}
			if o.expires, err = store.ParseNullTime(exp); err != nil {
				return err
			}
			cands = append(cands, o)
		}
		return rows.Err()
	})
	if err != nil || len(cands) == 0 {
		return 0, nil, err
	}
	now := s.clk.Now()
	var lost []orphan
	var why []string
	for _, o := range cands {
		switch {
		case !o.expires.After(now):
			lost, why = append(lost, o), append(why, fmt.Sprintf("owner lost: claim of %s expired at %s without a heartbeat", o.owner, o.expires.Format(time.RFC3339)))
		case s.live == nil || !s.live.Alive(o.owner):
			lost, why = append(lost, o), append(why, fmt.Sprintf("owner lost: process %s died", o.owner))
		}
	}
	if len(lost) == 0 {
		return 0, nil, nil
	}
	var marked int
	var reruns []claim
	var reap []orphan
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		marked, reruns, reap = 0, nil, nil
		for i, o := range lost {
			res, err := tx.ExecContext(ctx, `UPDATE executions SET state = 'interrupted', cause = ?, owner = NULL,
				claim_expires_at = NULL, finished_at = ? WHERE id = ? AND state = ? AND fencing_token = ? AND coalesce(owner, '') = ?`,
				why[i], store.FormatTime(tx.Now), o.id, string(o.state), o.fence, o.owner)
			if err != nil {
				return fmt.Errorf("interrupt execution %d: %w", o.id, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue
			}
			marked++
			reap = append(reap, o)
			s.log.Warn("execution interrupted", "execution", o.id, "job", o.job, "slot", o.slot, "cause", why[i])
			if o.kind == ExecRerun {
				continue
			}
			j, err := getJobTx(ctx, tx, o.job)
			if errors.Is(err, ErrNotFound) || (err == nil && !j.RerunInterrupted) {
				continue
			}
			if err != nil {
				return err
			}
			e, ok, err := s.insertExecution(ctx, tx, j, ExecRerun, o.slot, tx.Now, tx.Now.Add(s.cfg.ClaimTTL), false)
			if err != nil {
				return err
			}
			if ok {
				reruns = append(reruns, claim{exec: e, job: j})
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, fmt.Errorf("recover orphaned executions: %w", err)
	}
	// Nothing a run held outlives it (SPEC §1): a job process its dead owner
	// left behind is killed, once the run is recorded as interrupted.
	for _, o := range reap {
		if o.pgid > 0 && reapExecution(o.id, o.pgid) {
			s.log.Warn("killed the process group an interrupted execution left", "execution", o.id, "pgid", o.pgid)
		}
	}
	return marked, reruns, nil
}

// Recover marks the executions of dead owners interrupted, before this
// process serves (SPEC §5 boot recovery). Reruns it claims start when Run
// starts.
func (s *Scheduler) Recover(ctx context.Context) (int, error) {
	n, reruns, err := s.recoverOrphans(ctx)
	if err != nil {
		return n, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingReruns = append(s.pendingReruns, reruns...)
	return n, nil
}

// Start begins Run in a goroutine, having made the scheduler ready for
// manual runs before it returns. The channel receives Run's result.
func (s *Scheduler) Start(ctx, runCtx context.Context) <-chan error {
	s.mu.Lock()
	s.runCtx = runCtx
	s.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, runCtx) }()
	return done
}

// Run ticks until ctx is done, then waits for executions in flight (they
// run under runCtx, which the caller cancels to cut a drain short: a cut
// run ends cancelled with cause "shutdown"). No execution starts after it
// returns.
func (s *Scheduler) Run(ctx, runCtx context.Context) error {
	s.mu.Lock()
	s.runCtx = runCtx
	pending := s.pendingReruns
	s.pendingReruns = nil
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.running.Wait()
	}()
	for _, c := range pending {
		s.start(runCtx, c)
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		if _, err := s.RunOnce(ctx, runCtx); err != nil && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
			s.log.Error("scheduler tick", "err", err)
		}
		at, _, err := s.nextWake(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("next wake", "err", err)
		}
		clock.Idle(ctx, s.clk, s.wake, at, s.cfg.PollInterval)
	}
}

// nextWake is the earliest instant a tick could find work: the next due
// occurrence, or the expiry of another process's claim.
func (s *Scheduler) nextWake(ctx context.Context) (time.Time, bool, error) {
	var a, b sql.NullString
	err := s.db.QueryRow(ctx, `SELECT
		(SELECT min(next_run_at) FROM jobs WHERE paused = 0 AND deleted = 0 AND next_run_at IS NOT NULL),
		(SELECT min(claim_expires_at) FROM executions WHERE state IN ('claimed', 'running') AND owner != ?)`,
		s.cfg.Owner).Scan(&a, &b)
	if err != nil {
		return time.Time{}, false, err
	}
	var best time.Time
	for _, v := range []sql.NullString{a, b} {
		t, err := store.ParseNullTime(v)
		if err != nil {
			return time.Time{}, false, err
		}
		if !t.IsZero() && (best.IsZero() || t.Before(best)) {
			best = t
		}
	}
	return best, !best.IsZero(), nil
}

// LastTick returns the instant the last completed tick ran at (zero before
// the first).
func (s *Scheduler) LastTick() time.Time {
	n := s.lastTick.Load()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// Settled reports whether everything due at or before at is done: this
// process's clock has reached at, a tick has run at or after it, no job is
// due at or before it, and none of this process's executions is in flight.
// When not settled, it says why.
func (s *Scheduler) Settled(ctx context.Context, at time.Time) (bool, []string, error) {
	var why []string
	if now := s.clk.Now(); now.Before(at) {
		why = append(why, fmt.Sprintf("clock at %s, before %s", now.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
	}
	if s.lastTick.Load() == 0 {
		why = append(why, "no tick yet")
	} else if last := time.Unix(0, s.lastTick.Load()); last.Before(at) {
		why = append(why, fmt.Sprintf("last tick at %s", last.UTC().Format(time.RFC3339Nano)))
	}
	var due int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE paused = 0 AND deleted = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?`,
		store.FormatTime(at)).Scan(&due); err != nil {
		return false, nil, err
	}
	if due > 0 {
		why = append(why, fmt.Sprintf("%d job(s) due", due))
	}
	s.mu.Lock()
	n := len(s.inflight)
	s.mu.Unlock()
	if n > 0 {
		why = append(why, fmt.Sprintf("%d execution(s) in flight", n))
	}
	return len(why) == 0, why, nil
}

// Wait blocks until every execution this scheduler started has ended.
func (s *Scheduler) Wait() { s.running.Wait() }

// start runs a claimed execution in its own goroutine.
func (s *Scheduler) start(runCtx context.Context, c claim) {
	s.mu.Lock()
	if s.closed {
		// Run has returned: the claim is left to expire, and recovery
		// records the execution as interrupted.
		s.mu.Unlock()
		s.log.Warn("execution not started: the scheduler has stopped", "execution", c.exec.ID)
		return
	}
	s.inflight[c.exec.ID] = true
	s.running.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.running.Done()
		defer func() {
			s.mu.Lock()
			delete(s.inflight, c.exec.ID)
			s.mu.Unlock()
			s.Notify()
		}()
		s.execute(runCtx, c)
	}()
}

// errClaimLost: the heartbeat found the execution no longer ours.
var errClaimLost = errors.New("fire claim lost")

// execute moves a claimed execution to running, runs its action under the
// run budget with a heartbeat refreshing the claim, and writes its terminal
// record (with its output's delivery, in the same transaction).
func (s *Scheduler) execute(runCtx context.Context, c claim) {
	e, j := c.exec, c.job
	log := s.log.With("execution", e.ID, "job", j.Name, "slot", e.Slot.Format(time.RFC3339), "kind", e.Kind)
	started, err := s.markRunning(runCtx, e)
	if err != nil || !started {
		if err != nil {
			log.Error("start execution", "err", err)
		}
		return
	}
	if err := s.faults.Hit(runCtx, faultpoint.CronStarted); err != nil {
		log.Error("fault point", "err", err)
	}
	actCtx, stopAct := context.WithCancelCause(runCtx)
	defer stopAct(nil)
	hbStop := make(chan struct{})
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		s.heartbeat(e, hbStop, stopAct, log)
	}()
	budgetCtx, cancelBudget := clock.WithTimeout(actCtx, s.clk, j.Budget)
	loc, _ := s.zone(j.Zone)
	if loc == nil {
		loc = time.UTC
	}
	res := j.Action.Run(budgetCtx, s.clk, RunInfo{
		JobID: j.ID, Job: j.Name, Slot: e.Slot, Local: e.Slot.In(loc), Zone: loc.String(),
		Manual: e.Kind == ExecManual, ExecutionID: e.ID,
		Started: func(pgid int) { s.recordPgid(e, pgid, log) },
	})
	budgetErr := budgetCtx.Err()
	cancelBudget()
	close(hbStop)
	<-hbDone
	if context.Cause(actCtx) == errClaimLost {
		log.Warn("execution lost its fire claim; another process recorded its end")
		return
	}
	if err := s.faults.Hit(runCtx, faultpoint.CronFinished); err != nil {
		log.Error("fault point", "err", err)
	}
	state, cause := ExecSucceeded, "ok"
	switch {
	case res.Err == nil:
	case errors.Is(budgetErr, context.DeadlineExceeded):
		state, cause = ExecCancelled, "deadline"
	case runCtx.Err() != nil:
		state, cause = ExecCancelled, "shutdown"
	default:
		state, cause = ExecFailed, res.Cause
		if cause == "" {
			cause = "error"
		}
		// The error adds to the cause only when it says more ("exec sh:
		// exit status 3" does not; "exec nope: not found in PATH" does).
		if res.Err != nil && !strings.HasSuffix(res.Err.Error(), cause) {
			cause += ": " + res.Err.Error()
		}
	}
	if err := s.finish(e, j, state, cause, res); err != nil {
		log.Error("write terminal record", "state", state, "cause", cause, "err", err)
		return
	}
	log.Info("execution finished", "state", state, "cause", cause)
}

// recordPgid stores an exec action's process group on its execution, so
// that recovery can reap the group if this process dies mid-run.
func (s *Scheduler) recordPgid(e Execution, pgid int, log *slog.Logger) {
	err := s.db.Write(context.Background(), func(tx *store.Tx) error {
		_, err := tx.ExecContext(context.Background(), `UPDATE executions SET pgid = ?
			WHERE id = ? AND state = 'running' AND owner = ? AND fencing_token = ?`, pgid, e.ID, s.cfg.Owner, e.FencingToken)
		return err
	})
	if err != nil {
		log.Warn("record process group", "pgid", pgid, "err", err)
	}
}

func (s *Scheduler) markRunning(ctx context.Context, e Execution) (bool, error) {
	var ok bool
	err := s.db.Write(context.WithoutCancel(ctx), func(tx *store.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE executions SET state = 'running', started_at = ?, heartbeat_at = ?,
			claim_expires_at = ? WHERE id = ? AND state = 'claimed' AND owner = ? AND fencing_token = ?`,
			store.FormatTime(tx.Now), store.FormatTime(tx.Now), store.FormatTime(tx.Now.Add(s.cfg.ClaimTTL)),
			e.ID, s.cfg.Owner, e.FencingToken)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		ok = n == 1
		return err
	})
	return ok, err
}

// heartbeat refreshes the execution's fire claim every Heartbeat until
// stop. It shares no lock with the running action, so an action that holds
// one can never starve it. When the refresh finds the claim gone (another
// process took it over) it cancels the action.
func (s *Scheduler) heartbeat(e Execution, stop <-chan struct{}, cancel context.CancelCauseFunc, log *slog.Logger) {
	ctx := context.Background()
	for {
		t := s.clk.NewTimer(s.cfg.Heartbeat)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C():
		}
		if err := s.faults.Hit(ctx, faultpoint.CronHeartbeat); err != nil {
			log.Warn("heartbeat fault", "err", err)
			continue
		}
		var held bool
		err := s.db.Write(ctx, func(tx *store.Tx) error {
			res, err := tx.ExecContext(ctx, `UPDATE executions SET claim_expires_at = ?, heartbeat_at = ?
				WHERE id = ? AND state IN ('claimed', 'running') AND owner = ? AND fencing_token = ?`,
				store.FormatTime(tx.Now.Add(s.cfg.ClaimTTL)), store.FormatTime(tx.Now), e.ID, s.cfg.Owner, e.FencingToken)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			held = n == 1
			return err
		})
		if err != nil {
			log.Warn("heartbeat not written; the claim holds until its expiry", "err", err)
			continue
		}
		if !held {
			cancel(errClaimLost)
			return
		}
	}
}

// finish writes the terminal record with a CAS on (running, owner, fencing
// token) and, for a successful run of a delivering job, records its output
// in the outbox in the same transaction (idempotency key derived from job,
// kind and slot). It retries while the store is busy, within FinishBudget of
// real time, so the record is written whatever the store's momentary health.
func (s *Scheduler) finish(e Execution, j Job, state ExecState, cause string, res Result) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.FinishBudget)
	defer cancel()
	deliver := state == ExecSucceeded && j.Platform != "" && strings.TrimSpace(res.Output) != ""
	var recorded bool
	var err error
	for try := 0; ; try++ {
		err = s.db.Write(ctx, func(tx *store.Tx) error {
			var msgID any
			if deliver {
				key := fmt.Sprintf("cron-%d-%s-%s", j.ID, e.Kind, store.FormatTime(e.Slot))
				id, _, err := outbox.RecordTx(ctx, tx, outbox.NewMessage{Platform: j.Platform, ChatID: j.ChatID, Text: res.Output, IdempotencyKey: key}, s.cfg.Limit(j.Platform))
				if err != nil {
					return fmt.Errorf("record output delivery: %w", err)
				}
				msgID = id
			}
			r, err := tx.ExecContext(ctx, `UPDATE executions SET state = ?, cause = ?, output = ?, truncated = ?,
				message_id = ?, owner = NULL, claim_expires_at = NULL, finished_at = ?
				WHERE id = ? AND state = 'running' AND owner = ? AND fencing_token = ?`,
				string(state), cause, res.Output, res.Truncated, msgID, store.FormatTime(tx.Now), e.ID, s.cfg.Owner, e.FencingToken)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n == 0 {
				return errClaimLost
			}
			recorded = deliver
			return nil
		})
		if err == nil || !errors.Is(err, store.ErrBusy) || ctx.Err() != nil {
			break
		}
		if clock.Sleep(ctx, clock.Real{}, time.Duration(try+1)*50*time.Millisecond) != nil {
			break
		}
	}
	if recorded {
		s.cfg.Delivered()
	}
	return err
}
