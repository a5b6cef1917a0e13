package tzoracle

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// testZones are the case-file zones plus zones with odd histories: negative
// DST (Dublin), a 2-hour DST (Troll), Ramadan suspensions (Casablanca), a
// whole day skipped (Apia, 2011-12-30), and a -3:30 zone (St Johns).
var testZones = []string{
	"America/New_York", "Europe/London", "Australia/Sydney", "Australia/Lord_Howe",
	"Pacific/Chatham", "America/Santiago", "Asia/Shanghai", "UTC",
	"Europe/Dublin", "Antarctica/Troll", "Africa/Casablanca", "Pacific/Apia",
	"America/St_Johns", "Asia/Kolkata", "America/Sao_Paulo",
}

func mustLoc(t testing.TB, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// naiveOccurrences is the rule text with no shortcuts: it reads t.In(loc) at
// every whole UTC minute (no ZoneBounds cache, no jumping) and matches on
// the reading's own calendar fields. It exists to check the speed-ups in
// walk; it shares only the parser with it.
func naiveOccurrences(sp *spec, l *time.Location, from, to time.Time) []time.Time {
	match := func(w time.Time) bool { // w carries a wall reading in UTC
		has := func(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }
		domOK, dowOK := has(sp.dom, w.Day()), has(sp.dow, int(w.Weekday()))
		dateOK := domOK || dowOK
		if sp.domStar || sp.dowStar {
			dateOK = domOK && dowOK
		}
		return has(sp.minute, w.Minute()) && has(sp.hour, w.Hour()) && has(sp.month, int(w.Month())) && dateOK
	}
	reading := func(u time.Time) time.Time {
		lt := u.In(l)
		return time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), 0, 0, time.UTC)
	}
	first := from.Truncate(time.Minute)
	if first.Before(from) {
		first = first.Add(time.Minute)
	}
	var out []time.Time
	if sp.kind == kindWildcard {
		for u := first; u.Before(to); u = u.Add(time.Minute) {
			if match(reading(u)) {
				out = append(out, u.UTC())
			}
		}
		return out
	}
	u := first.Add(-72 * time.Hour)
	hwm := reading(u)
	for u = u.Add(time.Minute); u.Before(to); u = u.Add(time.Minute) {
		r := reading(u)
		fire := false
		for m := hwm.Add(time.Minute); !m.After(r); m = m.Add(time.Minute) {
			fire = fire || match(m)
		}
		if r.After(hwm) {
			hwm = r
		}
		if fire && !u.Before(first) {
			out = append(out, u.UTC())
		}
	}
	return out
}

// randomField draws one field in the grammar, biased towards small sets so
// that jumps over dull stretches are exercised as much as dense matches.
func randomField(r *rand.Rand, lo, hi int) string {
	n := func() int { return lo + r.IntN(hi-lo+1) }
	switch r.IntN(7) {
	case 0:
		return "*"
	case 1:
		return fmt.Sprintf("*/%d", 1+r.IntN(hi-lo+1))
	case 2:
		return fmt.Sprint(n())
	case 3:
		a, b := n(), n()
		return fmt.Sprintf("%d-%d", min(a, b), max(a, b))
	case 4:
		a, b := n(), n()
		return fmt.Sprintf("%d-%d/%d", min(a, b), max(a, b), 1+r.IntN(10))
	case 5:
		return fmt.Sprintf("%d,%d,%d", n(), n(), n())
	default:
		return fmt.Sprintf("%d/%d", n(), 1+r.IntN(20))
	}
}

func randomSpec(r *rand.Rand) string {
	if r.IntN(10) == 0 {
		return []string{"@hourly", "@daily", "@weekly", "@monthly", "@yearly"}[r.IntN(5)]
	}
	// Hours near the usual transition times make gaps and folds likely.
	hour := randomField(r, 0, 23)
	if r.IntN(2) == 0 {
		hour = []string{"0", "1", "2", "3", "23", "1-3", "0,2", "*"}[r.IntN(8)]
	}
	return strings.Join([]string{randomField(r, 0, 59), hour, randomField(r, 1, 31), randomField(r, 1, 12), randomField(r, 0, 7)}, " ")
}

// transitionsIn lists the instants in [from, to) where l's offset changes,
// found by sampling t.Zone hourly (independently of ZoneBounds).
func transitionsIn(l *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	_, prev := from.In(l).Zone()
	for u := from.Add(time.Hour); u.Before(to); u = u.Add(time.Hour) {
		if _, off := u.In(l).Zone(); off != prev {
			out = append(out, u)
			prev = off
		}
	}
	return out
}

