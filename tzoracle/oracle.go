// Package tzoracle is an independent, brute-force reference for "at which
// instants does this schedule fire in this zone", used only by tests to check
// the scheduler in herald/cron.
//
// It implements the DST policy of SPEC §5 (the Vixie cron / cronie rule)
// directly from the rule text, by walking UTC instants minute by minute and
// reading the zone's wall clock at each one, instead of doing calendar
// arithmetic on wall times. That makes it slow-ish but hard to get wrong in
// the same way as a calendar algorithm, which is the point: it must share no
// code or approach with the scheduler (it imports only the standard library,
// and embeds time/tzdata so that it behaves the same on hosts without
// /usr/share/zoneinfo).
//
// Rules, with their source:
//
//   - Fixed-time cron specs (neither the minute nor the hour field starts
//     with '*'): every matching wall date-time fires once. A reading that falls
//     in a gap (spring forward) fires at the first instant after the gap; a
//     reading that occurs twice (fall back) fires at its first pass only.
//     Vixie cron 3 / cronie, "fixed-time jobs"; SPEC §5.
//   - Wildcard cron specs (minute or hour starts with '*'): fire at every
//     instant whose wall reading matches; both passes of a fold fire, readings
//     missing in a gap never happen so never fire. Vixie cron / cronie,
//     "wildcard jobs"; SPEC §5.
//   - Day-of-month and day-of-week are OR-ed when neither field's text starts
//     with '*', AND-ed otherwise (Vixie cron; crontab(5)).
//   - Occurrences of one job that land on one instant coalesce (SPEC §5).
//   - Intervals ("every 90m", "@every 1h30m") are anchor + k·period for every
//     integer k, blind to wall clocks (SPEC §5).
//   - One-shots ("at 2026-12-01T09:00" in the zone, or an instant with an
//     offset) fire once; a wall one-shot in a gap or fold follows the
//     fixed-time rule (SPEC §5).
package tzoracle

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	_ "time/tzdata" // the oracle must not depend on the host's zoneinfo
)

// warmup is how far before the window a fixed-time walk starts, so that the
// high-water mark of wall readings is right at the window's first instant:
// it must exceed the widest fold (a wall reading repeated at most ~24 h
// later, e.g. Alaska 1867, Pacific date-line moves).
const warmup = 3 * 24 * 60 * 60 // seconds

// Occurrences returns every instant in [from, to) at which spec fires when
// read in loc, ascending and without duplicates, each in UTC.
//
// spec is a 5-field cron spec (minute hour day-of-month month day-of-week,
// with "*", lists, ranges, steps, JAN-DEC, SUN-SAT, day-of-week 0-7 where 7
// is Sunday, and robfig/cron's "N/step" meaning "N-max/step"), a descriptor
// (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly), an
// interval ("every D" or "@every D", D a positive Go duration), or a one-shot
// ("at 2006-01-02T15:04[:05]" read in loc, or "at" an RFC 3339 instant with Z
// or an offset). Keywords and names are case-insensitive.
//
// Cron occurrences are whole UTC minutes (a wall reading is the instant plus
// the zone offset, floored to the minute; only historical LMT offsets have
// seconds). Interval and one-shot occurrences are exact instants, to the
// nanosecond.
//
// anchor is read only for interval specs, where it is required (a zero anchor
// is an error) and must lie within about 290 years of from (the limit of
// time.Duration). loc must not be nil; it is ignored by intervals and by
// one-shots with an offset. An empty or reversed window gives no occurrences.
//
// The error for a bad spec names the spec, the field and the reason; it is
// the same as Validate's.
func Occurrences(spec string, loc *time.Location, anchor, from, to time.Time) ([]time.Time, error) {
	sp, err := parse(spec)
	if err != nil {
		return nil, err
	}
	if loc == nil {
		return nil, errors.New("tzoracle: nil location")
	}
	if !from.Before(to) {
		return nil, nil
	}
	switch sp.kind {
	case kindInterval:
		return intervalOccurrences(sp.period, anchor, from, to)
	case kindAtInstant:
		return inWindow(sp.at, from, to), nil
	case kindAtWall:
		t, err := firstReaching(loc, sp.wall)
		if err != nil {
			return nil, err
		}
		return inWindow(t, from, to), nil
	default:
		w := &walker{sp: sp, clock: wallClock{loc: loc}, cachedDay: math.MinInt64}
		return w.walk(from, to), nil
	}
}

