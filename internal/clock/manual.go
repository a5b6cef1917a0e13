package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Manual is a virtual clock that moves only when told to (Set, Advance).
// Timers fire, in deadline order, when the clock reaches their deadline.
// It is the in-process clock of unit tests and the core of File.
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*manualTimer
	waiters []chan struct{} // notified whenever a timer is created
}

// NewManual returns a Manual clock standing at t.
func NewManual(t time.Time) *Manual { return &Manual{now: t} }

// Now returns the clock's current instant.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer firing when the clock reaches Now()+d.
func (m *Manual) NewTimer(d time.Duration) Timer {
	m.mu.Lock()
	t := &manualTimer{m: m, at: m.now.Add(d), c: make(chan time.Time, 1)}
	if d <= 0 {
		t.fired = true
		t.c <- m.now
	} else {
		m.timers = append(m.timers, t)
	}
	ws := m.waiters
	m.waiters = nil
	m.mu.Unlock()
	for _, w := range ws {
		close(w)
	}
	return t
}

// Advance moves the clock forward by d and fires every timer now due.
func (m *Manual) Advance(d time.Duration) { m.Set(m.Now().Add(d)) }

// Set moves the clock to t (forward or backward) and fires every timer whose
// deadline is at or before t. A step backward fires nothing.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.now = t
	var due []*manualTimer
	keep := m.timers[:0]
	for _, tm := range m.timers {
		if !tm.at.After(t) {
			tm.fired = true
			due = append(due, tm)
		} else {
			keep = append(keep, tm)
		}
	}
	for i := len(keep); i < len(m.timers); i++ {
		m.timers[i] = nil
	}
	m.timers = keep
	m.mu.Unlock()
	sort.SliceStable(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	for _, tm := range due {
		tm.c <- t
	}
}

// Pending returns the number of timers that have not fired or been stopped.
func (m *Manual) Pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// NextDeadline returns the earliest pending timer deadline, if any.
func (m *Manual) NextDeadline() (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best time.Time
	for i, tm := range m.timers {
		if i == 0 || tm.at.Before(best) {
			best = tm.at
		}
	}
	return best, len(m.timers) > 0
}

// WaitForTimers blocks until at least n timers are pending or ctx is done.
// A test uses it to know that the code under test is parked on the clock
// before advancing it, instead of sleeping.
func (m *Manual) WaitForTimers(ctx context.Context, n int) error {
	for {
		m.mu.Lock()
		if len(m.timers) >= n {
			m.mu.Unlock()
			return nil
		}
		w := make(chan struct{})
		m.waiters = append(m.waiters, w)
		m.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w:
		}
	}
}

type manualTimer struct {
	m     *Manual
	at    time.Time
	c     chan time.Time
	fired bool // guarded by m.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	if t.fired {
		return false
	}
	t.fired = true
	for i, o := range t.m.timers {
		if o == t {
			t.m.timers = append(t.m.timers[:i], t.m.timers[i+1:]...)
			break
		}
	}
	return true
}
