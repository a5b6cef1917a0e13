// Package cronsoak_test is the DST soak: the real scheduler in child
// processes — two replicas on one data directory — on one file-backed
// virtual clock, about 30 virtual days per scenario with a DST change
// inside, through manual runs, a failing job, a delivery that fails then
// succeeds, a run held past the fire-claim TTL, outages, and a SIGKILL
// mid-run. After every step of the clock, once every process has settled
// at that instant, the set of fired occurrences must equal the model's
// (occurrences from the independent tzoracle, catch-up per SPEC §5), and
// every job's stored next occurrence must equal the model's and lie after
// now. At the end the termination invariants of SPEC §1 must hold.
//
// Three shorter scenarios put an outage across the change itself, so that
// the first tick after it applies the catch-up policy across a gap or both
// passes of a fold.
//
// Reproduce a run with HERALD_SEED=<seed> (printed first, and in every
// failure). -short runs a week per scenario instead of a month.
package cronsoak_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald/e2e/harness"
)

const (
	claimTTL  = 5 * time.Minute
	heartbeat = time.Minute
	// settlePoll is how often a process is asked whether it settled.
	settlePoll = 3 * time.Millisecond
	// maxStep bounds a step of the clock when nothing is due sooner.
	maxStep = 3 * time.Hour
	// localLayout renders an occurrence in its zone, as the message
	// jobs' template does.
	localLayout = "2006-01-02T15:04:05Z07:00"
)

func TestDSTSoak(t *testing.T) {
	seed := uint64(rand.Int64())
	if v := os.Getenv("HERALD_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HERALD_SEED=%q: %v", v, err)
		}
		seed = s
	}
	t.Logf("seed %d (reproduce with HERALD_SEED=%d)", seed, seed)
	bins := harness.Build(t)
	for i, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			began := time.Now()
			var s *soak
			t.Cleanup(func() {
				if t.Failed() {
					at := "before the clock started"
					if s != nil && s.vc != nil {
						at = "with the clock at " + s.vc.Now().Format(time.RFC3339Nano)
					}
					t.Logf("reproduce with HERALD_SEED=%d go test -run 'TestDSTSoak/^%s$' ./e2e/cronsoak/ (failed %s)",
						seed, regexp.QuoteMeta(strings.TrimPrefix(t.Name(), "TestDSTSoak/")), at)
				}
			})
			s = newSoak(t, bins, sc, seed, uint64(i))
			s.run()
			s.finish()
			t.Logf("%s: %d virtual days, %d steps, %d scheduled executions, %d manual, in %s of wall time",
				sc.name, int(s.end.Sub(s.t0).Hours()/24), s.steps, s.nFired, s.nManual, time.Since(began).Round(time.Millisecond))
		})
	}
}

// soak is one scenario's run.
type soak struct {
	t    *testing.T
	sc   scenario
	seed uint64
	rng  *rand.Rand
	ctx  context.Context

	dir, hold, pids string
	vc              *harness.VirtualClock
	fake            *harness.Fake
	h               *harness.Herald
	nodes           []*harness.Node // the two replicas running now
	started         []*harness.Node // every herald process started
	owners          map[*harness.Node]string
	ledger          *harness.Ledger

	change, t0, end time.Time
	models          []*model
	byName          map[string]*model
	byID            map[int64]*model
	ids             map[string]int64
	events          []event

	// What the ledger showed so far (read incrementally).
	lastExec int64
	got      map[int64]map[time.Time]harness.Execution // scheduled, by job and slot
	nFired   int                                       // the models' fired occurrences
	manual   map[string][]time.Time                    // manual runs asked, by job
	nManual  int
	steps    int

	faults []armedFault
	held   []slotRef // runs held past the claim TTL: must end succeeded
	killed []slotRef // runs whose owner was SIGKILLed: must end interrupted
}

type event struct {
	at   time.Time
	span time.Duration // how far the event moves the clock
	name string
	run  func()
	// acrossChange: the event may span the DST change (an outage over it).
	acrossChange bool
}

type armedFault struct {
	job, kind string
	count     int
	slot      time.Time // the occurrence whose delivery it hits
}

type slotRef struct {
	job  string
	slot time.Time
}

