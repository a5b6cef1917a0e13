package cron_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/cron"
	"herald/internal/clock"
	"herald/internal/store"
)

type liveSet struct {
	mu   sync.Mutex
	dead map[string]bool
}

func (l *liveSet) Alive(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.dead[id]
}

func (l *liveSet) kill(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead == nil {
		l.dead = map[string]bool{}
	}
	l.dead[id] = true
}

type schedEnv struct {
	t    *testing.T
	path string
	clk  *clock.Manual
	live *liveSet
	ctx  context.Context
}

func newSchedEnv(t *testing.T, start time.Time) *schedEnv {
	return &schedEnv{t: t, path: filepath.Join(t.TempDir(), store.FileName), clk: clock.NewManual(start), live: &liveSet{}, ctx: context.Background()}
}

func (e *schedEnv) scheduler(owner string, mod ...func(*cron.Config)) *cron.Scheduler {
	e.t.Helper()
	db, err := store.Open(e.ctx, store.Options{Path: e.path}, e.clk)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	ny, _ := time.LoadLocation("America/New_York")
	cfg := cron.Config{Owner: owner, ServerZone: ny}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := cron.New(db, nil, e.live, nil, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// tick runs one tick and waits for the executions it started.
func (e *schedEnv) tick(s *cron.Scheduler) cron.TickReport {
	e.t.Helper()
	rep, err := s.RunOnce(e.ctx, e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	s.Wait()
	return rep
}

func ptr[T any](v T) *T { return &v }

func messageJob(name, spec, zone string) cron.JobDef {
	return cron.JobDef{Name: ptr(name), Spec: ptr(spec), Zone: ptr(zone), Platform: ptr("p"), ChatID: ptr("c"),
		Action: &cron.Action{Kind: cron.ActionMessage, Text: "{{.Job}} at {{.Local.Format \"2006-01-02 15:04 MST\"}}"}}
}

func (e *schedEnv) create(s *cron.Scheduler, def cron.JobDef) cron.Job {
	e.t.Helper()
	j, err := s.CreateJob(e.ctx, def)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *schedEnv) executions(s *cron.Scheduler, job int64) []cron.Execution {
	e.t.Helper()
	es, err := s.ListExecutions(e.ctx, job, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Reverse(es)
	return es
}

func slots(es []cron.Execution, loc *time.Location) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Slot.In(loc).Format("2006-01-02T15:04Z07:00")+"/"+string(e.State))
	}
	return out
}

func TestEveryOccurrenceFiresOnceAcrossTheSpringGap(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	e := newSchedEnv(t, time.Date(2026, 3, 8, 1, 0, 0, 0, ny))
	s := e.scheduler("a")
	fixed := e.create(s, messageJob("fixed", "30 2 * * *", "America/New_York"))
	hourly := e.create(s, messageJob("hourly", "0 * * * *", "America/New_York"))
	for i := 0; i < 4*60; i++ { // four hours, a tick a minute
		e.clk.Advance(time.Minute)
		e.tick(s)
	}
	if got, want := slots(e.executions(s, fixed.ID), ny), []string{"2026-03-08T03:00-04:00/succeeded"}; !slices.Equal(got, want) {
		t.Fatalf("30 2 * * * fired %v, want %v (the gap time fires at the first instant after the gap)", got, want)
	}
	want := []string{"2026-03-08T03:00-04:00/succeeded", "2026-03-08T04:00-04:00/succeeded", "2026-03-08T05:00-04:00/succeeded", "2026-03-08T06:00-04:00/succeeded"}
	if got := slots(e.executions(s, hourly.ID), ny); !slices.Equal(got, want) {
		t.Fatalf("0 * * * * fired %v, want %v (02:00 does not exist)", got, want)
	}
	j, _ := s.GetJob(e.ctx, hourly.ID)
	if !j.NextRunAt.After(e.clk.Now()) {
		t.Fatalf("next occurrence %v is not after now %v", j.NextRunAt, e.clk.Now())
	}
	es := e.executions(s, fixed.ID)
	if es[0].MessageID == 0 || !strings.Contains(es[0].Output, "fixed at 2026-03-08 03:00 EDT") {
		t.Fatalf("execution output %q message %d", es[0].Output, es[0].MessageID)
	}
}

func TestTwoSchedulersFireEachOccurrenceOnce(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	a := e.scheduler("a")
	b := e.scheduler("b")
	job := e.create(a, messageJob("quarter", "*/15 * * * *", "UTC"))
	for i := 0; i < 8; i++ {
		e.clk.Advance(15 * time.Minute)
		var wg sync.WaitGroup
		for _, s := range []*cron.Scheduler{a, b} {
			wg.Add(1)
			go func() { defer wg.Done(); e.tick(s) }()
		}
		wg.Wait()
	}
	es := e.executions(a, job.ID)
	if len(es) != 8 {
		t.Fatalf("%d executions for 8 occurrences: %v", len(es), slots(es, time.UTC))
	}
	for _, x := range es {
		if x.State != cron.ExecSucceeded {
			t.Fatalf("execution %d ended %s (%s)", x.ID, x.State, x.Cause)
		}
	}
}

func TestCatchUpAfterAnOutage(t *testing.T) {
	london, _ := time.LoadLocation("Europe/London")
	tests := []struct {
		name    string
		policy  cron.CatchUp
		outage  time.Duration // after 08:59 on day 1
		want    []string
		missed  int
		catchup bool
	}{
		{"latest fires the most recent missed daily occurrence once", cron.CatchUpLatest, 3*24*time.Hour + 5*time.Hour,
			[]string{"2026-06-04T09:00+01:00/succeeded"}, 3, true},
		{"skip fires none", cron.CatchUpSkip, 3*24*time.Hour + 5*time.Hour, nil, 4, false},
		{"all fires each, oldest first", cron.CatchUpAll, 2*24*time.Hour + 5*time.Hour,
			[]string{"2026-06-01T09:00+01:00/succeeded", "2026-06-02T09:00+01:00/succeeded", "2026-06-03T09:00+01:00/succeeded"}, 0, true},
		{"45 minutes late is within the grace: fires late, once", cron.CatchUpSkip, 46 * time.Minute,
			[]string{"2026-06-01T09:00+01:00/succeeded"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newSchedEnv(t, time.Date(2026, 6, 1, 8, 59, 0, 0, london))
			s := e.scheduler("a")
			def := messageJob("brief", "0 9 * * *", "Europe/London")
			def.CatchUp = &tt.policy
			job := e.create(s, def)
			e.clk.Advance(tt.outage)
			e.tick(s)
			es := e.executions(s, job.ID)
			if got := slots(es, london); !slices.Equal(got, tt.want) {
				t.Fatalf("fired %v, want %v", got, tt.want)
			}
			j, _ := s.GetJob(e.ctx, job.ID)
			if j.Missed != tt.missed {
				t.Fatalf("missed = %d (%s), want %d", j.Missed, j.LastMissedReason, tt.missed)
			}
			if len(es) > 0 && es[len(es)-1].CatchUp != tt.catchup {
				t.Fatalf("catch-up flag = %v, want %v", es[len(es)-1].CatchUp, tt.catchup)
			}
			if !j.NextRunAt.After(e.clk.Now()) {
				t.Fatalf("next %v not after now %v", j.NextRunAt, e.clk.Now())
			}
			e.tick(s)
			if again := e.executions(s, job.ID); len(again) != len(es) {
				t.Fatalf("a second tick fired %d more", len(again)-len(es))
			}
		})
	}
}

func TestAOneShotPastItsGraceNeverFires(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	s := e.scheduler("a")
	job := e.create(s, messageJob("once", "at 2026-12-01T09:00", "UTC"))
	e.clk.Advance(time.Hour + 121*time.Second)
	e.tick(s)
	j, _ := s.GetJob(e.ctx, job.ID)
	if es := e.executions(s, job.ID); len(es) != 0 || j.Missed != 1 || !strings.Contains(j.LastMissedReason, "never fires") || !j.NextRunAt.IsZero() {
		t.Fatalf("executions %v, missed %d (%q), next %v", slots(es, time.UTC), j.Missed, j.LastMissedReason, j.NextRunAt)
	}
	_, err := s.CreateJob(e.ctx, messageJob("past", "at 2026-12-01T09:00", "UTC"))
	if err == nil || !strings.Contains(err.Error(), "in the past") {
		t.Fatalf("creating a one-shot in the past = %v", err)
	}
}

func TestAManualRunNeverMovesTheNextOccurrence(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 11, 1, 8, 59, 59, 0, time.UTC))
	s := e.scheduler("a")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, e.ctx) }()
	def := messageJob("daily", "0 9 * * *", "UTC")
	def.Paused = ptr(true)
	job := e.create(s, def)
	before, _ := s.GetJob(e.ctx, job.ID)
	x, err := s.RunNow(e.ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	after, _ := s.GetJob(e.ctx, job.ID)
	got, _ := s.GetExecution(e.ctx, x.ID)
	if got.Kind != cron.ExecManual || got.State != cron.ExecSucceeded || !after.NextRunAt.Equal(before.NextRunAt) {
		t.Fatalf("manual run %+v; next %v → %v", got, before.NextRunAt, after.NextRunAt)
	}
}