func inWindow(t, from, to time.Time) []time.Time {
	if t.Before(from) || !t.Before(to) {
		return nil
	}
	return []time.Time{t.UTC()}
}

func intervalOccurrences(period time.Duration, anchor, from, to time.Time) ([]time.Time, error) {
	if anchor.IsZero() {
		return nil, errors.New("tzoracle: an interval spec needs an anchor instant")
	}
	d := from.Sub(anchor)
	if d == math.MaxInt64 || d == math.MinInt64 { // Sub saturated
		return nil, fmt.Errorf("tzoracle: anchor %s is too far from the window start %s", anchor.Format(time.RFC3339), from.Format(time.RFC3339))
	}
	// k·period is at most |d| in size, so it cannot overflow; the two loops
	// then settle on the first grid point not before from.
	t := anchor.Add(d / period * period)
	for t.Before(from) {
		t = t.Add(period)
	}
	for !t.Add(-period).Before(from) {
		t = t.Add(-period)
	}
	var out []time.Time
	for ; t.Before(to); t = t.Add(period) {
		out = append(out, t.UTC())
	}
	return out, nil
}

// firstReaching returns the first instant at which loc's wall clock reads
// wall (given as a UTC Time carrying the reading) or later. That is the
// fixed-time rule for one reading: the reading itself when it occurs once,
// its first pass in a fold, the end of the gap when it never occurs.
// It walks zone periods forward from an instant whose reading is certainly
// earlier; within one period the offset is constant, so the reading rises
// with the instant and the crossing can be solved for.
func firstReaching(loc *time.Location, wall time.Time) (time.Time, error) {
	t := wall.Add(-warmup * time.Second) // offsets are well under ±3 days
	for range 100 {
		lt := t.In(loc)
		_, off := lt.Zone()
		offset := time.Duration(off) * time.Second
		_, end := lt.ZoneBounds()
		if !t.Add(offset).Before(wall) {
			return t, nil // the clock jumped over wall at the start of this period
		}
		if at := wall.Add(-offset); end.IsZero() || at.Before(end) {
			return at, nil
		}
		if !end.After(t) {
			return time.Time{}, fmt.Errorf("tzoracle: zone %s: ZoneBounds did not advance at %s", loc, t.Format(time.RFC3339))
		}
		t = end
	}
	return time.Time{}, fmt.Errorf("tzoracle: zone %s: no instant reads %s", loc, wall.Format("2006-01-02T15:04:05"))
}

// wallClock reads loc's wall clock at a Unix second. It caches the zone
// period (from time.Time.ZoneBounds) around the last instant read, because
// within one period the offset cannot change; any instant outside it is read
// from the time package afresh. TestWallClockAgreesWithTimeIn checks the
// cache against t.In(loc) minute by minute.
type wallClock struct {
	loc        *time.Location
	start, end int64 // [start, end) in Unix seconds; empty until first use
	off        int64 // seconds east of UTC
}

// wallMinute returns the wall reading at Unix second u as whole minutes since
// 1970-01-01T00:00 on the wall (floored).
func (c *wallClock) wallMinute(u int64) int64 {
	if u < c.start || u >= c.end {
		t := time.Unix(u, 0).In(c.loc)
		_, off := t.Zone()
		s, e := t.ZoneBounds()
		c.off = int64(off)
		c.start, c.end = math.MinInt64, math.MaxInt64
		if !s.IsZero() {
			c.start = s.Unix()
		}
		if !e.IsZero() {
			c.end = e.Unix()
		}
		if u < c.start || u >= c.end { // never trust a cache that excludes its own instant
			c.start, c.end = u, u+1
		}
	}
	return floorDiv(u+c.off, 60)
}

type walker struct {
	sp    *spec
	clock wallClock

	cachedDay   int64 // wall day (days since 1970-01-01) of cachedMatch
	cachedMatch bool
}