// newSoak prepares scenario number i of a run seeded with seed.
func newSoak(t *testing.T, bins harness.Binaries, sc scenario, seed, i uint64) *soak {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &soak{t: t, sc: sc, seed: seed, rng: rand.New(rand.NewPCG(seed, i)), ctx: ctx,
		owners: map[*harness.Node]string{}, byName: map[string]*model{}, byID: map[int64]*model{}, ids: map[string]int64{},
		got: map[int64]map[time.Time]harness.Execution{}, manual: map[string][]time.Time{}}
	s.dir = t.TempDir()
	s.hold = filepath.Join(s.dir, "hold")
	s.pids = filepath.Join(s.dir, "job.pids")
	var err error
	if s.change, err = findChange(sc.changeZone, sc.changeDay); err != nil {
		t.Fatal(err)
	}
	before, after := 15*24*time.Hour, 15*24*time.Hour
	switch {
	case sc.outageAcrossChange:
		before, after = 2*24*time.Hour, 4*24*time.Hour
	case testing.Short():
		before, after = 3*24*time.Hour, 4*24*time.Hour
	}
	s.t0 = s.change.Add(-before).Truncate(time.Hour)
	horizon := s.change.Add(after + 3*24*time.Hour)
	t.Logf("%s: DST change at %s (%s in %s); run from %s", sc.name, s.change.Format(time.RFC3339),
		s.change.In(mustZone(t, sc.changeZone)).Format(localLayout), sc.changeZone, s.t0.Format(time.RFC3339))

	s.vc = harness.NewVirtualClock(t, s.dir, s.t0)
	s.fake = harness.StartFake(t, bins, s.dir, s.vc.Env())
	env := []string{
		"HERALD_PLATFORMS=chat=" + s.fake.PlatformURL("telegram"),
		"TZ=" + sc.processTZ,
		s.vc.Env(),
		"HERALD_RETRY_BASE=20ms", "HERALD_RETRY_MAX=200ms", "HERALD_SEND_TIMEOUT=2s", "HERALD_LEASE=6s",
		"HERALD_POLL_INTERVAL=50ms", "HERALD_DRAIN_TIMEOUT=10s",
		"HERALD_CLAIM_TTL=" + claimTTL.String(), "HERALD_HEARTBEAT=" + heartbeat.String(),
		// A month of virtual time: keep every terminal row for the final
		// checks (the default retention is a week).
		"HERALD_RETENTION=100000h",
		"HERALD_SYNCHRONOUS=NORMAL",
		"HERALD_SEED=" + strconv.FormatUint(seed+i, 10),
	}
	if sc.heraldTZ != "" {
		env = append(env, "HERALD_TZ="+sc.heraldTZ)
	}
	s.h = harness.NewHerald(bins, filepath.Join(s.dir, "home"), env...)
	s.nodes = []*harness.Node{s.startNode(), s.startNode()}
	if s.ledger, err = harness.OpenLedger(s.h.Home); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.ledger.Close() })

	s.createJobs(horizon)
	s.layout()
	return s
}

func mustZone(tb testing.TB, name string) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}

// fatalf fails the scenario, saying how to reproduce it and where.
func (s *soak) fatalf(format string, args ...any) {
	s.t.Helper()
	now := s.vc.Now()
	s.t.Fatalf("[HERALD_SEED=%d scenario %q at %s = %s in %s, step %d] %s", s.seed, s.sc.name, now.Format(time.RFC3339Nano),
		now.In(mustZone(s.t, s.sc.zone)).Format(localLayout), s.sc.zone, s.steps, fmt.Sprintf(format, args...))
}

func (s *soak) startNode() *harness.Node {
	s.t.Helper()
	n := s.h.Start(s.t)
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	id, err := n.OwnerID(ctx)
	if err != nil {
		s.fatalf("owner id of %s: %v", n.Name, err)
	}
	s.owners[n] = id
	s.started = append(s.started, n)
	return n
}

// createJobs builds the models from the oracle and creates the jobs.
func (s *soak) createJobs(horizon time.Time) {
	defs := append(commonJobs(s.sc.jobZone), s.sc.extra...)
	// The one-shots' wall times hang off the daily job's occurrences: a
	// model of it comes first.
	daily, err := newModel("daily-0900", "0 9 * * *", s.sc.jobZone, mustZone(s.t, s.sc.zone), s.t0, 24*time.Hour, false, s.t0, horizon)
	if err != nil {
		s.t.Fatal(err)
	}
	loc := mustZone(s.t, s.sc.zone)
	fires := s.dailyAt(daily, 2).In(loc).Add(75 * time.Minute)
	// The other one-shot falls in an outage, an hour after it begins.
	var missed time.Time
	if s.sc.outageAcrossChange {
		missed = s.change.Add(-time.Hour).In(loc)
	} else {
		missed = s.dailyAt(daily, s.outageDay()).In(loc).Add(time.Hour)
	}
	defs = append(defs,
		jobDef{name: "oneshot", spec: "at " + fires.Format("2006-01-02T15:04"), zone: s.sc.jobZone, kind: "message"},
		jobDef{name: "oneshot-in-outage", spec: "at " + missed.Format("2006-01-02T15:04"), zone: s.sc.jobZone, kind: "message"})

	node := s.nodes[0]
	for _, d := range defs {
		zoneName := d.zone
		if zoneName == "" {
			zoneName = s.serverZone()
		}
		m, err := newModel(d.name, d.spec, d.zone, mustZone(s.t, zoneName), s.t0, d.period, strings.HasPrefix(d.spec, "at "), s.t0, horizon)
		if err != nil {
			s.t.Fatal(err)
		}
		job := harness.Job{Name: d.name, Spec: d.spec, Zone: d.zone, Anchor: s.t0.Format(time.RFC3339), Platform: "chat", ChatID: "c-" + d.name}
		switch d.kind {
		case "message":
			job.Action = map[string]any{"kind": "message", "text": `{{.Job}} {{.Local.Format "` + localLayout + `"}}`}
		case "fail":
			job.Action = map[string]any{"kind": "exec", "env": []string{s.jobEnv()}, "command": []string{"sh", "-c", "echo $$ >> " + shq(s.pids) + "; exit 3"}}
		case "gated":
			// Leaves a grandchild in its process group, and waits while the
			// hold file exists.
			job.Action = map[string]any{"kind": "exec", "env": []string{s.jobEnv()}, "command": []string{"sh", "-c",
				"echo $$ >> " + shq(s.pids) + "; sleep 1000 & echo $! >> " + shq(s.pids) +
					"; while [ -f " + shq(s.hold) + " ]; do sleep 0.02; done; echo gated $HERALD_SLOT"}}
		}
		var view struct {
			ID            int64  `json:"id"`
			Grace         string `json:"grace"`
			EffectiveZone string `json:"effective_zone"`
		}
		status, err := harness.JSON(s.ctx, http.MethodPost, node.URL+"/v1/jobs", job, &view)
		if err != nil || status != http.StatusCreated {
			s.fatalf("create job %s: status %d, %v", d.name, status, err)
		}
		if g, err := time.ParseDuration(view.Grace); err != nil || g != m.grace {
			s.fatalf("job %s (%s): herald's grace is %q, the model's (SPEC §5) %s", d.name, d.spec, view.Grace, m.grace)
		}
		if view.EffectiveZone != m.loc.String() {
			if d.zone != "" || view.EffectiveZone != "Local" {
				s.fatalf("job %s: effective zone %q, want %q", d.name, view.EffectiveZone, m.loc)
			}
			// The server zone from TZ (no HERALD_TZ) reads as Go's "Local".
			s.t.Logf("job %s: effective zone %q (the process's TZ is %s)", d.name, view.EffectiveZone, s.sc.processTZ)
		}
		s.models = append(s.models, m)
		s.byName[d.name] = m
		s.byID[view.ID] = m
		s.ids[d.name] = view.ID
	}
	s.check()
}

