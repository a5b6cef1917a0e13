package cron

import (
	"errors"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Kind says how a spec names its occurrences (SPEC §2, §5).
type Kind string

const (
	// KindCron is a five-field crontab spec (`30 2 * * *`) or a descriptor
	// (`@daily`), read on the wall clock of the job's zone under the DST
	// policy of SPEC §5 (Vixie cron / cronie).
	KindCron Kind = "cron"
	// KindInterval is `every DURATION` or `@every DURATION`: the anchor
	// plus every integer multiple of the period, blind to wall clocks.
	KindInterval Kind = "interval"
	// KindOneShot is `at TIME`: a single occurrence.
	KindOneShot Kind = "oneshot"
)

// AllKinds lists every Kind, for validation and CHECK constraints.
func AllKinds() []Kind { return []Kind{KindCron, KindInterval, KindOneShot} }

// ErrBadSpec is wrapped by every error ParseSchedule returns. The message
// quotes the spec and says what is wrong and where, e.g.
// `bad spec "61 * * * *": minute field: 61 out of range 0-59`.
var ErrBadSpec = errors.New("bad spec")

// Schedule is a parsed spec bound to a zone: a pure function from instants to
// occurrences. Every instant it returns is in UTC; cron occurrences fall on
// whole seconds. A Schedule never changes once parsed and is safe for
// concurrent use.
type Schedule struct {
	spec string
	kind Kind
	loc  *time.Location

	// KindCron. Bit i of a mask is set when value i matches (robfig's parse,
	// star bit removed).
	minute, hour, dom, month, dow uint64
	// wildcard: the minute or hour field starts with `*` (cronie's MIN_STAR
	// / HR_STAR), which selects the wildcard DST rule.
	wildcard bool
	// daysAnd: day-of-month or day-of-week starts with `*` (cronie's
	// DOM_STAR / DOW_STAR), so the two are AND-ed instead of OR-ed.
	daysAnd bool
	// never: no calendar date ever matches (`0 0 30 2 *`).
	never bool

	// KindInterval.
	anchor time.Time
	// period is the interval (KindInterval) or the shortest gap between
	// two occurrences on the wall clock (KindCron, computed on first use:
	// it scans years of dates); 0 when meaningless.
	period     time.Duration
	periodOnce sync.Once

	// KindOneShot.
	at time.Time
}

// Spec returns the spec text the Schedule was parsed from.
func (s *Schedule) Spec() string { return s.spec }

// Kind returns whether the Schedule is a cron spec, an interval or a one-shot.
func (s *Schedule) Kind() Kind { return s.kind }

// Location returns the zone whose wall clock a cron spec or a one-shot wall
// time is read on (SPEC §5). Format occurrences with it to show local offsets.
func (s *Schedule) Location() *time.Location { return s.loc }

// Wildcard reports whether a cron spec follows the wildcard DST rule of SPEC
// §5 (its minute or hour field starts with `*`, as in Vixie cron): it fires at
// every instant whose wall reading matches, twice for a reading in a fold and
// never for one in a gap. False for fixed-time specs, intervals and one-shots.
func (s *Schedule) Wildcard() bool { return s.wildcard }

// Period returns the interval of a KindInterval schedule. For KindCron it
// returns the shortest gap between two consecutive occurrences on the wall
// clock, DST aside (`*/15 * * * *`: 15m; `0 9,17 * * *`: 8h; `0 9 * * 1-5`:
// 24h; `@monthly`: 28 days, since February is one), capped at eight years,
// for sizing the catch-up grace of SPEC §5; 0 for a spec that never fires.
// For KindOneShot it returns 0.
func (s *Schedule) Period() time.Duration {
	if s.kind == KindCron {
		s.periodOnce.Do(func() { s.period = s.shortestGap() })
	}
	return s.period
}

// Next returns the first occurrence strictly after after (SPEC §5: after a
// fire the next occurrence is always strictly after now), in UTC. ok is false
// when there is none: a one-shot at or before after, or a cron spec whose
// day-of-month, month and day-of-week never meet (`0 0 30 2 *`; this is
// decided exactly, as Gregorian dates repeat every 400 years).
func (s *Schedule) Next(after time.Time) (next time.Time, ok bool) {
	after = after.Round(0) // compare wall instants, never monotonic readings
	switch s.kind {
	case KindInterval:
		return s.intervalAfter(after), true
	case KindOneShot:
		if !s.at.After(after) {
			return time.Time{}, false
		}
		return s.at, true
	}
	// An integer second t is > after exactly when t > floor(after).
	t, ok := s.cronNext(floorSec(after) + 1)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(t, 0).UTC(), true
}

// Prev returns the last occurrence at or before t, in UTC, so Prev(t) and
// Next(t) bracket t; catch-up uses it to find the most recent missed
// occurrence. ok is false when there is none (within 400 years for cron
// specs, beyond which Gregorian dates repeat).
func (s *Schedule) Prev(t time.Time) (prev time.Time, ok bool) {
	t = t.Round(0)
	switch s.kind {
	case KindInterval:
		return s.intervalAfter(t).Add(-s.period), true
	case KindOneShot:
		if s.at.After(t) {
			return time.Time{}, false
		}
		return s.at, true
	}
	p, ok := s.cronPrev(floorSec(t) + 1)
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(p, 0).UTC(), true
}

// Occurrences returns the occurrences in [from, to), ascending and distinct,
// in UTC — what `herald cron preview` prints. It returns at most limit of
// them; truncated reports that more exist in the range (limit ≤ 0 returns none
// and reports whether any exists).
func (s *Schedule) Occurrences(from, to time.Time, limit int) (times []time.Time, truncated bool) {
	from, to = from.Round(0), to.Round(0)
	if !from.Before(to) {
		return nil, false
	}
	limit = min(math.MaxInt-1, max(limit, 0))
	switch s.kind {
	case KindOneShot:
		if s.at.Before(from) || !s.at.Before(to) {
			return nil, false
		}
		if limit == 0 {
			return nil, true
		}
		return []time.Time{s.at}, false
	case KindInterval:
		for t := s.intervalAfter(from.Add(-1)); t.Before(to); t = t.Add(s.period) {
			if len(times) == limit {
				return times, true
			}
			times = append(times, t)
		}
		return times, false
	}
	secs := s.cronRange(ceilSec(from), ceilSec(to), limit+1)
	if len(secs) > limit {
		secs, truncated = secs[:limit], true
	}
	times = make([]time.Time, len(secs))
	for i, t := range secs {
		times[i] = time.Unix(t, 0).UTC()
	}
	return times, truncated
}

// intervalAfter returns the first anchor + k·period strictly after t, for any
// integer k (SPEC §5: elapsed time, blind to wall clocks).
func (s *Schedule) intervalAfter(t time.Time) time.Time {
	p, a := s.period, s.anchor
	// time.Time.Sub saturates beyond ±292 years: step the anchor by whole
	// periods until the distance is exact and far from overflow.
	const far = time.Duration(math.MaxInt64 / 4)
	jump := max(far/p*p, p)
	for {
		d := t.Sub(a)
		switch {
		case d > far:
			a = a.Add(jump)
		case d < -far:
			a = a.Add(-jump)
		default:
			q := d / p
			if d%p < 0 {
				q-- // floor, not truncation, for instants before the anchor
			}
			return a.Add(q * p).Add(p).UTC()
		}
	}
}

// searchDays bounds cron searches: Gregorian dates, weekdays included, repeat
// every 400 years (146097 days), so a date pattern that does not occur within
// that span never occurs.
const searchDays = 146097 + 366

const daySec = 86400

// cronNext returns the first cron occurrence at or after lo (Unix seconds).
//
// It walks wall-clock dates from the earliest whose instants can reach lo.
// Instants of one wall date lie within offsetMargin of that date, so a found
// occurrence is final once a date starts more than offsetMargin after it;
// until then a later date (in a fold) may still yield an earlier instant.
func (s *Schedule) cronNext(lo int64) (int64, bool) {
	if s.never {
		return 0, false
	}
	var buf [8]int64
	best, found := int64(0), false
	c := dateOf(floorDiv(lo-offsetMargin, daySec) - 1)
	for end := c.day + searchDays; c.day <= end; {
		if found && c.day*daySec-offsetMargin >= best {
			break
		}
		if s.month&(1<<c.m) == 0 {
			c.nextMonth()
			continue
		}
		if s.dateMatches(c) {
			in := s.dayInstants(buf[:0], c.day, lo, math.MaxInt64, 1)
			if len(in) > 0 && (!found || in[0] < best) {
				best, found = in[0], true
			}
		}
		c.nextDay()
	}
	return best, found
}

// cronPrev returns the last cron occurrence before hi (Unix seconds): the
// mirror image of cronNext, walking dates backwards.
func (s *Schedule) cronPrev(hi int64) (int64, bool) {
	if s.never {
		return 0, false
	}
	var buf []int64
	best, found := int64(0), false
	c := dateOf(floorDiv(hi+offsetMargin, daySec) + 1)
	for end := c.day - searchDays; c.day >= end; {
		if found && (c.day+1)*daySec+offsetMargin <= best {
			break
		}
		if s.month&(1<<c.m) == 0 {
			c.prevMonth()
			continue
		}
		if s.dateMatches(c) {
			buf = s.dayInstants(buf[:0], c.day, math.MinInt64, hi, 0)
			if n := len(buf); n > 0 && (!found || buf[n-1] > best) {
				best, found = buf[n-1], true
			}
		}
		c.prevDay()
	}
	return best, found
}

// cronRange returns, ascending and distinct, the first up to limit cron
// occurrences in [lo, hi) (Unix seconds).
func (s *Schedule) cronRange(lo, hi int64, limit int) []int64 {
	if s.never || limit <= 0 {
		return nil
	}
	var out []int64
	c := dateOf(floorDiv(lo-offsetMargin, daySec) - 1)
	for c.day*daySec-offsetMargin < hi {
		if len(out) >= limit && c.day*daySec-offsetMargin >= out[limit-1] {
			break
		}
		if s.month&(1<<c.m) == 0 {
			c.nextMonth()
			continue
		}
		if s.dateMatches(c) {
			n := len(out)
			out = s.dayInstants(out, c.day, lo, hi, limit)
			// A fold or a gap at midnight can put a date's instants
			// before (or on) the previous date's.
			if n > 0 && len(out) > n && out[n] <= out[n-1] {
				slices.Sort(out)
				out = slices.Compact(out)
			}
		}
		c.nextDay()
	}
	return out
}

// dateMatches applies the day-of-month / day-of-week rule of Vixie cron
// (SPEC §5): OR-ed when neither field starts with `*`, else AND-ed. robfig's
// own rule looks at its star bit, which `*/2` clears and `*/1` keeps, so the
// raw text decides here.
func (s *Schedule) dateMatches(c date) bool {
	domOK := s.dom&(1<<c.d) != 0
	dowOK := s.dow&(1<<c.weekday()) != 0
	if s.daysAnd {
		return domOK && dowOK
	}
	return domOK || dowOK
}

// dayInstants appends to dst the instants in [lo, hi) at which the spec fires
// for the wall readings of one matching date (day: days since 1970-01-01),
// ascending and distinct, under the DST policy of SPEC §5. limit > 0 allows it
// to stop after that many on a date without offset changes nearby.
func (s *Schedule) dayInstants(dst []int64, day, lo, hi int64, limit int) []int64 {
	ns := day * daySec
	var pbuf [4]zonePeriod
	ps := zonePeriods(pbuf[:0], s.loc, ns-offsetMargin, ns+daySec+offsetMargin)
	if len(ps) == 1 {
		// One offset all around: wall readings map to instants one to
		// one and in order, so start at the first reading >= lo.
		off := ps[0].off
		wlo, whi := max(satAdd(lo, off), ns), min(satAdd(hi, off), ns+daySec)
		if wlo >= whi {
			return dst
		}
		n0 := len(dst)
		first := (wlo - ns + 59) / 60 // minute of the day
		for h := first / 60; h < 24; h++ {
			if s.hour&(1<<h) == 0 {
				continue
			}
			mins := s.minute
			if h == first/60 {
				mins &= math.MaxUint64 << (first % 60)
			}
			for ; mins != 0; mins &= mins - 1 {
				w := ns + h*3600 + int64(bits.TrailingZeros64(mins))*60
				if w >= whi {
					return dst
				}
				dst = append(dst, w-off)
				if limit > 0 && len(dst)-n0 >= limit {
					return dst
				}
			}
		}
		return dst
	}
	// The offset changes near this date: resolve every reading.
	n0 := len(dst)
	var ibuf [4]int64
	for hs := s.hour; hs != 0; hs &= hs - 1 {
		h := int64(bits.TrailingZeros64(hs))
		for ms := s.minute; ms != 0; ms &= ms - 1 {
			w := ns + h*3600 + int64(bits.TrailingZeros64(ms))*60
			in := wallInstants(ibuf[:0], ps, w)
			switch {
			case len(in) == 0 && s.wildcard:
				// A reading that does not exist does not fire.
			case len(in) == 0:
				if t, ok := gapEnd(ps, w); ok {
					in = append(in, t) // first instant after the gap
				}
			case !s.wildcard:
				in = in[:1] // a fold's first pass only
			}
			for _, t := range in {
				if t >= lo && t < hi {
					dst = append(dst, t)
				}
			}
		}
	}
	// Fold passes interleave with later readings, and coalesced readings
	// (gap → transition instant) repeat: occurrences never share an instant.
	slices.Sort(dst[n0:])
	return dst[:n0+len(slices.Compact(dst[n0:]))]
}

// date is a proleptic Gregorian calendar date and its day number.
type date struct {
	day     int64 // days since 1970-01-01
	y       int64
	m, d    int // 1-12, 1-31
	monthLn int // days in month m of year y
}

// dateOf converts a day number to a date (Howard Hinnant's civil_from_days).
func dateOf(day int64) date {
	z := day + 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := int(doy - (153*mp+2)/5 + 1)
	m := int(mp + 3)
	if m > 12 {
		m -= 12
	}
	y := yoe + era*400
	if m <= 2 {
		y++
	}
	return date{day: day, y: y, m: m, d: d, monthLn: daysIn(y, m)}
}

func (c date) weekday() int64 { return floorMod(c.day+4, 7) } // 1970-01-01 was a Thursday

func (c *date) nextDay() {
	if c.d == c.monthLn {
		c.nextMonth()
		return
	}
	c.day++
	c.d++
}

func (c *date) prevDay() {
	if c.d == 1 {
		c.prevMonth()
		return
	}
	c.day--
	c.d--
}

// nextMonth moves to the first of the following month.
func (c *date) nextMonth() {
	c.day += int64(c.monthLn - c.d + 1)
	c.d = 1
	if c.m++; c.m > 12 {
		c.m, c.y = 1, c.y+1
	}
	c.monthLn = daysIn(c.y, c.m)
}

// prevMonth moves to the last day of the preceding month.
func (c *date) prevMonth() {
	c.day -= int64(c.d)
	if c.m--; c.m < 1 {
		c.m, c.y = 12, c.y-1
	}
	c.monthLn = daysIn(c.y, c.m)
	c.d = c.monthLn
}

func daysIn(y int64, m int) int {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }

// floorSec returns t in whole Unix seconds, rounded down.
func floorSec(t time.Time) int64 { return t.Unix() }

// ceilSec returns t in whole Unix seconds, rounded up.
func ceilSec(t time.Time) int64 {
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}

// satAdd returns a+b clamped to the int64 range; |b| is an offset.
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