// TestWalkAgreesWithNaiveWalk checks the fast walk (zone-period cache and
// jumps over dull stretches) against naiveOccurrences on random specs in
// windows around every 2026 transition of several zones, plus Apia's
// skipped day in 2011.
func TestWalkAgreesWithNaiveWalk(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type window struct {
		zone     string
		from, to time.Time
	}
	var windows []window
	y0, y1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, z := range testZones {
		for _, tr := range transitionsIn(mustLoc(t, z), y0, y1) {
			windows = append(windows, window{z, tr.Add(-30 * time.Hour), tr.Add(30 * time.Hour)})
		}
		windows = append(windows, window{z, y0.AddDate(0, 5, 0), y0.AddDate(0, 5, 4)})
	}
	apiaSkip := time.Date(2011, 12, 30, 10, 0, 0, 0, time.UTC)
	windows = append(windows, window{"Pacific/Apia", apiaSkip.Add(-2 * 24 * time.Hour), apiaSkip.Add(2 * 24 * time.Hour)})

	specsPer := 6
	if testing.Short() {
		specsPer = 2
	}
	for _, w := range windows {
		l := mustLoc(t, w.zone)
		for range specsPer {
			text := randomSpec(r)
			// Shift the window by a random number of seconds so that from
			// and to are not always whole minutes.
			from := w.from.Add(time.Duration(r.IntN(7200)) * time.Second)
			to := w.to.Add(-time.Duration(r.IntN(7200)) * time.Second)
			sp, err := parse(text)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			want := naiveOccurrences(sp, l, from, to)
			got, err := Occurrences(text, l, time.Time{}, from, to)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%q in %s over [%s, %s):\n got %v\nwant %v", text, w.zone, from, to, got, want)
			}
		}
	}
	// Dense specs, where every minute of a fold or gap matters.
	for _, text := range []string{"* * * * *", "* 1-3 * * *", "0-59 0-3 * * *", "*/7 * * * *", "59 1 * * *", "0 0 * * 0"} {
		for _, w := range windows {
			sp, _ := parse(text)
			l := mustLoc(t, w.zone)
			want := naiveOccurrences(sp, l, w.from, w.to)
			got, _ := Occurrences(text, l, time.Time{}, w.from, w.to)
			if !slices.EqualFunc(got, want, time.Time.Equal) {
				t.Errorf("%q in %s over [%s, %s): got %d occurrences, want %d", text, w.zone, w.from, w.to, len(got), len(want))
			}
		}
	}
}

// TestApiaSkippedDay pins the fixed rule across a whole missing day: Samoa
// moved from -10 to +14 after 2011-12-29 23:59:59, so 2011-12-30 never read.
// The fixed job's Dec 30 09:00 is in the gap and fires at the first instant
// after it, Dec 31 00:00 +14; the wildcard job loses the day.
func TestApiaSkippedDay(t *testing.T) {
	l := mustLoc(t, "Pacific/Apia")
	from := time.Date(2011, 12, 29, 0, 0, 0, 0, l)
	to := time.Date(2012, 1, 1, 0, 0, 0, 0, l)
	for _, tt := range []struct {
		spec string
		want []string
	}{
		{"0 9 * * *", []string{"2011-12-29T09:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T09:00:00+14:00"}},
		{"0 9 30 12 *", []string{"2011-12-31T00:00:00+14:00"}},
		{"0 */12 * * *", []string{"2011-12-29T00:00:00-10:00", "2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"}},
	} {
		got, err := Occurrences(tt.spec, l, time.Time{}, from, to)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, g := range got {
			s = append(s, g.In(l).Format(time.RFC3339))
		}
		if !slices.Equal(s, tt.want) {
			t.Errorf("%q: got %q, want %q", tt.spec, s, tt.want)
		}
	}
}

// TestWallClockAgreesWithTimeIn checks the ZoneBounds cache in wallClock
// against a fresh t.In(loc) at every hour of 2025-2028 and at every minute of
// the hours in which the offset changes.
func TestWallClockAgreesWithTimeIn(t *testing.T) {
	from, to := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, z := range testZones {
		l := mustLoc(t, z)
		c := wallClock{loc: l}
		check := func(u time.Time) {
			lt := u.In(l)
			want := time.Date(lt.Year(), lt.Month(), lt.Day(), lt.Hour(), lt.Minute(), 0, 0, time.UTC).Unix() / 60
			if got := c.wallMinute(u.Unix()); got != want {
				t.Fatalf("%s at %s: wallMinute %d, t.In reads %d (%s)", z, u.Format(time.RFC3339), got, want, lt)
			}
		}
		for u := from; u.Before(to); u = u.Add(time.Hour) {
			check(u)
			_, a := u.In(l).Zone()
			if _, b := u.Add(time.Hour).In(l).Zone(); a != b {
				for m := u; m.Before(u.Add(time.Hour)); m = m.Add(time.Minute) {
					check(m)
				}
			}
		}
	}
}