// shq quotes a path for sh (test directories are named after subtests).
func shq(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }

// serverZone is the zone of jobs without one: HERALD_TZ, else TZ.
func (s *soak) serverZone() string {
	if s.sc.heraldTZ != "" {
		return s.sc.heraldTZ
	}
	return s.sc.processTZ
}

// dailyAt is the daily job's k-th occurrence counted from the first one
// after the DST change (k may be negative).
func (s *soak) dailyAt(daily *model, k int) time.Time {
	first, _ := daily.after(s.change)
	i := sort.Search(len(daily.occ), func(i int) bool { return !daily.occ[i].Before(first) }) + k
	if i < 0 || i >= len(daily.occ) {
		s.t.Fatalf("no daily occurrence %d days from the change", k)
	}
	return daily.occ[i]
}

func (s *soak) outageDay() int {
	if testing.Short() {
		return 1
	}
	return -6
}

// layout places the events of the run around the DST change, and checks
// that they neither overlap nor cross an occurrence they must not.
func (s *soak) layout() {
	daily, gated := s.byName["daily-0900"], s.byName["gated"]
	day := func(k int) time.Time { return s.dailyAt(daily, k) }
	gatedAfter := func(t time.Time) time.Time { g, _ := gated.after(t); return g }
	var evs []event
	add := func(at time.Time, span time.Duration, name string, run func()) {
		evs = append(evs, event{at: at, span: span, name: name, run: run})
	}
	manualBetween := func(k int) {
		at := day(k).Add(2*time.Hour + 7*time.Minute + 13*time.Second)
		add(at, 0, "manual runs between ticks", func() { s.manualRuns("daily-0900", "failing", "quarter") })
	}
	manualBefore := func(k int) {
		at := day(k).Add(-time.Second)
		add(at, 0, "manual runs a second before a due time", func() { s.manualRuns("daily-0900", "hourly") })
	}
	fault := func(at time.Time, job, kind string, count int) {
		slot, _ := s.byName[job].after(at)
		add(at, 0, fmt.Sprintf("arm %d %s on %s's chat", count, kind, job), func() { s.armFault(job, kind, count, slot) })
	}
	// quiet checks that nothing but the gated job fires in [from, to]: a
	// held run keeps its owner from settling, so nothing else may be due.
	quiet := func(from, to time.Time) {
		for _, m := range s.models {
			for _, o := range m.occ {
				if !o.Before(from) && !o.After(to) && m.name != "gated" {
					s.t.Fatalf("layout: %s fires at %s, inside a held run's window", m.name, o.Format(time.RFC3339))
				}
			}
		}
	}
	hold := func(g time.Time) {
		quiet(g.Add(-30*time.Second), g.Add(claimTTL+2*time.Minute))
		add(g.Add(-30*time.Second), 30*time.Second+claimTTL+2*time.Minute, "hold a run past the claim TTL", func() { s.holdPastTTL(g) })
	}
	kill := func(g time.Time, bootRecovery bool) {
		quiet(g.Add(-30*time.Second), g)
		add(g.Add(-30*time.Second), 30*time.Second, "SIGKILL the owner mid-run", func() { s.killMidRun(g, bootRecovery) })
	}
	// outage runs an outage of d from at, over the daily job's occurrence
	// slot, which must then fire once (late, or as a catch-up).
	outage := func(at time.Time, d time.Duration, name string, slot time.Time, catchUp bool) {
		add(at, d, name, func() {
			s.outage(d)
			if c, ok := daily.fired[slot]; !ok || c != catchUp {
				s.fatalf("%s: the model fired the daily job at %s: %v (catch-up %v); the event is meant to fire it with catch-up %v",
					name, slot.Format(time.RFC3339), ok, c, catchUp)
			}
		})
	}
	late := func(k int) {
		outage(day(k).Add(-10*time.Minute), 55*time.Minute, "outage: the daily job fires 45 min late", day(k), false)
	}
	long := func(k int) {
		outage(day(k).Add(-2*time.Hour), 5*time.Hour, "outage of 5 h over the daily occurrence", day(k), true)
	}
	bootRecovery := s.rng.IntN(2) == 0
	switch {
	case s.sc.outageAcrossChange:
		// No scheduler runs from 110 min before the change to 20 min after:
		// the first tick after it meets the gap or both passes of the fold
		// at once, and applies the catch-up policy across them.
		d := 130 * time.Minute
		add(s.change.Add(-110*time.Minute), d, "outage across the DST change", func() { s.outage(d) })
		evs[len(evs)-1].acrossChange = true
		late(1)
		manualBefore(2)
		s.end = s.change.Add(4 * 24 * time.Hour)
	case testing.Short():
		fault(day(-2).Add(-time.Minute), "daily-0900", "rate_limit", 2)
		manualBetween(-2)
		hold(gatedAfter(day(-2)))
		late(-1)
		kill(gatedAfter(day(-1)), bootRecovery)
		manualBefore(0)
		fault(day(0).Add(59*time.Minute), "hourly", "server_error", 1)
		long(s.outageDay())
		s.end = s.change.Add(4 * 24 * time.Hour)
	default:
		fault(day(-12).Add(-time.Minute), "daily-0900", "rate_limit", 2)
		manualBetween(-12)
		hold(gatedAfter(day(-11)))
		manualBefore(-10)
		late(-8)
		long(s.outageDay())
		kill(gatedAfter(day(-4)), bootRecovery)
		fault(day(3).Add(-time.Minute), "hourly", "server_error", 1)
		manualBefore(4)
		hold(gatedAfter(day(5)))
		late(7)
		long(9)
		kill(gatedAfter(day(11)), !bootRecovery)
		manualBetween(12)
		s.end = day(14)
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	for i, e := range evs {
		if !e.at.After(s.t0) || !e.at.Add(e.span).Before(s.end) {
			s.t.Fatalf("layout: event %q at %s lies outside the run", e.name, e.at.Format(time.RFC3339))
		}
		if i > 0 && !evs[i-1].at.Add(evs[i-1].span).Before(e.at) {
			s.t.Fatalf("layout: event %q at %s overlaps %q at %s", e.name, e.at.Format(time.RFC3339), evs[i-1].name, evs[i-1].at.Format(time.RFC3339))
		}
		if e.span > 0 && !e.acrossChange && e.at.Before(s.change) && !e.at.Add(e.span).Before(s.change) {
			s.t.Fatalf("layout: event %q at %s spans the DST change", e.name, e.at.Format(time.RFC3339))
		}
	}
	s.events = evs
}

// run steps the clock from one interesting instant to the next — the next
// occurrence of any job, the next event, at least every maxStep — and
// checks the ledger against the model after every step.
func (s *soak) run() {
	for s.vc.Now().Before(s.end) {
		now := s.vc.Now()
		next := now.Add(maxStep)
		if s.end.Before(next) {
			next = s.end
		}
		for _, m := range s.models {
			if !m.next.IsZero() && m.next.Before(next) {
				next = m.next
			}
		}
		if len(s.events) > 0 {
			if s.events[0].at.Before(next) {
				next = s.events[0].at
			}
			if s.events[0].at.Before(now) {
				s.fatalf("event %q at %s was stepped over", s.events[0].name, s.events[0].at.Format(time.RFC3339))
			}
		}
		s.step(next)
		for len(s.events) > 0 && s.events[0].at.Equal(s.vc.Now()) {
			e := s.events[0]
			s.events = s.events[1:]
			s.t.Logf("%s (%s): %s", e.at.Format(time.RFC3339), e.at.In(mustZone(s.t, s.sc.zone)).Format(localLayout), e.name)
			e.run()
		}
	}
	if len(s.events) > 0 {
		s.fatalf("%d events never ran, first %q", len(s.events), s.events[0].name)
	}
}

// step moves the clock to at, waits until every process has settled there,
// advances the model and checks the ledger against it.
func (s *soak) step(at time.Time) {
	s.t.Helper()
	s.vc.Set(s.t, at)
	s.steps++
	s.settle(s.nodes...)
	s.advance()
	s.check()
}

func (s *soak) advance() {
	for _, m := range s.models {
		s.nFired += len(m.advance(s.vc.Now()))
	}
}

func (s *soak) settle(nodes ...*harness.Node) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 60*time.Second)
	defer cancel()
	if err := harness.SettledEvery(ctx, settlePoll, s.vc.Now(), nodes...); err != nil {
		s.fatalf("%v", err)
	}
}