// walk visits UTC whole minutes from just before from up to to and applies
// the fixed-time or wildcard rule at each one. To be fast it jumps over runs
// of instants that cannot fire, but only inside one zone period (constant
// offset): there the readings are consecutive minutes, and if none of them
// matches, neither rule fires on them and the fixed rule's high-water mark
// simply ends at the last one. TestWalkAgreesWithNaiveWalk checks this
// against a walk that reads t.In(loc) at every minute and never jumps.
func (w *walker) walk(from, to time.Time) []time.Time {
	first := ceilDiv(ceilSecond(from), 60) * 60 // first whole UTC minute ≥ from
	end := ceilSecond(to)                       // instants u < end are before to
	wildcard := w.sp.kind == kindWildcard

	u := first
	var hwm int64 // fixed rule: highest wall reading seen so far
	if !wildcard {
		u = first - warmup
		hwm = w.clock.wallMinute(u)
		u += 60
	}
	var fires []int64 // Unix seconds; converted once at the end (cheaper for the GC)
	for ; u < end; u += 60 {
		r := w.clock.wallMinute(u)
		fire := false
		if wildcard {
			fire = w.matches(r)
		} else if r > hwm {
			// Normally r = hwm+1; after a gap every skipped reading is due
			// now, coalesced into this one instant; in a fold (r ≤ hwm) the
			// readings were all seen on the first pass.
			for m := hwm + 1; m <= r && !fire; m++ {
				fire = w.matches(m)
			}
			hwm = r
		}
		if fire && u >= first {
			fires = append(fires, u)
		}

		// Jump over following instants that cannot fire, staying inside the
		// current zone period and the window.
		lastU := min(w.clock.end, end) - 1
		if lastU < u+60 {
			continue
		}
		maxR := r + (lastU-u)/60 // reading at the last whole minute we may jump to
		x := w.dullThrough(r+1, maxR)
		if x > r {
			u += (x - r) * 60
			hwm = max(hwm, x)
		}
	}
	if len(fires) == 0 {
		return nil
	}
	out := make([]time.Time, len(fires))
	for i, f := range fires {
		out[i] = time.Unix(f, 0).UTC()
	}
	return out
}

// dullThrough returns the largest x ≤ limit such that no wall minute in
// [n, x] can match, judging by date, hour and minute; n-1 if n may match.
func (w *walker) dullThrough(n, limit int64) int64 {
	x := n - 1
	for x < limit {
		m := x + 1
		day := floorDiv(m, 1440)
		switch {
		case !w.dateMatches(day):
			x = day*1440 + 1439
		case w.sp.hour&(1<<uint(floorMod(m, 1440)/60)) == 0:
			x = floorDiv(m, 60)*60 + 59
		case w.sp.minute&(1<<uint(floorMod(m, 60))) == 0:
			// Up to the minute before the next listed minute of this hour,
			// or to the end of the hour if there is none.
			later := w.sp.minute >> uint(floorMod(m, 60)) // bit 0 is minute m
			if later == 0 {
				x = floorDiv(m, 60)*60 + 59
			} else {
				x = m + int64(bits.TrailingZeros64(later)) - 1
			}
		default:
			return x
		}
	}
	return limit
}

// matches reports whether wall minute m (minutes since 1970-01-01T00:00 on
// the wall) satisfies every field.
func (w *walker) matches(m int64) bool {
	return w.sp.minute&(1<<uint(floorMod(m, 60))) != 0 &&
		w.sp.hour&(1<<uint(floorMod(m, 1440)/60)) != 0 &&
		w.dateMatches(floorDiv(m, 1440))
}

// dateMatches applies month, day-of-month and day-of-week to a wall day,
// with the Vixie OR/AND rule. The calendar comes from the time package (a
// wall day number is a proleptic Gregorian date, like a UTC one).
func (w *walker) dateMatches(day int64) bool {
	if day == w.cachedDay {
		return w.cachedMatch
	}
	t := time.Unix(day*86400, 0).UTC()
	_, month, dom := t.Date()
	sp := w.sp
	ok := false
	if sp.month&(1<<uint(month)) != 0 {
		domOK := sp.dom&(1<<uint(dom)) != 0
		dowOK := sp.dow&(1<<uint(t.Weekday())) != 0
		if sp.domStar || sp.dowStar {
			ok = domOK && dowOK
		} else {
			ok = domOK || dowOK
		}
	}
	w.cachedDay, w.cachedMatch = day, ok
	return ok
}

// ceilSecond is the first whole Unix second not before t.
func ceilSecond(t time.Time) int64 {
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
