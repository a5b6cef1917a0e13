package clock_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"herald/internal/clock"
)

var t0 = time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)

func TestManualFiresTimersWhenReached(t *testing.T) {
	m := clock.NewManual(t0)
	a := m.NewTimer(2 * time.Second)
	b := m.NewTimer(time.Second)
	m.Advance(999 * time.Millisecond)
	select {
	case <-b.C():
		t.Fatal("timer fired before its deadline")
	default:
	}
	m.Advance(time.Millisecond)
	if got := <-b.C(); !got.Equal(t0.Add(time.Second)) {
		t.Fatalf("timer delivered %v, want %v", got, t0.Add(time.Second))
	}
	if a.Stop() != true {
		t.Fatal("Stop of a pending timer reported false")
	}
	m.Advance(time.Hour)
	select {
	case <-a.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if m.Pending() != 0 {
		t.Fatalf("pending = %d, want 0", m.Pending())
	}
}

func TestManualStepBackwardFiresNothing(t *testing.T) {
	m := clock.NewManual(t0)
	tm := m.NewTimer(time.Minute)
	m.Set(t0.Add(-time.Hour))
	select {
	case <-tm.C():
		t.Fatal("timer fired on a backward step")
	default:
	}
	m.Set(t0.Add(time.Minute))
	<-tm.C()
}

func TestSleepReturnsContextError(t *testing.T) {
	m := clock.NewManual(t0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- clock.Sleep(ctx, m, time.Hour) }()
	if err := m.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
}

func TestWithDeadlineFollowsVirtualTime(t *testing.T) {
	m := clock.NewManual(t0)
	ctx, cancel := clock.WithTimeout(context.Background(), m, time.Hour)
	defer cancel()
	if err := m.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	m.Advance(59 * time.Minute)
	select {
	case <-ctx.Done():
		t.Fatal("context ended before its virtual deadline")
	default:
	}
	m.Advance(time.Minute)
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v, want DeadlineExceeded", ctx.Err())
	}
	child, cc := context.WithCancel(ctx)
	defer cc()
	<-child.Done()
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Fatalf("child Err = %v, want DeadlineExceeded", child.Err())
	}
}

func TestFileClocksShareOneTimeLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "clock")
	if err := clock.WriteFile(path, t0); err != nil {
		t.Fatal(err)
	}
	a, err := clock.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := clock.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !a.Now().Equal(t0) || !b.Now().Equal(t0) {
		t.Fatalf("clocks read %v and %v, want %v", a.Now(), b.Now(), t0)
	}
	tm := b.NewTimer(90 * time.Second)
	if err := clock.WriteFile(path, t0.Add(89*time.Second)); err != nil {
		t.Fatal(err)
	}
	if !a.Now().Equal(t0.Add(89 * time.Second)) {
		t.Fatalf("a.Now = %v after the file moved", a.Now())
	}
	select {
	case <-tm.C():
		t.Fatal("timer fired before the file reached its deadline")
	default:
	}
	if err := clock.WriteFile(path, t0.Add(90*time.Second+time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("timer did not fire after the file passed its deadline")
	}
}

func TestOpenFileRejectsGarbage(t *testing.T) {
	dir := t.TempDir()
	if _, err := clock.OpenFile(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("OpenFile of a missing file succeeded")
	}
	env := map[string]string{clock.EnvFile: filepath.Join(dir, "missing")}
	if _, _, err := clock.FromEnv(func(k string) string { return env[k] }); err == nil {
		t.Fatal("FromEnv with a missing clock file succeeded")
	}
	c, closeFn, err := clock.FromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	if _, ok := c.(clock.Real); !ok {
		t.Fatalf("FromEnv without %s = %T, want clock.Real", clock.EnvFile, c)
	}
}

func TestIdleReturnsOnWakeDeadlineOrContext(t *testing.T) {
	m := clock.NewManual(t0)
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() { clock.Idle(context.Background(), m, wake, t0.Add(time.Hour), time.Hour); close(done) }()
	if err := m.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	m.Advance(time.Hour)
	<-done // the virtual deadline

	done = make(chan struct{})
	go func() { clock.Idle(context.Background(), m, wake, time.Time{}, time.Hour); close(done) }()
	wake <- struct{}{}
	<-done // a wake-up

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	clock.Idle(ctx, m, wake, time.Time{}, time.Hour) // a done context
	clock.Idle(context.Background(), m, wake, time.Time{}, time.Millisecond)
}
