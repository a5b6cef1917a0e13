// Package cron_test is the scheduler suite: real herald processes as
// replicas on one data directory, on a shared virtual clock and on the real
// clock, SIGKILLed at every scheduler fault point, checked against the
// independent timezone oracle.
package cron_test

import (
	"context"
	"fmt"
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
	"herald/tzoracle"
)

// cronEnv keeps retries fast and leases short for a test run.
func cronEnv(platform string, extra ...string) []string {
	return append([]string{
		"HERALD_PLATFORMS=" + platform,
		"HERALD_RETRY_BASE=20ms", "HERALD_RETRY_MAX=200ms",
		"HERALD_SEND_TIMEOUT=2s", "HERALD_LEASE=6s",
		"HERALD_POLL_INTERVAL=50ms", "HERALD_TZ=UTC", "HERALD_DRAIN_TIMEOUT=10s",
	}, extra...)
}

// jobSet is the 20 jobs of the replica runs: every minute, every quarter
// hour, every 10 s, and daily fixed times (one in New York's fold).
func jobSet() []harness.Job {
	var js []harness.Job
	add := func(name, spec, zone string) {
		js = append(js, harness.Job{Name: name, Spec: spec, Zone: zone, Platform: "chat", ChatID: "c-" + name,
			Action: map[string]any{"kind": "message", "text": "{{.Job}} {{.Local.Format \"2006-01-02T15:04:05Z07:00\"}}"}})
	}
	for i := 0; i < 3; i++ {
		add(fmt.Sprintf("minute-%d", i), "* * * * *", []string{"UTC", "America/New_York", "Asia/Kolkata"}[i])
	}
	for i := 0; i < 10; i++ {
		add(fmt.Sprintf("quarter-%d", i), "*/15 * * * *", []string{"UTC", "America/New_York", "Australia/Lord_Howe", "Pacific/Chatham", "Europe/London"}[i%5])
	}
	add("every-10s", "@every 10s", "UTC")
	for i, z := range []string{"America/New_York", "Europe/London", "Asia/Shanghai", "Australia/Sydney", "America/Santiago", "UTC"} {
		add(fmt.Sprintf("daily-%d", i), []string{"30 1 * * *", "0 9 * * *", "0 9 * * *", "30 2 * * *", "0 0 * * *", "45 23 * * *"}[i], z)
	}
	return js
}

// expected returns, per job name, the occurrences the oracle says fall in
// (from, to].
func expected(t *testing.T, jobs []harness.Job, anchor, from, to time.Time) map[string][]time.Time {
	t.Helper()
	out := map[string][]time.Time{}
	for _, j := range jobs {
		loc, err := time.LoadLocation(j.Zone)
		if err != nil {
			t.Fatal(err)
		}
		occ, err := tzoracle.Occurrences(j.Spec, loc, anchor, from.Add(time.Nanosecond), to.Add(time.Nanosecond))
		if err != nil {
			t.Fatal(err)
		}
		out[j.Name] = occ
	}
	return out
}

// checkRun compares the scheduled executions with the oracle: each
// occurrence exactly one execution, succeeded, with exactly one delivery.
func checkRun(t *testing.T, home string, fake *harness.Fake, jobs []harness.Job, want map[string][]time.Time, exact bool) {
	t.Helper()
	ctx := context.Background()
	l, err := harness.OpenLedger(home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	execs, err := l.Executions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := l.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	names := map[int64]string{}
	for _, j := range stored {
		names[j.ID] = j.Name
	}
	got := map[string][]time.Time{}
	var bad []string
	messages := map[int64]bool{}
	for _, e := range execs {
		if e.Kind != "scheduled" {
			continue
		}
		got[names[e.JobID]] = append(got[names[e.JobID]], e.Slot)
		if e.State != "succeeded" || e.MessageID == 0 {
			bad = append(bad, fmt.Sprintf("execution %d of %s at %s: %s (%s), message %d", e.ID, names[e.JobID], e.Slot.Format(time.RFC3339), e.State, e.Cause, e.MessageID))
		}
		if messages[e.MessageID] {
			bad = append(bad, fmt.Sprintf("message %d delivers two executions", e.MessageID))
		}
		messages[e.MessageID] = true
	}
	for _, j := range jobs {
		g, w := got[j.Name], want[j.Name]
		sort.Slice(g, func(a, b int) bool { return g[a].Before(g[b]) })
		if exact {
			if !sameInstants(g, w) {
				bad = append(bad, fmt.Sprintf("%s (%s in %s): fired %d times, oracle says %d; first difference: %s", j.Name, j.Spec, j.Zone, len(g), len(w), firstDiff(g, w)))
			}
			continue
		}
		// Real clock: every fired slot is an oracle occurrence, none twice,
		// and every occurrence but the last few seconds' fired.
		oracle := map[time.Time]bool{}
		for _, x := range w {
			oracle[x] = true
		}
		seen := map[time.Time]bool{}
		for _, x := range g {
			if !oracle[x] || seen[x] {
				bad = append(bad, fmt.Sprintf("%s fired at %s: not an occurrence, or twice", j.Name, x.Format(time.RFC3339)))
			}
			seen[x] = true
		}
		for _, x := range w {
			if !seen[x] {
				bad = append(bad, fmt.Sprintf("%s never fired its occurrence at %s", j.Name, x.Format(time.RFC3339)))
			}
		}
	}
	entries, err := fake.Entries()
	if err != nil {
		t.Fatal(err)
	}
	bad = append(bad, harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true})...)
	bad = append(bad, harness.CheckTermination(execs, rows)...)
	if len(bad) > 0 {
		t.Fatalf("%d violations:\n%s", len(bad), harness.Report(bad))
	}
	n := 0
	for _, g := range got {
		n += len(g)
	}
	t.Logf("%d scheduled executions of %d jobs, %d obligations, %d journal copies", n, len(got), len(rows), len(entries))
}