func TestIntervals(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	at := func(s string) time.Time { return mustTime(t, "", s) }
	// Anchor far before the window, and a period that is not a whole minute.
	got, err := Occurrences("@every 7m30.5s", ny, at("2020-01-01T00:00:00Z"), at("2026-03-08T06:58:00Z"), at("2026-03-08T07:20:00Z"))
	if err != nil {
		t.Fatal(err)
	}
	start := at("2020-01-01T00:00:00Z")
	period := 7*time.Minute + 30500*time.Millisecond
	if len(got) != 3 {
		t.Fatalf("got %v, want 3 occurrences", got)
	}
	for i, g := range got {
		if g.Sub(start)%period != 0 {
			t.Errorf("occurrence %s is not on the anchor's grid", g)
		}
		if i > 0 && g.Sub(got[i-1]) != period {
			t.Errorf("occurrences %s and %s are not one period apart", got[i-1], g)
		}
	}
	if got[0].Before(at("2026-03-08T06:58:00Z")) || got[0].Add(-period).After(at("2026-03-08T06:58:00Z")) {
		t.Errorf("first occurrence %s is not the first grid point in the window", got[0])
	}
	// An anchor exactly on from is included; one on to is not.
	got, _ = Occurrences("every 1h", ny, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), at("2026-01-01T02:00:00Z"))
	if want := []time.Time{at("2026-01-01T00:00:00Z"), at("2026-01-01T01:00:00Z")}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("got %v, want %v", got, want)
	}
	if _, err := Occurrences("every 1h", ny, time.Time{}, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z")); err == nil || !strings.Contains(err.Error(), "anchor") {
		t.Errorf("zero anchor: got %v, want an error about the anchor", err)
	}
	if _, err := Occurrences("every 1h", ny, at("1000-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z")); err == nil {
		t.Error("anchor 1000 years away: want an error")
	}
}

func TestWindowEdgesAndErrors(t *testing.T) {
	ny := mustLoc(t, "America/New_York")
	at := func(s string) time.Time { return mustTime(t, "", s) }
	if _, err := Occurrences("* * * * *", nil, time.Time{}, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z")); err == nil {
		t.Error("nil location: want an error")
	}
	if got, err := Occurrences("* * * * *", ny, time.Time{}, at("2026-01-02T00:00:00Z"), at("2026-01-01T00:00:00Z")); err != nil || len(got) != 0 {
		t.Errorf("reversed window: got %v, %v", got, err)
	}
	// from inside a minute excludes that minute; to is exclusive.
	got, _ := Occurrences("* * * * *", ny, time.Time{}, at("2026-01-01T00:00:00.5Z"), at("2026-01-01T00:03:00Z"))
	if want := []time.Time{at("2026-01-01T00:01:00Z"), at("2026-01-01T00:02:00Z")}; !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("got %v, want %v", got, want)
	}
	got, _ = Occurrences("* * * * *", ny, time.Time{}, at("2026-01-01T00:00:00Z"), at("2026-01-01T00:02:00.5Z"))
	if len(got) != 3 {
		t.Errorf("to inside a minute: got %v, want 00:00, 00:01, 00:02", got)
	}
	// A fixed job whose gap fire lands exactly on from is included.
	got, _ = Occurrences("30 2 * * *", ny, time.Time{}, at("2026-03-08T07:00:00Z"), at("2026-03-08T07:01:00Z"))
	if len(got) != 1 {
		t.Errorf("gap fire at from: got %v", got)
	}
	// One-shots outside the window give nothing.
	got, _ = Occurrences("at 2026-12-01T09:00", ny, time.Time{}, at("2026-01-01T00:00:00Z"), at("2026-12-01T14:00:00Z"))
	if len(got) != 0 {
		t.Errorf("one-shot at to: got %v", got)
	}
	got, _ = Occurrences("at 2026-12-01T09:00", ny, time.Time{}, at("2026-01-01T00:00:00Z"), at("2026-12-01T14:00:01Z"))
	if len(got) != 1 || !got[0].Equal(at("2026-12-01T14:00:00Z")) {
		t.Errorf("one-shot just inside: got %v", got)
	}
}

// BenchmarkTwoYearsQuarterHourNewYork is the figure quoted to the
// property-test authors: one two-year walk of a dense wildcard spec.
func BenchmarkTwoYearsQuarterHourNewYork(b *testing.B) {
	ny := mustLoc(b, "America/New_York")
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, ny)
	to := from.AddDate(2, 0, 0)
	for b.Loop() {
		got, err := Occurrences("*/15 * * * *", ny, time.Time{}, from, to)
		if err != nil || len(got) != 730*96 {
			b.Fatalf("%d occurrences, %v", len(got), err)
		}
	}
}

func BenchmarkTwoYearsEveryMinuteFixedHourNewYork(b *testing.B) {
	ny := mustLoc(b, "America/New_York")
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, ny)
	to := from.AddDate(2, 0, 0)
	for b.Loop() {
		if _, err := Occurrences("0-59 1 * * *", ny, time.Time{}, from, to); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTwoYearsDailyNewYork(b *testing.B) {
	ny := mustLoc(b, "America/New_York")
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, ny)
	to := from.AddDate(2, 0, 0)
	for b.Loop() {
		if _, err := Occurrences("30 2 * * *", ny, time.Time{}, from, to); err != nil {
			b.Fatal(err)
		}
	}
}