func TestADeadOwnersExecutionIsInterruptedOnce(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 11, 1, 8, 59, 0, 0, time.UTC))
	gate := filepath.Join(t.TempDir(), "gate")
	a := e.scheduler("a")
	def := cron.JobDef{Name: ptr("slow"), Spec: ptr("0 9 * * *"), Zone: ptr("UTC"), RerunInterrupted: ptr(true),
		Action: &cron.Action{Kind: cron.ActionExec, Command: []string{"sh", "-c", "while [ ! -f " + gate + " ]; do sleep 0.01; done"}}}
	job := e.create(a, def)
	e.clk.Advance(time.Minute)
	actx, acancel := context.WithCancel(e.ctx)
	if _, err := a.RunOnce(e.ctx, actx); err != nil {
		t.Fatal(err)
	}
	e.live.kill("a") // a is now "dead" as far as others can tell
	b := e.scheduler("b")
	c := e.scheduler("c")
	rb, err := b.RunOnce(e.ctx, e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := c.RunOnce(e.ctx, e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Interrupted+rc.Interrupted != 1 {
		t.Fatalf("interrupted %d + %d times, want once", rb.Interrupted, rc.Interrupted)
	}
	os.WriteFile(gate, nil, 0o644)
	acancel()
	a.Wait()
	b.Wait()
	c.Wait()
	es := e.executions(b, job.ID)
	if len(es) != 2 || es[0].State != cron.ExecInterrupted || !strings.HasPrefix(es[0].Cause, "owner lost") ||
		es[1].Kind != cron.ExecRerun || es[1].State != cron.ExecSucceeded {
		for _, x := range es {
			t.Logf("%+v", x)
		}
		t.Fatal("want the original interrupted (owner lost) and one successful rerun")
	}
}

// TestTheHeartbeatKeepsALongRunsClaim holds a run for twice the claim TTL
// while a contender ticks every 30 virtual seconds: the contender must never
// take it over.
func TestTheHeartbeatKeepsALongRunsClaim(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 11, 1, 8, 59, 0, 0, time.UTC))
	gate := filepath.Join(t.TempDir(), "gate")
	a := e.scheduler("a", func(c *cron.Config) { c.ClaimTTL = 5 * time.Minute; c.Heartbeat = time.Minute })
	contender := e.scheduler("b")
	def := cron.JobDef{Name: ptr("long"), Spec: ptr("0 9 * * *"), Zone: ptr("UTC"), Budget: ptr(time.Hour),
		Action: &cron.Action{Kind: cron.ActionExec, Command: []string{"sh", "-c", "while [ ! -f " + gate + " ]; do sleep 0.01; done"}}}
	job := e.create(a, def)
	e.clk.Advance(time.Minute)
	if _, err := a.RunOnce(e.ctx, e.ctx); err != nil {
		t.Fatal(err)
	}
	started := e.clk.Now()
	var execID int64
	waitUntil(t, "the run to start", func() bool {
		es := e.executions(a, job.ID)
		if len(es) == 1 && es[0].State == cron.ExecRunning {
			execID = es[0].ID
			return true
		}
		return false
	})
	armed(t, e.clk)            // the run budget and the first heartbeat are timed from here
	for i := 1; i <= 20; i++ { // 10 virtual minutes
		e.clk.Advance(30 * time.Second)
		// The beat due by now must have refreshed the claim before the
		// contender looks at it.
		lastBeat := started.Add(e.clk.Now().Sub(started).Truncate(time.Minute))
		waitUntil(t, fmt.Sprintf("a heartbeat at %s (virtual +%ds)", lastBeat.Format(time.RFC3339), i*30), func() bool {
			x, err := a.GetExecution(e.ctx, execID)
			return err == nil && !x.HeartbeatAt.Before(lastBeat)
		})
		armed(t, e.clk) // the next beat is timed from this instant
		if rep := e.tick(contender); rep.Interrupted != 0 {
			t.Fatalf("the contender took over a live claim after %ds", i*30)
		}
	}
	os.WriteFile(gate, nil, 0o644)
	a.Wait()
	es := e.executions(a, job.ID)
	if len(es) != 1 || es[0].State != cron.ExecSucceeded {
		t.Fatalf("executions %v", slots(es, time.UTC))
	}
}

