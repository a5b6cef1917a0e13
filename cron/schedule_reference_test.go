package cron

import (
	"slices"
	"strings"
	"testing"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// clockReading is what a wall clock in one zone showed at every UTC minute
// around a window, read with nothing but Go's instant → wall conversion.
type clockReading struct {
	loc      *time.Location
	from, to time.Time
	scan     []minuteReading   // ascending instants
	passes   map[int64][]int64 // wall reading → instants showing it (Unix seconds)
	fields   map[int64][5]int  // wall reading → minute, hour, day, month, weekday
}

type minuteReading struct{ at, wall int64 }

// readClock reads loc's wall clock (as seconds since 1970-01-01T00:00 read as
// if UTC) at every UTC minute from two days before from to two days after to.
func readClock(loc *time.Location, from, to time.Time) *clockReading {
	c := &clockReading{loc: loc, from: from, to: to, passes: map[int64][]int64{}, fields: map[int64][5]int{}}
	for at := from.Add(-48 * time.Hour).Truncate(time.Minute); at.Before(to.Add(48 * time.Hour)); at = at.Add(time.Minute) {
		l := at.In(loc)
		w := time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
		c.scan = append(c.scan, minuteReading{at.Unix(), w.Unix()})
		c.passes[w.Unix()] = append(c.passes[w.Unix()], at.Unix())
	}
	return c
}

// referenceOccurrences computes a cron spec's occurrences in the window the
// slow way: it applies SPEC §5 to every matching wall reading in the clock
// reading — every pass for a wildcard spec, the first pass for a fixed one,
// and for a fixed reading the clock jumps over, the first minute after the
// jump. It assumes offsets in whole minutes.
func referenceOccurrences(tb testing.TB, spec string, c *clockReading) []time.Time {
	tb.Helper()
	parsed, err := robfig.ParseStandard(spec)
	if err != nil {
		tb.Fatal(err)
	}
	bitsOf := parsed.(*robfig.SpecSchedule)
	texts := strings.Fields(spec)
	if d, ok := descriptors[spec]; ok {
		texts = strings.Fields(d)
	}
	star := func(i int) bool { return texts[i][0] == '*' || texts[i][0] == '?' }
	wildcard, daysAnd := star(0) || star(1), star(2) || star(4)
	has := func(mask uint64, v int) bool { return mask&(1<<v) != 0 }

	var out []int64
	lo, hi := c.from.Unix(), c.to.Unix()
	for w := lo - 24*3600 - lo%60; w < hi+24*3600; w += 60 {
		f, ok := c.fields[w]
		if !ok {
			u := time.Unix(w, 0).UTC()
			f = [5]int{u.Minute(), u.Hour(), u.Day(), int(u.Month()), int(u.Weekday())}
			c.fields[w] = f
		}
		dom, dow := has(bitsOf.Dom, f[2]), has(bitsOf.Dow, f[4])
		days := dom || dow
		if daysAnd {
			days = dom && dow
		}
		if !days || !has(bitsOf.Month, f[3]) || !has(bitsOf.Hour, f[1]) || !has(bitsOf.Minute, f[0]) {
			continue
		}
		switch in := c.passes[w]; {
		case len(in) > 0 && wildcard:
			out = append(out, in...)
		case len(in) > 0:
			out = append(out, in[0])
		case !wildcard:
			for i := 1; i < len(c.scan); i++ {
				if c.scan[i-1].wall < w && c.scan[i].wall > w {
					out = append(out, c.scan[i].at)
					break
				}
			}
		}
	}
	out = slices.DeleteFunc(out, func(t int64) bool { return t < lo || t >= hi })
	slices.Sort(out)
	out = slices.Compact(out)
	times := make([]time.Time, len(out))
	for i, t := range out {
		times[i] = time.Unix(t, 0).UTC()
	}
	return times
}

// referenceWindow is a stretch of time around an offset change.
type referenceWindow struct {
	zone     string
	from, to time.Time
}

// transitionWindows returns a three-day window around every offset change of
// zone in year, found with ZoneBounds.
func transitionWindows(tb testing.TB, zone string, year int) []referenceWindow {
	tb.Helper()
	loc := MustZone(tb, zone)
	var ws []referenceWindow
	at := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).In(loc)
	for {
		_, end := at.ZoneBounds()
		if end.IsZero() || end.Year() > year {
			return ws
		}
		// ZoneBounds may also report a boundary without an offset change
		// (at year ends beyond the table); such windows are no harm.
		ws = append(ws, referenceWindow{zone, end.UTC().Add(-36 * time.Hour), end.UTC().Add(36 * time.Hour)})
		at = end
	}
}