// check compares the ledger with the model: the scheduled executions are
// exactly the model's fired occurrences (with their catch-up flags), no
// occurrence has two, and every job's next occurrence and missed count are
// the model's, the next one after now.
func (s *soak) check() {
	s.t.Helper()
	now := s.vc.Now()
	execs, err := s.ledger.ExecutionsAfter(s.ctx, s.lastExec)
	if err != nil {
		s.fatalf("%v", err)
	}
	for _, e := range execs {
		s.lastExec = e.ID
		m := s.byID[e.JobID]
		if m == nil {
			s.fatalf("execution %d of unknown job %d", e.ID, e.JobID)
		}
		switch e.Kind {
		case "scheduled":
			if s.got[e.JobID] == nil {
				s.got[e.JobID] = map[time.Time]harness.Execution{}
			}
			if prev, dup := s.got[e.JobID][e.Slot]; dup {
				s.fatalf("%s fired %s twice: executions %d and %d", m.name, s.slotText(m, e.Slot), prev.ID, e.ID)
			}
			want, ok := m.fired[e.Slot]
			if !ok {
				s.fatalf("%s (%s in %s) fired %s (execution %d, catchup %v), which the model does not fire%s",
					m.name, m.spec, m.loc, s.slotText(m, e.Slot), e.ID, e.CatchUp, s.modelContext(m, e.Slot))
			}
			if e.CatchUp != want {
				s.fatalf("%s fired %s with catchup=%v, the model says %v", m.name, s.slotText(m, e.Slot), e.CatchUp, want)
			}
			s.got[e.JobID][e.Slot] = e
		case "manual":
			asked := s.manual[m.name]
			if len(asked) == 0 || e.Slot.Before(asked[len(asked)-1]) || e.Slot.After(now) {
				s.fatalf("unexpected manual execution %d of %s at %s", e.ID, m.name, e.Slot.Format(time.RFC3339Nano))
			}
		default:
			s.fatalf("execution %d of %s at %s is of kind %q: nothing may be re-run", e.ID, m.name, e.Slot.Format(time.RFC3339), e.Kind)
		}
	}
	n := 0
	for _, g := range s.got {
		n += len(g)
	}
	if n != s.nFired {
		for _, m := range s.models {
			for slot := range m.fired {
				if _, ok := s.got[s.ids[m.name]][slot]; !ok {
					s.fatalf("%s (%s in %s) never fired %s; the model fired it (catchup %v)%s", m.name, m.spec, m.loc,
						s.slotText(m, slot), m.fired[slot], s.modelContext(m, slot))
				}
			}
		}
		s.fatalf("%d scheduled executions, the model fired %d", n, s.nFired)
	}
	jobs, err := s.ledger.Jobs(s.ctx)
	if err != nil {
		s.fatalf("%v", err)
	}
	if len(jobs) != len(s.models) {
		s.fatalf("%d jobs in the ledger, want %d", len(jobs), len(s.models))
	}
	for _, j := range jobs {
		m := s.byID[j.ID]
		if !j.NextRunAt.Equal(m.next) {
			s.fatalf("%s (%s in %s): stored next occurrence %s, the model's %s", m.name, m.spec, m.loc,
				s.slotText(m, j.NextRunAt), s.slotText(m, m.next))
		}
		if !j.NextRunAt.IsZero() && !j.NextRunAt.After(now) {
			s.fatalf("%s: stored next occurrence %s is not after now", m.name, s.slotText(m, j.NextRunAt))
		}
		if j.Missed != m.missed {
			s.fatalf("%s (%s in %s): %d occurrences recorded missed, the model says %d", m.name, m.spec, m.loc, j.Missed, m.missed)
		}
	}
}

