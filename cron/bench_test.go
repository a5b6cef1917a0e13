package cron_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/cron"
	"herald/internal/clock"
	"herald/internal/store"
)

// seedJobs inserts n daily jobs directly (creating 100,000 through the API
// would dominate the benchmark's set-up), all next due at next.
func seedJobs(tb testing.TB, db *store.DB, n int, next time.Time) {
	tb.Helper()
	err := db.Write(context.Background(), func(tx *store.Tx) error {
		stmt, err := tx.PrepareContext(context.Background(), `INSERT INTO jobs (name, spec, zone, anchor, action,
			platform, chat_id, budget_ms, next_run_at, created_at, updated_at)
			VALUES (?, '0 9 * * *', 'UTC', ?, '{"kind":"message","text":"x"}', 'p', 'c', 60000, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		now := store.FormatTime(tx.Now)
		for i := 0; i < n; i++ {
			if _, err := stmt.ExecContext(context.Background(), fmt.Sprintf("bench-%06d", i), now, store.FormatTime(next), now, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
}

func benchScheduler(tb testing.TB, clk clock.Clock) (*cron.Scheduler, *store.DB) {
	tb.Helper()
	db, err := store.Open(context.Background(), store.Options{Path: filepath.Join(tb.TempDir(), store.FileName)}, clk)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	s, err := cron.New(db, nil, &liveSet{}, nil, cron.Config{Owner: "bench", ServerZone: time.UTC})
	if err != nil {
		tb.Fatal(err)
	}
	return s, db
}

// TestTheDueScanIsOneIndexProbe checks SQLite's plan for the due scan: it
// must search the partial index on next_run_at, not scan the jobs table.
func TestTheDueScanIsOneIndexProbe(t *testing.T) {
	_, db := benchScheduler(t, clock.NewManual(time.Now()))
	err := db.Read(context.Background(), func(tx *store.Tx) error {
		r, err := tx.QueryContext(context.Background(), `EXPLAIN QUERY PLAN SELECT id, next_run_at FROM jobs
			WHERE paused = 0 AND deleted = 0 AND next_run_at IS NOT NULL AND next_run_at <= ?
			ORDER BY next_run_at LIMIT ?`, store.FormatTime(time.Now()), 100)
		if err != nil {
			return err
		}
		defer r.Close()
		var plan []string
		for r.Next() {
			var id, parent, unused int
			var detail string
			if err := r.Scan(&id, &parent, &unused, &detail); err != nil {
				return err
			}
			plan = append(plan, detail)
		}
		if p := strings.Join(plan, "; "); !strings.Contains(p, "USING INDEX jobs_due") || strings.Contains(p, "TEMP B-TREE") {
			t.Fatalf("due scan plan %q: want a search of jobs_due in index order", p)
		}
		return r.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkTickNoneDue: one tick over 100,000 jobs of which none is due.
func BenchmarkTickNoneDue(b *testing.B) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	s, db := benchScheduler(b, clk)
	seedJobs(b, db, 100000, t0.Add(time.Hour))
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := s.RunOnce(ctx, ctx)
		if err != nil || len(rep.Started) != 0 {
			b.Fatalf("tick: %v, started %d", err, len(rep.Started))
		}
	}
}

// BenchmarkClaim1000Due: claiming 1,000 due occurrences among 100,000 jobs
// (ticks until none is due), each claim in the transaction that advances its
// job; the executions (a message action recorded in the outbox) are counted
// in the figure too.
func BenchmarkClaim1000Due(b *testing.B) {
	t0 := time.Date(2026, 11, 29, 9, 1, 0, 0, time.UTC)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clk := clock.NewManual(t0)
		s, db := benchScheduler(b, clk)
		seedJobs(b, db, 100000, t0.Add(24*time.Hour-time.Minute))
		seedJobs2 := func() {
			err := db.Write(context.Background(), func(tx *store.Tx) error {
				_, err := tx.ExecContext(context.Background(), `UPDATE jobs SET next_run_at = ? WHERE id <= 1000`, store.FormatTime(t0.Add(-time.Minute))) // 09:00, an occurrence
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		seedJobs2()
		ctx := context.Background()
		b.StartTimer()
		claimed := 0
		for {
			rep, err := s.RunOnce(ctx, ctx)
			if err != nil {
				b.Fatal(err)
			}
			if len(rep.Started) == 0 {
				break
			}
			claimed += len(rep.Started)
		}
		s.Wait()
		if claimed != 1000 {
			b.Fatalf("claimed %d, want 1000", claimed)
		}
	}
}
