package cronsoak_test

import (
	"fmt"
	"sort"
	"time"

	"herald/tzoracle"
)

// model is what the scheduler must have done by now, for one job: its
// occurrences come from the independent oracle (tzoracle), never from
// herald's cron package, and the catch-up policy of SPEC §5 (default
// "latest", grace clamp(period/2, 2 min, 2 h)) decides which of them fire
// when a tick finds them late.
type model struct {
	name    string
	spec    string
	zone    string         // as given to herald ("" = the server zone)
	loc     *time.Location // the zone the spec is read on
	anchor  time.Time      // intervals
	oneShot bool
	// grace is how late an occurrence may be claimed and still fire on
	// time: clamp(period/2, 2 min, 2 h), or the one-shot grace (120 s).
	grace time.Duration
	// occ are the oracle's occurrences in (t0, horizon), ascending.
	occ     []time.Time
	horizon time.Time

	next   time.Time          // the stored next occurrence the model expects; zero: none
	missed int                // jobs.missed
	fired  map[time.Time]bool // scheduled slots that must have an execution → catch-up flag
}

// graceFor is SPEC §5's default grace for a period.
func graceFor(period time.Duration) time.Duration {
	return min(max(period/2, 2*time.Minute), 2*time.Hour)
}

// newModel asks the oracle for every occurrence of spec in (t0, horizon).
func newModel(name, spec, zone string, loc *time.Location, anchor time.Time, period time.Duration, oneShot bool, t0, horizon time.Time) (*model, error) {
	occ, err := tzoracle.Occurrences(spec, loc, anchor, t0.Add(time.Nanosecond), horizon)
	if err != nil {
		return nil, fmt.Errorf("oracle for %s (%s in %s): %w", name, spec, loc, err)
	}
	m := &model{name: name, spec: spec, zone: zone, loc: loc, anchor: anchor, oneShot: oneShot, occ: occ, horizon: horizon,
		fired: map[time.Time]bool{}}
	if oneShot {
		m.grace = 120 * time.Second
	} else {
		m.grace = graceFor(period)
	}
	m.next, _ = m.after(t0)
	return m, nil
}

// after is the first occurrence strictly after t.
func (m *model) after(t time.Time) (time.Time, bool) {
	i := sort.Search(len(m.occ), func(i int) bool { return m.occ[i].After(t) })
	if i == len(m.occ) {
		if !m.oneShot && t.Before(m.horizon) {
			panic(fmt.Sprintf("model %s: no oracle occurrence after %s before the horizon %s", m.name, t.Format(time.RFC3339), m.horizon.Format(time.RFC3339)))
		}
		return time.Time{}, false
	}
	return m.occ[i], true
}

// atOrBefore is the last occurrence at or before t.
func (m *model) atOrBefore(t time.Time) (time.Time, bool) {
	i := sort.Search(len(m.occ), func(i int) bool { return m.occ[i].After(t) })
	if i == 0 {
		return time.Time{}, false
	}
	return m.occ[i-1], true
}

// count is the number of occurrences in [from, to].
func (m *model) count(from, to time.Time) int {
	lo := sort.Search(len(m.occ), func(i int) bool { return !m.occ[i].Before(from) })
	hi := sort.Search(len(m.occ), func(i int) bool { return m.occ[i].After(to) })
	return max(hi-lo, 0)
}

// advance applies a tick at now: if the job is due, the catch-up policy
// decides what fires (once per occurrence) and what is missed, and the next
// occurrence moves strictly after now. It returns the slots fired.
func (m *model) advance(now time.Time) []time.Time {
	if m.next.IsZero() || m.next.After(now) {
		return nil
	}
	seen := m.next
	var fire []time.Time
	catchUp := map[time.Time]bool{}
	switch {
	case m.oneShot:
		if now.Sub(seen) > m.grace {
			m.missed++
		} else {
			fire = append(fire, seen)
		}
	default:
		latest, _ := m.atOrBefore(now)
		// The occurrences within the grace, newest first; cursor ends on
		// the newest one older than the grace, if any is at or after seen.
		var inGrace []time.Time
		cursor, missedSome := latest, true
		for now.Sub(cursor) <= m.grace {
			inGrace = append([]time.Time{cursor}, inGrace...)
			p, ok := m.atOrBefore(cursor.Add(-time.Nanosecond))
			if !ok || p.Before(seen) {
				missedSome = false
				break
			}
			cursor = p
		}
		switch {
		case !missedSome:
			fire = inGrace
		case len(inGrace) == 0: // catch-up "latest": the newest missed one fires, once
			fire = []time.Time{cursor}
			catchUp[cursor] = true
			m.missed += m.count(seen, cursor) - 1
		default: // a newer occurrence is on time: every older one was missed
			fire = inGrace
			m.missed += m.count(seen, cursor)
		}
	}
	for _, f := range fire {
		if _, dup := m.fired[f]; dup {
			panic(fmt.Sprintf("model %s fires %s twice", m.name, f.Format(time.RFC3339)))
		}
		m.fired[f] = catchUp[f]
	}
	m.next, _ = m.after(now)
	return fire
}
