package cron

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"

	robfig "github.com/robfig/cron/v3"
)

// cronParser reads five-field specs and @descriptors (SPEC §5). Only its
// parse result is used: its Schedule.Next mishandles DST (it skips
// `30 2 * * *` on a spring-forward day and fires `30 1 * * *` twice on a
// fall-back day, measured on v3.0.1).
var cronParser = robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// robfigStar is the bit robfig sets in a field mask when the field holds `*`.
const robfigStar = 1 << 63

// descriptors gives the five fields each @descriptor stands for: whether a
// field starts with `*` decides the DST rule and the day rule, so a
// descriptor is judged by these texts (@hourly is a wildcard spec).
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// field describes one of the five crontab fields, for error messages.
type field struct {
	name     string
	min, max int
	names    map[string]int // month or weekday names robfig accepts
	nameKind string
}

var fields = [5]field{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, nameKind: "month name", names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}},
	{name: "day-of-week", min: 0, max: 7, nameKind: "day name", names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}},
}

// ParseSchedule parses a job's spec (SPEC §2, §5) and binds it to loc, the
// job's zone (see LoadZone; nil means UTC). Accepted forms:
//
//   - five crontab fields, minute hour day-of-month month day-of-week, with
//     ranges, lists, steps and month/weekday names (`*/15 9-17 * * mon-fri`),
//     or a descriptor: @yearly, @annually, @monthly, @weekly, @daily,
//     @midnight, @hourly — parsed with github.com/robfig/cron/v3's parser,
//     which also reads `?` as `*`; day-of-week 7 is Sunday, as in Vixie cron;
//   - `every DURATION` or `@every DURATION`, a Go duration of at least 1s
//     (`every 90m`, `@every 1h30m`): occurrences are anchor + k·DURATION for
//     every integer k, so anchor (e.g. the job's creation instant) must be
//     set; other kinds ignore it;
//   - `at YYYY-MM-DDTHH:MM[:SS]`, a wall time in loc (resolved like a
//     fixed-time cron spec: in a gap it fires at the first instant after the
//     gap, in a fold at its first pass), or `at YYYY-MM-DDTHH:MM[:SS]±HH:MM`
//     or `...Z`, an absolute instant.
//
// Zone prefixes (`TZ=`, `CRON_TZ=`) are refused: the zone is the job's own
// field. Every error wraps ErrBadSpec and names the field at fault, e.g.
// `bad spec "61 * * * *": minute field: 61 out of range 0-59`.
func ParseSchedule(spec string, loc *time.Location, anchor time.Time) (*Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	s, err := parseSpec(spec, loc, anchor)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrBadSpec, spec, err)
	}
	s.spec, s.loc = spec, loc
	return s, nil
}

func parseSpec(spec string, loc *time.Location, anchor time.Time) (*Schedule, error) {
	words := strings.Fields(spec)
	switch {
	case len(words) == 0:
		return nil, errors.New("empty spec")
	case strings.HasPrefix(words[0], "TZ=") || strings.HasPrefix(words[0], "CRON_TZ="):
		prefix, _, _ := strings.Cut(words[0], "=")
		return nil, fmt.Errorf("a %s= prefix is not allowed: the zone is the job's own field", prefix)
	case words[0] == "every" || words[0] == "@every":
		return parseInterval(words, anchor)
	case words[0] == "at":
		return parseAt(words, loc)
	case strings.HasPrefix(words[0], "@"):
		text, ok := descriptors[words[0]]
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION)", words[0])
		}
		if len(words) > 1 {
			return nil, fmt.Errorf("descriptor %s takes nothing after it, found %q", words[0], strings.Join(words[1:], " "))
		}
		return parseCron(words[0], strings.Fields(text))
	case len(words) != 5:
		return nil, fmt.Errorf("expected 5 fields (minute hour day-of-month month day-of-week), found %d", len(words))
	}
	return parseCron(strings.Join(words[:4], " ")+" "+sundaySeven(words[4]), words)
}

// sundaySeven rewrites a day-of-week field for robfig, which reads 0-6, so
// that 7 means Sunday as in Vixie cron and cronie (crontab(5): "0 or 7 is
// Sun"): a lone 7 becomes 0, and a range ending at 7 becomes the list of its
// days with 0 for 7 (`5-7` → `5,6,0`, `1-7/2` → `1,3,5,0`). Anything else is
// left for robfig to judge.
func sundaySeven(text string) string {
	items := strings.Split(text, ",")
	for i, item := range items {
		rng, stepText, hasStep := strings.Cut(item, "/")
		a, b, isRange := strings.Cut(rng, "-")
		switch {
		case !isRange && a == "7":
			items[i] = "0" // 7/STEP is 7 up to 7 by STEP: Sunday alone
		case isRange && b == "7":
			lo, msg := fields[4].value(a, item)
			step, err := 1, error(nil)
			if hasStep {
				step, err = strconv.Atoi(stepText)
			}
			if msg != "" || err != nil || step <= 0 {
				continue
			}
			var days []string
			for d := lo; d <= 7; d += step {
				days = append(days, strconv.Itoa(d%7))
			}
			items[i] = strings.Join(days, ",")
		}
	}
	return strings.Join(items, ",")
}