func (s *soak) slotText(m *model, t time.Time) string {
	if t.IsZero() {
		return "none"
	}
	return fmt.Sprintf("%s (%s)", t.UTC().Format(time.RFC3339), t.In(m.loc).Format(localLayout))
}

// modelContext lists the oracle's occurrences around t.
func (s *soak) modelContext(m *model, t time.Time) string {
	var near []string
	for _, o := range m.occ {
		if d := o.Sub(t); d > -6*time.Hour && d < 6*time.Hour {
			near = append(near, s.slotText(m, o))
		}
	}
	return fmt.Sprintf("; the oracle's occurrences within 6 h: [%s]", strings.Join(near, ", "))
}

// pick is a replica chosen by the seed.
func (s *soak) pick() *harness.Node { return s.nodes[s.rng.IntN(len(s.nodes))] }

// manualRuns asks one replica for a manual run of each job, at the current
// instant, and waits until they are done: each is its own execution, and
// none moves a job's next occurrence (check compares it with the model).
func (s *soak) manualRuns(jobs ...string) {
	node := s.pick()
	for _, j := range jobs {
		if err := node.RunJob(s.ctx, j); err != nil {
			s.fatalf("manual run of %s on %s: %v", j, node.Name, err)
		}
		s.manual[j] = append(s.manual[j], s.vc.Now())
		s.nManual++
	}
	s.settle(s.nodes...)
	s.check()
}

func (s *soak) armFault(job, kind string, count int, slot time.Time) {
	err := s.fake.AddFault(s.ctx, harness.Fault{Op: "send", ChatID: "c-" + job, Kind: kind, Count: count, RetryAfter: 0.2})
	if err != nil {
		s.fatalf("%v", err)
	}
	s.faults = append(s.faults, armedFault{job: job, kind: kind, count: count, slot: slot})
}

// waitClaim waits until the execution of job at slot satisfies cond.
func (s *soak) waitClaim(job string, slot time.Time, what string, cond func(harness.Claim) error) harness.Claim {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	var c harness.Claim
	err := harness.Eventually(ctx, what, func() error {
		var err error
		if c, err = s.ledger.ClaimOf(ctx, s.ids[job], "scheduled", slot); err != nil {
			return err
		}
		return cond(c)
	})
	if err != nil {
		s.fatalf("%s %s: %v", job, slot.Format(time.RFC3339), err)
	}
	return c
}

