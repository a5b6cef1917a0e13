// Package clock is herald's only source of time.
//
// Everything that reads the time, sleeps or waits on a deadline takes a Clock
// (SPEC §6). Three implementations exist: Real (the system clock), Manual (an
// in-memory clock a test moves by hand) and File (a virtual clock read from a
// file that several processes share, selected by HERALD_CLOCK_FILE). A build
// test fails when any non-test file outside this package calls time.Now,
// time.Sleep, time.After, time.NewTimer, time.NewTicker or time.Tick.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers on one time line.
//
// Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current instant on this clock.
	Now() time.Time
	// NewTimer returns a timer that fires once, when this clock reaches
	// Now()+d. A d <= 0 fires at once.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer on a Clock.
type Timer interface {
	// C delivers the clock's time once, when the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it stopped a
	// pending timer (false if it had already fired or been stopped).
	Stop() bool
}

// Sleep blocks until c has advanced by d or ctx is done, whichever is first.
// It returns ctx.Err() when ctx ended the wait, nil otherwise.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

// Since returns c.Now() - t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// WithDeadline returns a context that is cancelled when c reaches deadline,
// or when parent is done. On the Real clock it is context.WithDeadline; on a
// virtual clock it follows virtual time, so a run budget of one virtual hour
// expires when a test advances the clock file past it. Call cancel to release
// the timer.
func WithDeadline(parent context.Context, c Clock, deadline time.Time) (context.Context, context.CancelFunc) {
	if _, ok := c.(Real); ok {
		return context.WithDeadline(parent, deadline)
	}
	ctx, cancel := context.WithCancelCause(parent)
	t := c.NewTimer(deadline.Sub(c.Now()))
	go func() {
		select {
		case <-t.C():
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return virtualDeadline{ctx}, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// virtualDeadline reports context.DeadlineExceeded from Err when its virtual
// deadline ended it, as a context.WithDeadline would, so callers can branch on
// errors.Is(err, context.DeadlineExceeded) whichever clock runs.
type virtualDeadline struct{ context.Context }

func (v virtualDeadline) Err() error {
	err := v.Context.Err()
	if err != nil && context.Cause(v.Context) == context.DeadlineExceeded {
		return context.DeadlineExceeded
	}
	return err
}

// WithTimeout is WithDeadline(parent, c, c.Now()+d).
func WithTimeout(parent context.Context, c Clock, d time.Duration) (context.Context, context.CancelFunc) {
	return WithDeadline(parent, c, c.Now().Add(d))
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// PollReal calls cond every interval of real (wall) time until it returns
// true or ctx is done. It exists for waits on the outside world — a file a
// test will create, a lock another process holds — that must make progress
// even while a virtual clock stands still.
func PollReal(ctx context.Context, interval time.Duration, cond func() bool) error {
	if cond() {
		return nil
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tk.C:
			if cond() {
				return nil
			}
		}
	}
}

// Idle blocks a service loop until there may be work: ctx is done, wake
// receives, c reaches at (when at is not zero), or poll of real time has
// passed. The poll runs on real time because it looks for what other
// processes did, which a virtual clock standing still must not hide.
func Idle(ctx context.Context, c Clock, wake <-chan struct{}, at time.Time, poll time.Duration) {
	var due <-chan time.Time
	if !at.IsZero() {
		t := c.NewTimer(at.Sub(c.Now()))
		defer t.Stop()
		due = t.C()
	}
	p := time.NewTimer(poll)
	defer p.Stop()
	select {
	case <-ctx.Done():
	case <-wake:
	case <-due:
	case <-p.C:
	}
}