// parseCron builds a KindCron schedule from robfig's parse of text, whose
// five raw fields are texts.
func parseCron(text string, texts []string) (*Schedule, error) {
	parsed, err := cronParser.Parse(text)
	if err != nil {
		return nil, explain(texts, err)
	}
	spec, ok := parsed.(*robfig.SpecSchedule)
	if !ok { // only @every yields another type, and it never gets here
		return nil, fmt.Errorf("unsupported spec %q", text)
	}
	s := &Schedule{
		kind:   KindCron,
		minute: spec.Minute &^ robfigStar,
		hour:   spec.Hour &^ robfigStar,
		dom:    spec.Dom &^ robfigStar,
		month:  spec.Month &^ robfigStar,
		dow:    spec.Dow &^ robfigStar,
	}
	for i, mask := range []uint64{s.minute, s.hour, s.dom, s.month, s.dow} {
		if mask == 0 { // robfig accepts "," as a field that matches nothing
			return nil, fmt.Errorf("%s field: no values in %q", fields[i].name, texts[i])
		}
	}
	starts := func(i int) bool { return texts[i][0] == '*' || texts[i][0] == '?' }
	s.wildcard = starts(0) || starts(1) // cronie: MIN_STAR | HR_STAR
	s.daysAnd = starts(2) || starts(4)  // cronie: DOM_STAR | DOW_STAR
	s.never = !s.anyDate()
	return s, nil
}

// anyDate reports whether some calendar date matches. With days OR-ed every
// week has a match; AND-ed, a day-of-month that exists in an allowed month
// (29 in February) falls on every weekday within the 400-year cycle.
func (s *Schedule) anyDate() bool {
	if !s.daysAnd {
		return true
	}
	for m := 1; m <= 12; m++ {
		if s.month&(1<<m) != 0 && s.dom&(1<<(daysIn(2000, m)+1)-1) != 0 {
			return true
		}
	}
	return false
}

// shortestGap computes Period for a cron spec: the smallest distance between
// consecutive matching wall times, counting the wrap to the next matching
// date, over the eight years of dates from 2000 (two leap days).
func (s *Schedule) shortestGap() time.Duration {
	const scanDays, maxGap = 8*365 + 2, 8 * 365 * 24 * time.Hour
	if s.never {
		return 0
	}
	// Minutes of the day that match, ascending.
	var tods []int
	for hs := s.hour; hs != 0; hs &= hs - 1 {
		for ms := s.minute; ms != 0; ms &= ms - 1 {
			tods = append(tods, bits.TrailingZeros64(hs)*60+bits.TrailingZeros64(ms))
		}
	}
	gap := maxGap
	for i := 1; i < len(tods); i++ {
		gap = min(gap, time.Duration(tods[i]-tods[i-1])*time.Minute)
	}
	// Days between consecutive matching dates, from 2000-01-01.
	c, last := dateOf(10957), int64(-1)
	for end := c.day + scanDays; c.day < end; c.nextDay() {
		if s.month&(1<<c.m) == 0 || !s.dateMatches(c) {
			continue
		}
		if last >= 0 {
			wrap := time.Duration(c.day-last)*24*time.Hour - time.Duration(tods[len(tods)-1]-tods[0])*time.Minute
			gap = min(gap, wrap)
			if c.day-last == 1 {
				break // no two dates are closer
			}
		}
		last = c.day
	}
	return gap
}

// explain turns a robfig parse error into one that names the field at fault
// and what is wrong with it, re-reading the raw fields with robfig's grammar;
// robfig's own message is the fallback.
func explain(texts []string, err error) error {
	for i, text := range texts {
		if msg := fields[i].check(text); msg != "" {
			return fmt.Errorf("%s field: %s", fields[i].name, msg)
		}
	}
	return err
}

