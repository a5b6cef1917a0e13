// Package replicas_test is the contention suite: two herald processes on
// one data directory and one virtual clock receive every due occurrence of
// two jobs, are parked by a `pause:FILE` rendezvous at the fault point
// cron.due (after the due scan, before the claim transaction) until both
// hold the same occurrence, and are let into the claim at once. Exactly one
// may run each occurrence; the other's attempt must be recorded as not
// acquired; the run must deliver once.
package replicas_test

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"herald/e2e/harness"
	"herald/tzoracle"
)

// rounds is how many clock steps the suite takes; each makes one or both
// jobs due.
const rounds = 12

// contendedJobs are the two jobs: the top of every hour, and every 45
// minutes from t0 — apart at most instants, together every third hour.
func contendedJobs(t0 time.Time) []harness.Job {
	job := func(name, spec string) harness.Job {
		return harness.Job{Name: name, Spec: spec, Zone: "UTC", Anchor: t0.Format(time.RFC3339), Platform: "chat", ChatID: "c-" + name,
			Action: map[string]any{"kind": "message", "text": "{{.Job}} {{.Slot.Format \"2006-01-02T15:04:05Z07:00\"}}"}}
	}
	return []harness.Job{job("hourly", "0 * * * *"), job("every-45m", "every 45m")}
}

// occurrence is one (job, slot).
type occurrence struct {
	job  string
	slot time.Time
}

func (o occurrence) String() string { return o.job + "@" + o.slot.Format(time.RFC3339) }

// text is what the occurrence's run delivers.
func (o occurrence) text() string { return o.job + " " + o.slot.Format(time.RFC3339) }

// round is one clock step: the instant, the occurrences due at it, and the
// cron.due pass (counted in each process) at which the first of them is
// parked. A process passes cron.due once per due job per tick, and a job is
// due only from the step that reaches its slot until one process claims
// it, and both are parked before either claims: so in both processes the
// passes of round r are firstPass … firstPass+len(due)-1, whatever real-time
// polls tick in between.
type round struct {
	at        time.Time
	due       []occurrence
	firstPass int
}

