package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"herald/internal/clock"
	"herald/internal/store"
)

func open(t *testing.T, path string, clk clock.Clock, opts ...func(*store.Options)) *store.DB {
	t.Helper()
	o := store.Options{Path: path}
	for _, f := range opts {
		f(&o)
	}
	db, err := store.Open(context.Background(), o, clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConcurrentOpensApplyEachMigrationOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", store.FileName)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := store.Open(context.Background(), store.Options{Path: path}, clock.Real{})
			if err != nil {
				errs <- err
				return
			}
			db.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db := open(t, path, clock.Real{})
	ms, _ := store.Migrations()
	v, err := db.SchemaVersion(context.Background())
	if err != nil || v != len(ms) {
		t.Fatalf("schema version = %d, %v; want %d", v, err, len(ms))
	}
	if err := db.IntegrityCheck(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFixesNowAtBeginAndRollsBackOnError(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)
	m := clock.NewManual(t0)
	db := open(t, filepath.Join(t.TempDir(), store.FileName), m)
	ctx := context.Background()
	boom := errors.New("boom")
	err := db.Write(ctx, func(tx *store.Tx) error {
		m.Advance(time.Hour)
		if !tx.Now.Equal(t0) {
			t.Errorf("tx.Now = %v, want the instant at BEGIN %v", tx.Now, t0)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO chat_holds (platform, chat_id, not_before, reason) VALUES ('p', 'c', ?, 'x')`, store.FormatTime(tx.Now)); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want boom", err)
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM chat_holds`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("rolled-back row visible: n=%d err=%v", n, err)
	}
}

func TestALockedDatabaseIsErrBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), store.FileName)
	holder := open(t, path, clock.Real{})
	waiter := open(t, path, clock.Real{}, func(o *store.Options) { o.BusyTimeout = 50 * time.Millisecond })
	ctx := context.Background()
	locked := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- holder.Write(ctx, func(tx *store.Tx) error {
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	err := waiter.Write(ctx, func(tx *store.Tx) error { return nil })
	close(release)
	if !errors.Is(err, store.ErrBusy) {
		t.Fatalf("Write under another process's lock = %v, want ErrBusy", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTimeFormatSortsInTimeOrder(t *testing.T) {
	base := time.Date(2026, 3, 8, 6, 59, 59, 999999999, time.UTC)
	ts := []time.Time{base.Add(time.Nanosecond), base, base.Add(-time.Hour), base.Add(1000 * time.Hour)}
	var texts []string
	for _, tt := range ts {
		texts = append(texts, store.FormatTime(tt.In(time.FixedZone("x", 5*3600))))
	}
	sort.Strings(texts)
	for i := 1; i < len(texts); i++ {
		a, _ := store.ParseTime(texts[i-1])
		b, _ := store.ParseTime(texts[i])
		if !a.Before(b) {
			t.Fatalf("text order %q < %q is not time order", texts[i-1], texts[i])
		}
	}
	got, err := store.ParseTime(store.FormatTime(base))
	if err != nil || !got.Equal(base) {
		t.Fatalf("round trip = %v, %v", got, err)
	}
}