func sameInstants(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

func firstDiff(got, want []time.Time) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(got):
			return "missing " + want[i].Format(time.RFC3339)
		case i >= len(want):
			return "extra " + got[i].Format(time.RFC3339)
		case !got[i].Equal(want[i]):
			return fmt.Sprintf("got %s, want %s", got[i].Format(time.RFC3339), want[i].Format(time.RFC3339))
		}
	}
	return "none"
}

// TestTwoReplicasOnAVirtualDay runs two herald processes on one data
// directory and one virtual clock through 24 hours (New York's fall-back
// day), a tick a minute, and checks every occurrence against the oracle.
func TestTwoReplicasOnAVirtualDay(t *testing.T) {
	bins := harness.Build(t)
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	vc := harness.NewVirtualClock(t, dir, t0)
	fake := harness.StartFake(t, bins, dir, vc.Env())
	h := harness.NewHerald(bins, filepath.Join(dir, "home"), cronEnv("chat="+fake.PlatformURL("telegram"), vc.Env())...)
	a := h.Start(t)
	b := h.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	jobs := jobSet()
	for i := range jobs {
		jobs[i].Anchor = t0.Format(time.RFC3339)
		if _, err := a.CreateJob(ctx, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	hours := 24
	if testing.Short() {
		hours = 3
	}
	for step := 0; step < hours*60; step++ {
		vc.Advance(t, time.Minute)
		if err := harness.Settled(ctx, vc.Now(), a, b); err != nil {
			t.Fatalf("at %s: %v", vc.Now().Format(time.RFC3339), err)
		}
	}
	a.Stop(t)
	b.Stop(t)
	checkRun(t, h.Home, fake, jobs, expected(t, jobs, t0, t0, vc.Now()), true)
}

// TestTwoReplicasOnTheRealClock runs the same jobs for two real minutes.
func TestTwoReplicasOnTheRealClock(t *testing.T) {
	if testing.Short() {
		t.Skip("two real minutes")
	}
	bins := harness.Build(t)
	dir := t.TempDir()
	fake := harness.StartFake(t, bins, dir)
	h := harness.NewHerald(bins, filepath.Join(dir, "home"), cronEnv("chat="+fake.PlatformURL("telegram"))...)
	a := h.Start(t)
	b := h.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	jobs := jobSet()
	t0 := time.Now().UTC()
	for i := range jobs {
		jobs[i].Anchor = t0.Format(time.RFC3339Nano)
		if _, err := a.CreateJob(ctx, jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Run two minutes, measured by the jobs themselves: wait until the
	// every-10s job has fired 12 times.
	l, err := harness.OpenLedger(h.Home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	end := t0.Add(2 * time.Minute)
	for time.Now().Before(end) {
		if err := harness.Eventually(ctx, "time to pass", func() error {
			if a.Exited() || b.Exited() {
				return fmt.Errorf("a replica exited")
			}
			if time.Now().Before(end) {
				return fmt.Errorf("running")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := harness.Settled(ctx, end, a, b); err != nil {
		t.Fatal(err)
	}
	a.Stop(t)
	b.Stop(t)
	checkRun(t, h.Home, fake, jobs, expected(t, jobs, t0, t0, end), false)
}

// TestKillAtEachCronFaultPoint SIGKILLs herald inside each crash window of
// the scheduler, restarts it, and checks that every started execution has
// exactly one terminal record (interrupted for the killed one), no claim is
// left, nothing is sent for an interrupted run, and no occurrence runs
// twice.
func TestKillAtEachCronFaultPoint(t *testing.T) {
	bins := harness.Build(t)
	for _, point := range []string{"cron.due", "cron.claimed", "cron.started", "cron.heartbeat", "cron.finished"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			t0 := time.Date(2026, 11, 29, 8, 59, 0, 0, time.UTC)
			vc := harness.NewVirtualClock(t, dir, t0)
			fake := harness.StartFake(t, bins, dir, vc.Env())
			gate := filepath.Join(dir, "gate")
			h := harness.NewHerald(bins, filepath.Join(dir, "home"), cronEnv("chat="+fake.PlatformURL("telegram"), vc.Env(),
				"HERALD_CLAIM_TTL=60s", "HERALD_HEARTBEAT=10s")...)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			a := h.Start(t, "HERALD_FAULTS="+point+"=kill")
			pidFile := filepath.Join(dir, "grandchild.pid")
			// The job leaves a grandchild in its process group: nothing a run
			// held may outlive it, even when herald dies mid-run.
			job := harness.Job{Name: "daily", Spec: "0 9 * * *", Zone: "UTC", Platform: "chat", ChatID: "c",
				Action: map[string]any{"kind": "exec", "env": []string{"E2E_RUN=" + dir}, "command": []string{"sh", "-c",
					"sleep 1000 & echo $! >> " + pidFile + "; while [ ! -f " + gate + " ]; do sleep 0.02; done; echo done at $HERALD_SLOT"}}}
			if _, err := a.CreateJob(ctx, job); err != nil {
				t.Fatal(err)
			}
			vc.Set(t, t0.Add(time.Minute)) // 09:00: due
			if point == "cron.heartbeat" {
				waitFor(t, ctx, h.Home, "running")
				vc.Advance(t, 11*time.Second)
			}
			if point == "cron.finished" {
				waitFor(t, ctx, h.Home, "running")
				if err := os.WriteFile(gate, nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := a.WaitLine(ctx, regexp.MustCompile(`^faultpoint: `+regexp.QuoteMeta(point)+` hit 1: kill`)); err != nil {
				t.Fatalf("the armed point %s never fired: %v", point, err)
			}
			if err := a.Wait(ctx); err != nil || !a.ExitedBySignal(syscall.SIGKILL) {
				t.Fatalf("%s did not die of SIGKILL: %v", a.Name, a.ExitErr())
			}
			os.WriteFile(gate, nil, 0o644) // let any rerun finish at once
			b := h.Start(t)
			if err := harness.Settled(ctx, vc.Now(), b); err != nil {
				t.Fatal(err)
			}
			if point != "cron.due" {
				// The dead owner is seen at once (its lock is free), before any
				// claim could expire: boot recovery has already ended the run.
				waitFor(t, ctx, h.Home, "interrupted")
			}
			vc.Set(t, t0.Add(24*time.Hour+time.Minute)) // the next day's occurrence runs clean
			if err := harness.Settled(ctx, vc.Now(), b); err != nil {
				t.Fatal(err)
			}
			b.Stop(t)

			l, err := harness.OpenLedger(h.Home)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			execs, _ := l.Executions(ctx)
			rows, _ := l.Rows(ctx)
			var bad []string
			bad = append(bad, harness.CheckTermination(execs, rows)...)
			bySlot := map[time.Time][]harness.Execution{}
			for _, e := range execs {
				bySlot[e.Slot] = append(bySlot[e.Slot], e)
			}
			first, second := bySlot[t0.Add(time.Minute)], bySlot[t0.Add(24*time.Hour+time.Minute)]
			switch {
			case point == "cron.due":
				// Killed before claiming: the restart claims the occurrence
				// (late, within its grace) and runs it once.
				if len(first) != 1 || first[0].State != "succeeded" {
					bad = append(bad, fmt.Sprintf("09:00 executions %+v, want one succeeded", first))
				}
			default:
				if len(first) != 1 || first[0].State != "interrupted" || first[0].MessageID != 0 {
					bad = append(bad, fmt.Sprintf("09:00 executions %+v, want one interrupted with nothing sent", first))
				}
			}
			if len(second) != 1 || second[0].State != "succeeded" {
				bad = append(bad, fmt.Sprintf("next day's executions %+v, want one succeeded", second))
			}
			if len(execs) != 2 {
				bad = append(bad, fmt.Sprintf("%d executions in all, want 2 (nothing re-run)", len(execs)))
			}
			entries, _ := fake.Entries()
			bad = append(bad, harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true})...)
			if want := 1; point == "cron.due" {
				want = 2
				if len(entries) != want {
					bad = append(bad, fmt.Sprintf("%d deliveries, want %d", len(entries), want))
				}
			} else if len(entries) != want {
				bad = append(bad, fmt.Sprintf("%d deliveries, want %d (nothing for the interrupted run)", len(entries), want))
			}
			pids, _ := os.ReadFile(pidFile)
			for _, f := range strings.Fields(string(pids)) {
				if pid, _ := strconv.Atoi(f); pid > 0 && harness.JobProcessAlive(pid, "E2E_RUN="+dir) {
					bad = append(bad, fmt.Sprintf("the job's grandchild %d outlived its run", pid))
				}
			}
			if len(bad) > 0 {
				t.Fatalf("after a SIGKILL at %s: %d violations:\n%s", point, len(bad), harness.Report(bad))
			}
		})
	}
}

// waitFor waits until some execution is in state.
func waitFor(t *testing.T, ctx context.Context, home, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := harness.OpenLedger(home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = harness.Eventually(ctx, "an execution "+state, func() error {
		es, err := l.Executions(ctx)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.State == state {
				return nil
			}
		}
		return fmt.Errorf("none %s", state)
	})
	if err != nil {
		t.Fatal(err)
	}
}