func TestTheRunBudgetCancelsOnTheVirtualClock(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 11, 1, 8, 59, 0, 0, time.UTC))
	s := e.scheduler("a")
	def := cron.JobDef{Name: ptr("stuck"), Spec: ptr("0 9 * * *"), Zone: ptr("UTC"), Budget: ptr(10 * time.Minute),
		Action: &cron.Action{Kind: cron.ActionExec, Command: []string{"sleep", "1000"}}}
	job := e.create(s, def)
	e.clk.Advance(time.Minute)
	if _, err := s.RunOnce(e.ctx, e.ctx); err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(e.ctx, 20*time.Second)
	defer cancel()
	if err := e.clk.WaitForTimers(wait, 2); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(10 * time.Minute)
	s.Wait()
	es := e.executions(s, job.ID)
	if len(es) != 1 || es[0].State != cron.ExecCancelled || es[0].Cause != "deadline" {
		t.Fatalf("execution %+v, want cancelled (deadline)", es)
	}
}

func TestBadJobsAreRefusedWithTheirReason(t *testing.T) {
	e := newSchedEnv(t, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC))
	s := e.scheduler("a")
	tests := []struct {
		name string
		def  cron.JobDef
		want string
	}{
		{"a bad spec", messageJob("x", "61 * * * *", "UTC"), `minute field: 61 out of range`},
		{"an unknown zone", messageJob("x", "0 9 * * *", "Mars/Olympus"), `unknown zone "Mars/Olympus"`},
		{"a zero budget", func() cron.JobDef {
			d := messageJob("x", "0 9 * * *", "UTC")
			d.Budget = ptr(time.Duration(0))
			return d
		}(), "budget"},
		{"a bad name", messageJob("no spaces", "0 9 * * *", "UTC"), `name "no spaces"`},
		{"a message without a target", cron.JobDef{Name: ptr("x"), Spec: ptr("0 9 * * *"), Action: &cron.Action{Kind: cron.ActionMessage, Text: "hi"}}, "needs a platform"},
		{"a bad catch-up", func() cron.JobDef {
			d := messageJob("x", "0 9 * * *", "UTC")
			d.CatchUp = ptr(cron.CatchUp("some"))
			return d
		}(), `catchup "some"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.CreateJob(e.ctx, tt.def); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CreateJob = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	e.create(s, messageJob("dup", "0 9 * * *", "UTC"))
	if _, err := s.CreateJob(e.ctx, messageJob("dup", "0 9 * * *", "UTC")); err == nil {
		t.Fatal("a second job with the same name was created")
	}
}

// armed waits until the run budget's and the heartbeat's timers are both
// pending on the manual clock.
func armed(t *testing.T, clk *clock.Manual) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := clk.WaitForTimers(ctx, 2); err != nil {
		t.Fatalf("the heartbeat timer was not re-armed: %v", err)
	}
}

// waitUntil polls cond until it holds, failing the test with what was
// awaited after a deadline.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