func (s *soak) nodeOf(owner string) (*harness.Node, *harness.Node) {
	for i, n := range s.nodes {
		if s.owners[n] == owner {
			return n, s.nodes[1-i]
		}
	}
	s.fatalf("no running replica has owner id %q", owner)
	return nil, nil
}

// startHeld steps onto the gated job's occurrence g with the hold file in
// place and waits until its run is running with its process group known.
func (s *soak) startHeld(g time.Time) harness.Claim {
	if err := os.WriteFile(s.hold, nil, 0o644); err != nil {
		s.fatalf("%v", err)
	}
	pids := len(s.jobPids())
	s.vc.Set(s.t, g)
	s.steps++
	s.advance()
	if _, ok := s.byName["gated"].fired[g]; !ok {
		s.fatalf("the model does not fire the gated job at %s", g.Format(time.RFC3339))
	}
	// Running, its process group recorded, and the job and its grandchild
	// started (their pids written).
	return s.waitClaim("gated", g, "the gated run running", func(c harness.Claim) error {
		if c.State != "running" || c.Pgid == 0 {
			return fmt.Errorf("%s, pgid %d", c.State, c.Pgid)
		}
		if n := len(s.jobPids()); n < pids+2 {
			return fmt.Errorf("running, %d of its 2 pids written", n-pids)
		}
		return nil
	})
}

// describe reads an execution's end: state, cause and output.
func (s *soak) describe(id int64) string {
	execs, err := s.ledger.ExecutionsAfter(s.ctx, id-1)
	if err != nil || len(execs) == 0 || execs[0].ID != id {
		return fmt.Sprintf("execution %d unreadable: %v", id, err)
	}
	e := execs[0]
	return fmt.Sprintf("execution %d %s, cause %q, output %q", e.ID, e.State, e.Cause, e.Output)
}

func (s *soak) release() {
	if err := os.Remove(s.hold); err != nil {
		s.fatalf("%v", err)
	}
}

// holdPastTTL holds a run of the gated job for longer than the claim TTL.
// Every virtual 30 s the other replica (the contender) ticks — recovery
// included — and must leave the run alone, because the owner's heartbeat
// keeps the claim alive; then the run is let go and must succeed.
func (s *soak) holdPastTTL(g time.Time) {
	c := s.startHeld(g)
	_, contender := s.nodeOf(c.Owner)
	s.settle(contender)
	s.check()
	for s.vc.Now().Before(g.Add(claimTTL + 2*time.Minute)) {
		s.vc.Advance(s.t, 30*time.Second)
		s.steps++
		s.advance()
		now := s.vc.Now()
		// The heartbeat keeps up: never more than a period and a step
		// behind the clock (so the claim has TTL-1.5 min left at least).
		s.waitClaim("gated", g, "the heartbeat to keep up", func(h harness.Claim) error {
			if h.HeartbeatAt.Before(now.Add(-heartbeat - 30*time.Second)) {
				return fmt.Errorf("last heartbeat at %s", h.HeartbeatAt.Format(time.RFC3339))
			}
			return nil
		})
		s.settle(contender)
		h, err := s.ledger.ClaimOf(s.ctx, s.ids["gated"], "scheduled", g)
		if err != nil {
			s.fatalf("%v", err)
		}
		if h.State != "running" || h.Owner != c.Owner || h.FencingToken != c.FencingToken || !h.ExpiresAt.After(now) {
			s.fatalf("held run %d %s g+%s: state %s owner %s token %d expires %s (%s); want running, owner %s, token %d, a live claim",
				h.ExecutionID, g.Format(time.RFC3339), now.Sub(g), h.State, h.Owner, h.FencingToken, h.ExpiresAt.Format(time.RFC3339),
				s.describe(h.ExecutionID), c.Owner, c.FencingToken)
		}
		s.check()
	}
	if h, _ := s.ledger.ClaimOf(s.ctx, s.ids["gated"], "scheduled", g); !h.HeartbeatAt.After(g.Add(claimTTL)) {
		s.fatalf("held run: last heartbeat %s, not past the first claim's expiry", h.HeartbeatAt.Format(time.RFC3339))
	}
	s.release()
	s.settle(s.nodes...)
	s.check()
	s.held = append(s.held, slotRef{"gated", g})
}