// check returns what is wrong with text as this field under robfig's grammar
// (comma-separated items: `*` or `?`, N, N-M, each optionally /STEP), or "".
func (f field) check(text string) string {
	seen := false
	for item := range strings.SplitSeq(text, ",") {
		if item == "" {
			continue // robfig skips empty items
		}
		seen = true
		rng, step, hasStep := strings.Cut(item, "/")
		if strings.Contains(step, "/") {
			return fmt.Sprintf("too many slashes in %q", item)
		}
		lo, hi := f.min, f.max
		if first, _, _ := strings.Cut(rng, "-"); first != "*" && first != "?" {
			a, b, isRange := strings.Cut(rng, "-")
			if strings.Contains(b, "-") {
				return fmt.Sprintf("too many hyphens in %q", item)
			}
			var msg string
			if lo, msg = f.value(a, item); msg != "" {
				return msg
			}
			switch {
			case isRange:
				if hi, msg = f.value(b, item); msg != "" {
					return msg
				}
			case !hasStep:
				hi = lo
			}
			if lo > hi {
				return fmt.Sprintf("range %q runs backwards", item)
			}
		}
		if hasStep {
			n, err := strconv.Atoi(step)
			if err != nil {
				return fmt.Sprintf("step %q in %q is not a number", step, item)
			}
			if n <= 0 {
				return fmt.Sprintf("step in %q must be positive", item)
			}
		}
	}
	if !seen {
		return fmt.Sprintf("no values in %q", text)
	}
	return ""
}

// value reads one number or name of the field, within item.
func (f field) value(v, item string) (int, string) {
	if n, ok := f.names[strings.ToLower(v)]; ok {
		return n, ""
	}
	n, err := strconv.Atoi(v)
	switch {
	case v == "":
		return 0, fmt.Sprintf("missing number in %q", item)
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("%s out of range %d-%d", v, f.min, f.max)
	case err != nil && f.nameKind != "":
		return 0, fmt.Sprintf("%q is not a number or %s", v, f.nameKind)
	case err != nil:
		return 0, fmt.Sprintf("%q is not a number", v)
	case n < f.min || n > f.max:
		return 0, fmt.Sprintf("%d out of range %d-%d", n, f.min, f.max)
	}
	return n, ""
}

// parseInterval reads `every DURATION` / `@every DURATION`.
func parseInterval(words []string, anchor time.Time) (*Schedule, error) {
	if len(words) != 2 {
		return nil, fmt.Errorf("interval: want one Go duration after %q, such as 90m, 2h or 1h30m", words[0])
	}
	d, err := time.ParseDuration(words[1])
	switch {
	case err != nil:
		return nil, fmt.Errorf("interval: %q is not a duration (want e.g. 90m, 2h or 1h30m)", words[1])
	case d <= 0:
		return nil, errors.New("interval must be positive")
	case d < time.Second:
		return nil, fmt.Errorf("interval %s is shorter than the 1s minimum", d)
	case anchor.IsZero():
		return nil, errors.New("an interval needs an anchor instant (e.g. the job's creation time)")
	}
	return &Schedule{kind: KindInterval, period: d, anchor: anchor.Round(0).UTC()}, nil
}

// parseAt reads `at TIME`: a wall time in loc, or an instant with an offset.
func parseAt(words []string, loc *time.Location) (*Schedule, error) {
	const want = "want e.g. 2026-12-01T09:00, 2026-12-01T09:00:30 or 2026-12-01T09:00:00+01:00"
	if len(words) != 2 {
		return nil, fmt.Errorf("one-shot: want one time after \"at\" (%s)", want)
	}
	v := words[1]
	_, clock, ok := strings.Cut(v, "T")
	if !ok {
		return nil, fmt.Errorf("one-shot: %q is not a time (%s)", v, want)
	}
	// The layout follows the text: seconds or not, an offset (Z, +hh:mm,
	// -hh:mm) after the clock or not.
	zoned := false
	if i := strings.IndexAny(clock, "Z+-"); i >= 0 {
		clock, zoned = clock[:i], true
	}
	layout := "2006-01-02T15:04"
	if strings.Count(clock, ":") >= 2 {
		layout += ":05"
	}
	if zoned {
		layout += "Z07:00"
	}
	t, err := time.Parse(layout, v)
	if err != nil {
		var pe *time.ParseError
		if errors.As(err, &pe) && pe.Message != "" {
			return nil, fmt.Errorf("one-shot: %q is not a time: %s", v, strings.TrimPrefix(pe.Message, ": "))
		}
		return nil, fmt.Errorf("one-shot: %q is not a time (%s)", v, want)
	}
	if t.Nanosecond() != 0 {
		return nil, fmt.Errorf("one-shot: %q has fractional seconds; whole seconds only", v)
	}
	if !zoned {
		// Parsed without a zone, t's UTC reading is the wall reading.
		t = time.Unix(resolveFixed(loc, t.Unix()), 0)
	}
	return &Schedule{kind: KindOneShot, at: t.UTC()}, nil
}