func TestOccurrencesAgreeWithABruteForceReadingOfTheClock(t *testing.T) {
	var windows []referenceWindow
	for _, zone := range []string{
		"America/New_York", "Europe/London", "Europe/Berlin", "Australia/Sydney",
		"Australia/Lord_Howe", "Pacific/Chatham", "America/Santiago",
	} {
		windows = append(windows, transitionWindows(t, zone, 2026)...)
		if !testing.Short() {
			windows = append(windows, transitionWindows(t, zone, 2099)...) // beyond tzdata's table: its rule string
		}
	}
	// St. John's changed clocks at 00:01 until 2011, so its folds cross
	// midnight: the next date's first minute passes before the repeated
	// hour of the date before (in 1988 by two hours).
	windows = append(windows, transitionWindows(t, "America/St_Johns", 2006)...)
	windows = append(windows, transitionWindows(t, "America/St_Johns", 1988)...)
	for _, h := range []struct{ zone, at string }{
		{"Pacific/Apia", "2011-12-30T10:00:00Z"},     // a whole day skipped
		{"Asia/Pyongyang", "2015-08-14T15:00:00Z"},   // -30 min at midnight
		{"Asia/Pyongyang", "2018-05-04T15:00:00Z"},   // +30 min at 23:30
		{"Europe/Volgograd", "2020-12-26T22:00:00Z"}, // -1 h, not DST
		{"Asia/Shanghai", "2026-03-08T07:00:00Z"},    // nothing happens
		{"UTC", "2026-03-08T07:00:00Z"},
	} {
		at := MustTime(t, h.at)
		windows = append(windows, referenceWindow{h.zone, at.Add(-36 * time.Hour), at.Add(36 * time.Hour)})
	}
	specs := []string{
		"* * * * *", "*/15 * * * *", "0 * * * *", "15 */2 * * *", "*/7 0-3 * * *", "*/10 23,0 */2 * *",
		"30 2 * * *", "0,30 1-3 * * *", "0 0 * * *", "45 23 * * *", "59 1 * * *", "0-59/20 2 * * *",
		"30 0,23 * * *", "0,45 0,23 * * *", "0 3 * * 0", "45 2 1-7 * 0", "@hourly", "@daily",
	}
	for _, w := range windows {
		loc := MustZone(t, w.zone)
		clock := readClock(loc, w.from, w.to)
		for _, spec := range specs {
			name := w.zone + " " + w.from.Add(36*time.Hour).Format("2006-01-02") + " " + spec + " agrees"
			t.Run(name, func(t *testing.T) {
				s := MustParse(t, spec, w.zone)
				want := referenceOccurrences(t, spec, clock)
				got, truncated := s.Occurrences(w.from, w.to, 10000)
				if g, r := strings.Join(local(got, loc), " "), strings.Join(local(want, loc), " "); truncated || g != r {
					t.Fatalf("[%v, %v):\n got  %s\n want %s", w.from, w.to, g, r)
				}
				if len(got) > 200 {
					return // chaining Next over thousands of minutes adds nothing
				}
				// Next and Prev walk the same occurrences.
				at := w.from.Add(-time.Nanosecond)
				for i, want := range got {
					next, ok := s.Next(at)
					if !ok || !next.Equal(want) {
						t.Fatalf("Next(%v) = %v, %v; want occurrence %d, %v", at, next, ok, i, want)
					}
					if prev, ok := s.Prev(want); !ok || !prev.Equal(want) {
						t.Fatalf("Prev(%v) = %v, %v; want itself", want, prev, ok)
					}
					if i > 0 {
						if prev, ok := s.Prev(want.Add(-time.Nanosecond)); !ok || !prev.Equal(got[i-1]) {
							t.Fatalf("Prev(%v - 1ns) = %v, %v; want %v", want, prev, ok, got[i-1])
						}
					}
					at = next
				}
				if next, ok := s.Next(at); ok && next.Before(w.to) {
					t.Fatalf("Next(%v) = %v: an occurrence Occurrences missed", at, next)
				}
			})
		}
	}
}

func TestDatesMatchTheTimePackage(t *testing.T) {
	for day := int64(-800_000); day < 800_000; day += 97 {
		want := time.Unix(day*daySec, 0).UTC()
		c := dateOf(day)
		if c.y != int64(want.Year()) || c.m != int(want.Month()) || c.d != want.Day() || c.weekday() != int64(want.Weekday()) {
			t.Fatalf("dateOf(%d) = %d-%d-%d (weekday %d); want %v", day, c.y, c.m, c.d, c.weekday(), want)
		}
		n, p := c, c
		n.nextDay()
		p.prevDay()
		if n != dateOf(day+1) || p != dateOf(day-1) {
			t.Fatalf("stepping from %v: next %+v, prev %+v; want %+v, %+v", want, n, p, dateOf(day+1), dateOf(day-1))
		}
		n, p = c, c
		n.nextMonth()
		p.prevMonth()
		first := time.Date(want.Year(), want.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		last := time.Date(want.Year(), want.Month(), 0, 0, 0, 0, 0, time.UTC)
		if n != dateOf(first.Unix()/daySec) || p != dateOf(floorDiv(last.Unix(), daySec)) {
			t.Fatalf("month steps from %v: %+v, %+v; want %v, %v", want, n, p, first, last)
		}
	}
}