// killMidRun SIGKILLs the replica running the gated job mid-run, then
// restarts it. Recovery — by the surviving replica, or with bootRecovery
// by the restarted processes at boot (the survivor is stopped first) —
// must mark the run interrupted, once, reap its process group, and neither
// re-run it nor send anything for it.
func (s *soak) killMidRun(g time.Time, bootRecovery bool) {
	c := s.startHeld(g)
	owner, survivor := s.nodeOf(c.Owner)
	if bootRecovery {
		survivor.Stop(s.t)
	}
	owner.Kill()
	if !owner.ExitedBySignal(syscall.SIGKILL) {
		s.fatalf("%s did not die of SIGKILL: %v", owner.Name, owner.ExitErr())
	}
	if bootRecovery {
		s.nodes = []*harness.Node{s.startNode(), s.startNode()}
	} else {
		s.waitClaim("gated", g, "the survivor to interrupt the run", func(h harness.Claim) error {
			if h.State != "interrupted" {
				return fmt.Errorf("%s", h.State)
			}
			return nil
		})
		s.nodes = []*harness.Node{survivor, s.startNode()}
	}
	h := s.waitClaim("gated", g, "the run interrupted", func(h harness.Claim) error {
		if h.State != "interrupted" {
			return fmt.Errorf("%s", h.State)
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(s.ctx, 20*time.Second)
	defer cancel()
	if err := harness.Eventually(ctx, "the killed run's process group reaped", func() error {
		if harness.JobProcessAlive(c.Pgid, s.jobEnv()) {
			return fmt.Errorf("leader %d alive", c.Pgid)
		}
		for _, pid := range s.jobPids() {
			if harness.JobProcessAlive(pid, s.jobEnv()) {
				return fmt.Errorf("job process %d alive", pid)
			}
		}
		return nil
	}); err != nil {
		s.fatalf("execution %d: %v", h.ExecutionID, err)
	}
	s.release()
	s.settle(s.nodes...)
	s.check()
	s.killed = append(s.killed, slotRef{"gated", g})
}

// outage stops both replicas (cleanly), moves the clock by d with no
// scheduler running, and starts two new ones.
func (s *soak) outage(d time.Duration) {
	for _, n := range s.nodes {
		n.Stop(s.t)
	}
	s.vc.Advance(s.t, d)
	s.steps++
	s.nodes = []*harness.Node{s.startNode(), s.startNode()}
	s.settle(s.nodes...)
	s.advance()
	s.check()
}

// jobEnv marks this scenario's job processes, so a pid reused by an
// unrelated process is never mistaken for one of them.
func (s *soak) jobEnv() string { return "SOAK_RUN=" + s.dir }

func (s *soak) jobPids() []int {
	b, err := os.ReadFile(s.pids)
	if err != nil && !os.IsNotExist(err) {
		s.fatalf("%v", err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// finish lets the last deliveries and retries run, stops every process,
// and checks the end state: the termination invariants, what each kind of
// run must have ended as, and what the chats show.
func (s *soak) finish() {
	for range 3 {
		s.step(s.vc.Now().Add(time.Minute))
	}
	for _, n := range s.nodes {
		n.Stop(s.t)
	}
	ctx := s.ctx
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	for _, n := range s.started {
		if !n.Exited() {
			add("herald process %s (pid %d) still runs", n.Name, n.Pid())
		}
	}
	for _, pid := range s.jobPids() {
		if harness.JobProcessAlive(pid, s.jobEnv()) {
			add("job process %d outlived its run", pid)
		}
	}
	if err := s.ledger.IntegrityCheck(ctx); err != nil {
		add("%v", err)
	}
	execs, err := s.ledger.Executions(ctx)
	if err != nil {
		s.fatalf("%v", err)
	}
	rows, err := s.ledger.Rows(ctx)
	if err != nil {
		s.fatalf("%v", err)
	}
	entries, err := s.fake.Entries()
	if err != nil {
		s.fatalf("%v", err)
	}
	bad = append(bad, harness.CheckTermination(execs, rows)...)
	bad = append(bad, harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true})...)
	live, err := s.ledger.LiveClaims(ctx)
	if err != nil {
		s.fatalf("%v", err)
	}
	bad = append(bad, live...)
	locks, err := harness.HeldOwnerLocks(s.h.Home)
	if err != nil {
		s.fatalf("%v", err)
	}
	for _, l := range locks {
		add("owner lock %s is still held", l)
	}

	byMsg := map[int64][]harness.Row{}
	for _, r := range rows {
		byMsg[r.MessageID] = append(byMsg[r.MessageID], r)
	}
	special := map[slotRef]string{}
	for _, r := range s.held {
		special[r] = "held"
	}
	for _, r := range s.killed {
		special[r] = "killed"
	}
	messages := map[int64]int64{}
	manual := map[string]int{}
	scheduled := 0
	for _, e := range execs {
		m := s.byID[e.JobID]
		label := fmt.Sprintf("%s execution %d of %s at %s", e.Kind, e.ID, m.name, s.slotText(m, e.Slot))
		if e.MessageID != 0 {
			if other, dup := messages[e.MessageID]; dup {
				add("%s: message %d also delivers execution %d", label, e.MessageID, other)
			}
			messages[e.MessageID] = e.ID
			if len(byMsg[e.MessageID]) == 0 {
				add("%s: message %d has no obligation", label, e.MessageID)
			}
		}
		if e.Kind == "manual" {
			manual[m.name]++
		} else {
			scheduled++
		}
		kind := special[slotRef{m.name, e.Slot}]
		if e.Kind == "manual" {
			kind = ""
		}
		switch {
		case kind == "killed":
			if e.State != "interrupted" || !strings.HasPrefix(e.Cause, "owner lost") || e.MessageID != 0 {
				add("%s: %s (%s), message %d; want interrupted (owner lost), nothing sent", label, e.State, e.Cause, e.MessageID)
			}
		case m.name == "failing":
			if e.State != "failed" || !strings.HasPrefix(e.Cause, "exit status 3") || e.MessageID != 0 {
				add("%s: %s (%s), message %d; want failed with exit status 3, nothing sent", label, e.State, e.Cause, e.MessageID)
			}
		default:
			if e.State != "succeeded" || e.Cause != "ok" || e.MessageID == 0 {
				add("%s: %s (%s), message %d; want succeeded and delivered", label, e.State, e.Cause, e.MessageID)
			}
			if m.name == "gated" {
				if want := "gated " + e.Slot.UTC().Format(time.RFC3339Nano) + "\n"; e.Kind == "scheduled" && e.Output != want {
					add("%s: output %q, want %q", label, e.Output, want)
				}
			} else if e.Kind == "scheduled" {
				if want := m.name + " " + e.Slot.In(m.loc).Format(localLayout); e.Output != want {
					add("%s: output %q, want %q (the occurrence on the job's wall clock)", label, e.Output, want)
				}
			}
		}
	}
	if scheduled != s.nFired {
		add("%d scheduled executions, the model fired %d", scheduled, s.nFired)
	}
	for name, asked := range s.manual {
		if manual[name] != len(asked) {
			add("%d manual executions of %s, %d asked for", manual[name], name, len(asked))
		}
	}
	for _, m := range s.models {
		switch {
		case m.name == "oneshot-in-outage":
			if len(m.fired) != 0 || m.missed != 1 {
				add("the model fired %s %d times and missed it %d times: the outage should have missed it, once", m.name, len(m.fired), m.missed)
			}
		case len(m.fired) == 0:
			add("the model never fired %s: the run covers nothing of it", m.name)
		}
	}

	// Every fired occurrence was acquired by exactly one claim.
	fas, err := s.ledger.FireAttempts(ctx)
	if err != nil {
		s.fatalf("%v", err)
	}
	acquired := map[slotRef][]string{}
	for _, a := range fas {
		if a.Outcome == "acquired" {
			r := slotRef{s.byID[a.JobID].name, a.Slot}
			acquired[r] = append(acquired[r], a.Owner)
		}
	}
	for _, m := range s.models {
		for slot := range m.fired {
			if owners := acquired[slotRef{m.name, slot}]; len(owners) != 1 {
				add("%s at %s: acquired by %d claims %v, want exactly one", m.name, s.slotText(m, slot), len(owners), owners)
			}
		}
	}
	if len(acquired) != s.nFired {
		add("%d occurrences acquired, the model fired %d", len(acquired), s.nFired)
	}

	// What the chats show: nothing for a failed or interrupted run.
	copies := map[string]int{}
	for _, e := range entries {
		copies[e.ChatID]++
		if e.ChatID == "c-failing" {
			add("the failing job's chat shows %q", e.Text)
		}
		for _, k := range s.killed {
			if strings.Contains(e.Text, k.slot.UTC().Format(time.RFC3339Nano)) {
				add("the chat shows %q (seq %d) for the interrupted run at %s", e.Text, e.Seq, k.slot.Format(time.RFC3339))
			}
		}
	}
	// The delivery faults were reached, and their deliveries failed, then
	// succeeded.
	stats, err := s.fake.Stats(ctx)
	if err != nil {
		s.fatalf("%v", err)
	}
	fired, _ := stats["faults_fired"].(map[string]any)
	wantFired := map[string]int{}
	for _, f := range s.faults {
		wantFired[f.kind] += f.count
		e, ok := s.got[s.ids[f.job]][f.slot]
		if !ok {
			add("fault %s on %s: no execution at %s", f.kind, f.job, f.slot.Format(time.RFC3339))
			continue
		}
		var e2 harness.Execution
		for _, x := range execs {
			if x.ID == e.ID {
				e2 = x
			}
		}
		n := 0
		for _, r := range byMsg[e2.MessageID] {
			n = max(n, r.Attempts)
		}
		if n < f.count+1 {
			add("fault %s×%d on %s at %s: message %d had %d attempts, want at least %d", f.kind, f.count, f.job, f.slot.Format(time.RFC3339), e2.MessageID, n, f.count+1)
		}
	}
	for kind, n := range wantFired {
		if got, _ := fired[kind].(float64); int(got) != n {
			add("the fake fired %v %s faults, want %d (armed and never reached?)", fired[kind], kind, n)
		}
	}
	if len(bad) > 0 {
		s.fatalf("%d violations at the end:\n%s", len(bad), harness.Report(bad))
	}
	// The occurrences around the change, as fired, for the record.
	for _, m := range s.models {
		if m.name != "dst-0230" && !strings.HasPrefix(m.name, "fold-") && !strings.HasPrefix(m.name, "gap-") && m.name != "quarter" {
			continue
		}
		var near []string
		for _, o := range m.occ {
			c, fired := m.fired[o]
			if d := o.Sub(s.change); fired && (d > -90*time.Minute && d < 90*time.Minute || (m.name != "quarter" && d > -24*time.Hour && d < 24*time.Hour)) {
				mark := ""
				if c {
					mark = " (catch-up)"
				}
				near = append(near, o.In(m.loc).Format("01-02 15:04Z07:00")+mark)
			}
		}
		s.t.Logf("%s (%s) fired around the change: %s; missed in all: %d", m.name, m.spec, strings.Join(near, ", "), m.missed)
	}
	s.t.Logf("end: %d executions (%d scheduled, %d manual), %d obligations, %d journal copies; %d held past the TTL, %d killed mid-run",
		len(execs), scheduled, len(execs)-scheduled, len(rows), len(entries), len(s.held), len(s.killed))
}