// plan asks the oracle for the jobs' occurrences after t0 and groups them
// into the first n instants.
func plan(t *testing.T, jobs []harness.Job, t0 time.Time, n int) []round {
	t.Helper()
	byInstant := map[time.Time][]occurrence{}
	for _, j := range jobs {
		occ, err := tzoracle.Occurrences(j.Spec, time.UTC, t0, t0.Add(time.Nanosecond), t0.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range occ {
			s = s.UTC() // one representation, for map keys
			byInstant[s] = append(byInstant[s], occurrence{j.Name, s})
		}
	}
	var instants []time.Time
	for at := range byInstant {
		instants = append(instants, at)
	}
	sort.Slice(instants, func(a, b int) bool { return instants[a].Before(instants[b]) })
	var out []round
	pass := 1
	for _, at := range instants[:n] {
		out = append(out, round{at: at, due: byInstant[at], firstPass: pass})
		pass += len(byInstant[at])
	}
	return out
}

func env(platform string, extra ...string) []string {
	return append([]string{
		"HERALD_PLATFORMS=" + platform,
		"HERALD_RETRY_BASE=20ms", "HERALD_RETRY_MAX=200ms",
		"HERALD_SEND_TIMEOUT=2s", "HERALD_LEASE=6s",
		"HERALD_POLL_INTERVAL=50ms", "HERALD_TZ=UTC", "HERALD_DRAIN_TIMEOUT=10s",
	}, extra...)
}

// TestTwoProcessesContendForEveryOccurrence steps a shared virtual clock
// through 12 instants at which one or both jobs are due; at each, both
// processes are held at cron.due until both have read the occurrence, then
// released into the claim together.
func TestTwoProcessesContendForEveryOccurrence(t *testing.T) {
	start := time.Now()
	bins := harness.Build(t)
	dir := t.TempDir()
	t0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	vc := harness.NewVirtualClock(t, dir, t0)
	jobs := contendedJobs(t0)
	plans := plan(t, jobs, t0, rounds)
	last := plans[len(plans)-1]
	passes := last.firstPass + len(last.due) - 1
	gates := harness.NewRendezvous(t, filepath.Join(dir, "gates"), "cron.due")

	fake := harness.StartFake(t, bins, dir, vc.Env())
	h := harness.NewHerald(bins, filepath.Join(dir, "home"),
		env("chat="+fake.PlatformURL("telegram"), vc.Env(), "HERALD_FAULTS="+gates.Faults(passes))...)
	a := h.Start(t)
	b := h.Start(t)
	// Whatever happens, nobody stays parked: cleanups run last-in first,
	// so this opens the gates before the processes are killed.
	t.Cleanup(func() { gates.OpenAll(passes) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names := map[string]string{} // owner id → process name
	for _, n := range []*harness.Node{a, b} {
		id, err := n.Owner(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names[id] = n.Name
	}
	if len(names) != 2 {
		t.Fatalf("the two processes share an owner id: %v", names)
	}

	ids := map[string]int64{}
	for _, j := range jobs {
		got, err := a.CreateJob(ctx, j)
		if err != nil {
			t.Fatal(err)
		}
		ids[j.Name] = got.ID
	}
	l, err := harness.OpenLedger(h.Home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := checkFirstSlots(ctx, l, ids, plans); err != nil {
		t.Fatal(err)
	}

	wins := map[string]int{}
	var fired []occurrence
	for i, r := range plans {
		where := fmt.Sprintf("round %d at %s (due: %v, cron.due passes %d..%d)", i+1, r.at.Format(time.RFC3339), r.due, r.firstPass, r.firstPass+len(r.due)-1)
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		// Nothing is due before the step, so nobody may be parked.
		if err := gates.AssertNoneParked(r.firstPass - 1); err != nil {
			t.Fatalf("%s, before the step: %v", where, err)
		}
		vc.Set(t, r.at)
		for k := range r.due {
			pass := r.firstPass + k
			if err := gates.WaitParked(rctx, pass, a.Proc, b.Proc); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			gates.Open(t, pass)
		}
		if err := harness.Settled(rctx, r.at, a, b); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		fired = append(fired, r.due...)
		winners, bad := check(ctx, l, fake, ids, names, r.due, fired)
		if len(bad) > 0 {
			t.Fatalf("%s: %d violations:\n%s", where, len(bad), harness.Report(bad))
		}
		var won []string
		for _, o := range r.due {
			wins[winners[o]]++
			won = append(won, fmt.Sprintf("%s won by %s", o, winners[o]))
		}
		t.Logf("round %d at %s: %s", i+1, r.at.Format(time.RFC3339), strings.Join(won, ", "))
	}

	// Every armed pass fired in both processes (a rendezvous that never
	// parked anybody proves nothing).
	for _, n := range []*harness.Node{a, b} {
		if got := countLines(n.Lines(), regexp.MustCompile(`^faultpoint: cron\.due hit \d+: pause until `)); got != passes {
			t.Errorf("after %d rounds (clock at %s): %s parked at cron.due %d times, want %d", len(plans), vc.Now().Format(time.RFC3339), n.Name, got, passes)
		}
	}
	// A claim or tick that failed (rather than won or lost) leaves the job
	// due: the next tick passes cron.due again, so the pass count would
	// drift. None may happen while the rounds run (the drain is not
	// judged here).
	var bad []string
	for _, n := range []*harness.Node{a, b} {
		for _, ln := range n.Lines() {
			if schedulerError.MatchString(ln) {
				bad = append(bad, fmt.Sprintf("%s logged a scheduler error: %s", n.Name, ln))
			}
		}
	}
	a.Stop(t)
	b.Stop(t)

	_, more := check(ctx, l, fake, ids, names, fired, fired)
	bad = append(bad, more...)
	execs, err := l.Executions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad = append(bad, harness.CheckTermination(execs, rows)...)
	if err := l.IntegrityCheck(ctx); err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) > 0 {
		t.Fatalf("after %d rounds (clock at %s): %d violations:\n%s", len(plans), vc.Now().Format(time.RFC3339), len(bad), harness.Report(bad))
	}
	var split []string
	for _, n := range []*harness.Node{a, b} {
		split = append(split, fmt.Sprintf("%s won %d", n.Name, wins[n.Name]))
	}
	t.Logf("%d occurrences in %d rounds, each contended by both processes: %s (%s)",
		len(fired), len(plans), strings.Join(split, ", "), time.Since(start).Round(time.Millisecond))
}

// checkFirstSlots checks that herald's first occurrences are the oracle's
// (else the rounds would step to instants where nothing is due).
func checkFirstSlots(ctx context.Context, l *harness.Ledger, ids map[string]int64, plans []round) error {
	stored, err := l.Jobs(ctx)
	if err != nil {
		return err
	}
	for name, id := range ids {
		var want time.Time
	find:
		for _, r := range plans {
			for _, o := range r.due {
				if o.job == name {
					want = o.slot
					break find
				}
			}
		}
		for _, j := range stored {
			if j.ID == id && !j.NextRunAt.Equal(want) {
				return fmt.Errorf("job %s: next occurrence %s, the oracle says %s", name, j.NextRunAt.Format(time.RFC3339), want.Format(time.RFC3339))
			}
		}
	}
	return nil
}

// check returns the winner of each occurrence in due (by process name) and
// every violation, reading the ledger and the journal after a settle:
//
//   - each occurrence in due has exactly one scheduled execution, succeeded,
//     with a delivery; its fire attempts are exactly one acquired and at
//     least one not acquired by the other process (the contention really
//     happened), and none by an unknown owner;
//   - its output reached its chat exactly once, unmarked, with its text;
//   - nothing but the occurrences fired so far has an execution or a fire
//     attempt, no two executions share a message, and the delivery
//     invariants hold over the whole journal.
func check(ctx context.Context, l *harness.Ledger, fake *harness.Fake, ids map[string]int64, names map[string]string, due, fired []occurrence) (map[occurrence]string, []string) {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	execs, err := l.Executions(ctx)
	if err != nil {
		return nil, []string{err.Error()}
	}
	attempts, err := l.FireAttempts(ctx)
	if err != nil {
		return nil, []string{err.Error()}
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		return nil, []string{err.Error()}
	}
	entries, err := fake.Entries()
	if err != nil {
		return nil, []string{err.Error()}
	}
	jobOf := map[int64]string{}
	for name, id := range ids {
		jobOf[id] = name
	}
	copies := harness.Copies(entries)
	winners := map[occurrence]string{}
	for _, o := range due {
		id := ids[o.job]
		var es []harness.Execution
		for _, e := range execs {
			if e.JobID == id && e.Kind == "scheduled" && e.Slot.Equal(o.slot) {
				es = append(es, e)
			}
		}
		var acquired, lost []string
		for _, fa := range attempts {
			if fa.JobID != id || !fa.Slot.Equal(o.slot) {
				continue
			}
			who, known := names[fa.Owner]
			if !known {
				add("%s: a fire attempt (%s) by unknown owner %s", o, fa.Outcome, fa.Owner)
				continue
			}
			switch fa.Outcome {
			case "acquired":
				acquired = append(acquired, who)
			case "not_acquired":
				lost = append(lost, who)
			default:
				add("%s: a fire attempt by %s with outcome %q", o, who, fa.Outcome)
			}
		}
		switch {
		case len(acquired) != 1:
			add("%s: %d acquired fire attempts %v, want exactly one", o, len(acquired), acquired)
		default:
			winner := acquired[0]
			winners[o] = winner
			var byOther int
			for _, who := range lost {
				if who == winner {
					add("%s: %s both acquired it and recorded a lost attempt", o, who)
				} else {
					byOther++
				}
			}
			if byOther == 0 {
				add("%s: won by %s, but the other process recorded no not-acquired attempt (attempts: acquired %v, not acquired %v): the two never contended, the rendezvous did not work",
					o, winner, acquired, lost)
			}
		}
		if len(es) != 1 {
			var desc []string
			for _, e := range es {
				desc = append(desc, fmt.Sprintf("execution %d %s (%s)", e.ID, e.State, e.Cause))
			}
			add("%s: %d scheduled executions, want exactly one: %v", o, len(es), desc)
			continue
		}
		e := es[0]
		if e.State != "succeeded" || e.MessageID == 0 {
			add("%s: execution %d ended %s (%s) with message %d, want succeeded with a delivery", o, e.ID, e.State, e.Cause, e.MessageID)
			continue
		}
		if e.Output != o.text() {
			add("%s: execution %d output %q, want %q", o, e.ID, e.Output, o.text())
		}
		var parts int
		for _, r := range rows {
			if r.MessageID != e.MessageID {
				continue
			}
			parts++
			if r.State != "delivered" {
				add("%s: obligation %d of message %d is %s (%s)", o, r.ID, r.MessageID, r.State, r.Error)
			}
			cs := copies[r.DeliveryKey]
			if len(cs) != 1 {
				add("%s: obligation %d reached chat %s %d times, want once", o, r.ID, r.ChatID, len(cs))
				continue
			}
			if c := cs[0]; c.Redelivery || c.Text != o.text() || c.ChatID != "c-"+o.job {
				add("%s: the chat shows %q in chat %s (redelivery %v), want %q in chat c-%s", o, c.Text, c.ChatID, c.Redelivery, o.text(), o.job)
			}
		}
		if parts != 1 {
			add("%s: message %d has %d obligations, want 1", o, e.MessageID, parts)
		}
	}
	// Nothing beyond what has fired so far.
	seen := map[occurrence]bool{}
	for _, o := range fired {
		seen[o] = true
	}
	var scheduled int
	byMessage := map[int64]int64{}
	for _, e := range execs {
		if first, dup := byMessage[e.MessageID]; dup && e.MessageID != 0 {
			add("executions %d and %d both deliver message %d", first, e.ID, e.MessageID)
		}
		byMessage[e.MessageID] = e.ID
		if e.Kind != "scheduled" {
			add("execution %d of job %d is %s, and no manual run was asked for", e.ID, e.JobID, e.Kind)
			continue
		}
		scheduled++
		if o := (occurrence{jobOf[e.JobID], e.Slot.UTC()}); !seen[o] {
			add("execution %d (%s) is not an occurrence the clock has reached", e.ID, o)
		}
	}
	if scheduled != len(fired) {
		add("%d scheduled executions, want %d (one per occurrence so far)", scheduled, len(fired))
	}
	for _, fa := range attempts {
		if o := (occurrence{jobOf[fa.JobID], fa.Slot.UTC()}); !seen[o] {
			add("a fire attempt (%s by %s) for %s, not an occurrence the clock has reached", fa.Outcome, names[fa.Owner], o)
		}
	}
	bad = append(bad, harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true})...)
	return winners, bad
}

// schedulerError matches the scheduler's error logs: a claim transaction
// that failed, or a tick.
var schedulerError = regexp.MustCompile(`level=ERROR msg="(claim occurrence|scheduler tick)"`)

func countLines(lines []string, re *regexp.Regexp) int {
	return len(slices.DeleteFunc(lines, func(s string) bool { return !re.MatchString(s) }))
}
