package cron

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// MustZone loads an IANA zone or fails the test.
func MustZone(tb testing.TB, name string) *time.Location {
	tb.Helper()
	loc, err := LoadZone(name, time.UTC)
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}

// MustParse parses a spec in zone (anchor zero) or fails the test.
func MustParse(tb testing.TB, spec, zone string) *Schedule {
	tb.Helper()
	s, err := ParseSchedule(spec, MustZone(tb, zone), time.Time{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// MustTime parses an RFC 3339 instant or fails the test.
func MustTime(tb testing.TB, v string) time.Time {
	tb.Helper()
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// local formats instants as RFC 3339 with their offset in loc, the form
// `herald cron preview` prints and the form failures are easiest to read in.
func local(ts []time.Time, loc *time.Location) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.In(loc).Format(time.RFC3339)
	}
	return out
}

func TestOccurrencesFollowTheDSTPolicy(t *testing.T) {
	tests := []struct {
		name       string
		zone, spec string
		from, to   string // RFC 3339; [from, to)
		want       []string
	}{
		// America/New_York: 2026-03-08 02:00 EST → 03:00 EDT; 2026-11-01 02:00 EDT → 01:00 EST.
		{
			name: "a fixed time in New York's spring-forward gap fires once at the end of the gap",
			zone: "America/New_York", spec: "30 2 * * *",
			from: "2026-03-07T00:00:00-05:00", to: "2026-03-10T00:00:00-04:00",
			want: []string{"2026-03-07T02:30:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		{
			name: "a fixed time in New York's fall-back fold fires once at its first pass",
			zone: "America/New_York", spec: "30 1 * * *",
			from: "2026-10-31T00:00:00-04:00", to: "2026-11-03T00:00:00-05:00",
			want: []string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		},
		{
			name: "a wildcard minute fires in both passes of New York's fold",
			zone: "America/New_York", spec: "*/30 1 * * *",
			from: "2026-11-01T00:00:00-04:00", to: "2026-11-02T00:00:00-05:00",
			want: []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T01:30:00-05:00"},
		},
		{
			name: "@hourly fires twice for the repeated hour of New York's fold",
			zone: "America/New_York", spec: "@hourly",
			from: "2026-11-01T00:00:00-04:00", to: "2026-11-01T03:00:00-05:00",
			want: []string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00"},
		},
		{
			name: "a wildcard hour skips the hour that does not exist in New York's gap",
			zone: "America/New_York", spec: "0 * * * *",
			from: "2026-03-08T00:00:00-05:00", to: "2026-03-08T05:00:00-04:00",
			want: []string{"2026-03-08T00:00:00-05:00", "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"},
		},
		{
			name: "a fixed hour with a wildcard minute is a wildcard spec and skips the gap",
			zone: "America/New_York", spec: "*/20 2 * * *",
			from: "2026-03-07T00:00:00-05:00", to: "2026-03-09T00:00:00-04:00",
			want: []string{"2026-03-07T02:00:00-05:00", "2026-03-07T02:20:00-05:00", "2026-03-07T02:40:00-05:00"},
		},
		{
			name: "fixed times coalesced by New York's gap fire once",
			zone: "America/New_York", spec: "0,30 2,3 * * *",
			from: "2026-03-08T00:00:00-05:00", to: "2026-03-09T00:00:00-04:00",
			want: []string{"2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"},
		},
		{
			name: "a fixed minute range is a fixed-time spec and fires once per reading",
			zone: "America/New_York", spec: "0-59/20 1 * * *",
			from: "2026-11-01T00:00:00-04:00", to: "2026-11-02T00:00:00-05:00",
			want: []string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00"},
		},
		// Europe/London: 2026-03-29 01:00 GMT → 02:00 BST; 2026-10-25 02:00 BST → 01:00 GMT.
		{
			name: "a fixed time in London's gap fires at 02:00 BST",
			zone: "Europe/London", spec: "30 1 * * *",
			from: "2026-03-29T00:00:00Z", to: "2026-03-30T00:00:00+01:00",
			want: []string{"2026-03-29T02:00:00+01:00"},
		},
		{
			name: "a wildcard spec fires in both passes of London's fold",
			zone: "Europe/London", spec: "*/30 1 * * *",
			from: "2026-10-25T00:00:00+01:00", to: "2026-10-26T00:00:00Z",
			want: []string{"2026-10-25T01:00:00+01:00", "2026-10-25T01:30:00+01:00", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z"},
		},
		// Europe/Berlin: 2026-03-29 02:00 → 03:00; 2026-10-25 03:00 → 02:00. time.Date
		// moves Berlin's gap times forward but resolves its fold times to the second pass.
		{
			name: "a fixed time in Berlin's gap fires at 03:00 CEST",
			zone: "Europe/Berlin", spec: "30 2 * * *",
			from: "2026-03-29T00:00:00+01:00", to: "2026-03-30T00:00:00+02:00",
			want: []string{"2026-03-29T03:00:00+02:00"},
		},
		{
			name: "a fixed time in Berlin's fold fires at the first pass, not the one time.Date picks",
			zone: "Europe/Berlin", spec: "30 2 * * *",
			from: "2026-10-25T00:00:00+02:00", to: "2026-10-26T00:00:00+01:00",
			want: []string{"2026-10-25T02:30:00+02:00"},
		},
		{
			name: "a wildcard minute fires six times in Berlin's repeated hour",
			zone: "Europe/Berlin", spec: "*/20 2 * * *",
			from: "2026-10-25T00:00:00+02:00", to: "2026-10-26T00:00:00+01:00",
			want: []string{
				"2026-10-25T02:00:00+02:00", "2026-10-25T02:20:00+02:00", "2026-10-25T02:40:00+02:00",
				"2026-10-25T02:00:00+01:00", "2026-10-25T02:20:00+01:00", "2026-10-25T02:40:00+01:00",
			},
		},
		// Australia/Sydney: 2026-04-05 03:00 AEDT → 02:00 AEST; 2026-10-04 02:00 AEST → 03:00 AEDT.
		{
			name: "a fixed time in Sydney's April fold fires once at its first pass",
			zone: "Australia/Sydney", spec: "30 2 * * *",
			from: "2026-04-05T00:00:00+11:00", to: "2026-04-06T00:00:00+10:00",
			want: []string{"2026-04-05T02:30:00+11:00"},
		},
		{
			name: "a wildcard spec fires in both passes of Sydney's April fold",
			zone: "Australia/Sydney", spec: "*/30 2 * * *",
			from: "2026-04-05T00:00:00+11:00", to: "2026-04-06T00:00:00+10:00",
			want: []string{"2026-04-05T02:00:00+11:00", "2026-04-05T02:30:00+11:00", "2026-04-05T02:00:00+10:00", "2026-04-05T02:30:00+10:00"},
		},
		{
			name: "a fixed time in Sydney's October gap fires at 03:00 AEDT",
			zone: "Australia/Sydney", spec: "30 2 * * *",
			from: "2026-10-04T00:00:00+10:00", to: "2026-10-05T00:00:00+11:00",
			want: []string{"2026-10-04T03:00:00+11:00"},
		},
		// Australia/Lord_Howe: half-hour DST. 2026-04-05 02:00 (+11) → 01:30 (+10:30);
		// 2026-10-04 02:00 (+10:30) → 02:30 (+11).
		{
			name: "a fixed time in Lord Howe's half-hour gap fires at 02:30",
			zone: "Australia/Lord_Howe", spec: "15 2 * * *",
			from: "2026-10-04T00:00:00+10:30", to: "2026-10-05T00:00:00+11:00",
			want: []string{"2026-10-04T02:30:00+11:00"},
		},
		{
			name: "a wildcard spec skips only the half hour missing on Lord Howe",
			zone: "Australia/Lord_Howe", spec: "*/15 2 * * *",
			from: "2026-10-04T00:00:00+10:30", to: "2026-10-05T00:00:00+11:00",
			want: []string{"2026-10-04T02:30:00+11:00", "2026-10-04T02:45:00+11:00"},
		},
		{
			name: "a fixed time in Lord Howe's half-hour fold fires once",
			zone: "Australia/Lord_Howe", spec: "45 1 * * *",
			from: "2026-04-05T00:00:00+11:00", to: "2026-04-06T00:00:00+10:30",
			want: []string{"2026-04-05T01:45:00+11:00"},
		},
		{
			name: "a wildcard spec repeats only the half hour Lord Howe repeats",
			zone: "Australia/Lord_Howe", spec: "*/15 1 * * *",
			from: "2026-04-05T00:00:00+11:00", to: "2026-04-06T00:00:00+10:30",
			want: []string{
				"2026-04-05T01:00:00+11:00", "2026-04-05T01:15:00+11:00", "2026-04-05T01:30:00+11:00",
				"2026-04-05T01:45:00+11:00", "2026-04-05T01:30:00+10:30", "2026-04-05T01:45:00+10:30",
			},
		},
		// Pacific/Chatham: +12:45 / +13:45. 2026-09-27 02:45 → 03:45; 2026-04-05 03:45 → 02:45.
		{
			name: "a fixed time in Chatham's gap fires at 03:45",
			zone: "Pacific/Chatham", spec: "0 3 * * *",
			from: "2026-09-27T00:00:00+12:45", to: "2026-09-28T00:00:00+13:45",
			want: []string{"2026-09-27T03:45:00+13:45"},
		},
		{
			name: "a wildcard spec skips the readings missing on Chatham",
			zone: "Pacific/Chatham", spec: "*/30 2-4 * * *",
			from: "2026-09-27T00:00:00+12:45", to: "2026-09-28T00:00:00+13:45",
			want: []string{"2026-09-27T02:00:00+12:45", "2026-09-27T02:30:00+12:45", "2026-09-27T04:00:00+13:45", "2026-09-27T04:30:00+13:45"},
		},
		{
			name: "a fixed time in Chatham's fold fires at its first pass",
			zone: "Pacific/Chatham", spec: "0 3 * * *",
			from: "2026-04-05T00:00:00+13:45", to: "2026-04-06T00:00:00+12:45",
			want: []string{"2026-04-05T03:00:00+13:45"},
		},
		// America/Santiago changes at midnight: 2026-09-06 00:00 (-04) → 01:00 (-03);
		// 2026-04-05 00:00 (-03) → 2026-04-04 23:00 (-04).
		{
			name: "midnight, missing in Santiago, fires at 01:00",
			zone: "America/Santiago", spec: "0 0 * * *",
			from: "2026-09-05T00:00:00-04:00", to: "2026-09-08T00:00:00-03:00",
			want: []string{"2026-09-05T00:00:00-04:00", "2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00"},
		},
		{
			name: "an hourly spec skips Santiago's missing midnight",
			zone: "America/Santiago", spec: "0 * * * *",
			from: "2026-09-05T22:00:00-04:00", to: "2026-09-06T03:00:00-03:00",
			want: []string{"2026-09-05T22:00:00-04:00", "2026-09-05T23:00:00-04:00", "2026-09-06T01:00:00-03:00", "2026-09-06T02:00:00-03:00"},
		},
		{
			name: "a fixed time in Santiago's late-evening fold fires at its first pass",
			zone: "America/Santiago", spec: "30 23 * * *",
			from: "2026-04-04T00:00:00-03:00", to: "2026-04-06T00:00:00-04:00",
			want: []string{"2026-04-04T23:30:00-03:00", "2026-04-05T23:30:00-04:00"},
		},
		{
			name: "a wildcard spec fires in both passes of Santiago's late-evening fold",
			zone: "America/Santiago", spec: "*/30 23 * * *",
			from: "2026-04-04T00:00:00-03:00", to: "2026-04-05T12:00:00-04:00",
			want: []string{"2026-04-04T23:00:00-03:00", "2026-04-04T23:30:00-03:00", "2026-04-04T23:00:00-04:00", "2026-04-04T23:30:00-04:00"},
		},
		// Zones without DST: nothing moves.
		{
			name: "a fixed time in Shanghai fires on New York's transition day as on any other",
			zone: "Asia/Shanghai", spec: "30 2 * * *",
			from: "2026-03-07T00:00:00+08:00", to: "2026-03-10T00:00:00+08:00",
			want: []string{"2026-03-07T02:30:00+08:00", "2026-03-08T02:30:00+08:00", "2026-03-09T02:30:00+08:00"},
		},
		{
			name: "a quarter-hourly spec in UTC fires four times an hour",
			zone: "UTC", spec: "*/15 * * * *",
			from: "2026-03-08T02:00:00Z", to: "2026-03-08T03:00:00Z",
			want: []string{"2026-03-08T02:00:00Z", "2026-03-08T02:15:00Z", "2026-03-08T02:30:00Z", "2026-03-08T02:45:00Z"},
		},
		// Offset changes that are not DST.
		{
			name: "every fixed time of the day Samoa skipped fires once, at the end of the gap",
			zone: "Pacific/Apia", spec: "0 0,12 * * *",
			from: "2011-12-29T00:00:00-10:00", to: "2012-01-01T00:00:00+14:00",
			want: []string{"2011-12-29T00:00:00-10:00", "2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"},
		},
		{
			name: "a wildcard spec does not fire on the day Samoa skipped",
			zone: "Pacific/Apia", spec: "0 */12 * * *",
			from: "2011-12-29T06:00:00-10:00", to: "2011-12-31T06:00:00+14:00",
			want: []string{"2011-12-29T12:00:00-10:00", "2011-12-31T00:00:00+14:00"},
		},
		{
			name: "fixed times either side of Pyongyang's midnight gap coalesce across dates",
			zone: "Asia/Pyongyang", spec: "0,45 0,23 * * *",
			from: "2018-05-04T12:00:00+08:30", to: "2018-05-05T12:00:00+09:00",
			want: []string{"2018-05-04T23:00:00+08:30", "2018-05-05T00:00:00+09:00", "2018-05-05T00:45:00+09:00"},
		},
		{
			name: "a wildcard spec fires in both passes of Pyongyang's fold across midnight",
			zone: "Asia/Pyongyang", spec: "*/30 0,23 * * *",
			from: "2015-08-14T12:00:00+09:00", to: "2015-08-15T12:00:00+08:30",
			want: []string{
				"2015-08-14T23:00:00+09:00", "2015-08-14T23:30:00+09:00", "2015-08-14T23:30:00+08:30",
				"2015-08-15T00:00:00+08:30", "2015-08-15T00:30:00+08:30",
			},
		},
		{
			name: "a fixed midnight after Pyongyang's fold fires once",
			zone: "Asia/Pyongyang", spec: "0 0 * * *",
			from: "2015-08-14T12:00:00+09:00", to: "2015-08-15T12:00:00+08:30",
			want: []string{"2015-08-15T00:00:00+08:30"},
		},
		// Day rules.
		{
			name: "day 31 fires only in months that have one",
			zone: "UTC", spec: "0 9 31 * *",
			from: "2026-01-01T00:00:00Z", to: "2026-07-01T00:00:00Z",
			want: []string{"2026-01-31T09:00:00Z", "2026-03-31T09:00:00Z", "2026-05-31T09:00:00Z"},
		},
		{
			name: "February 29 fires only in leap years",
			zone: "Europe/Berlin", spec: "0 12 29 feb *",
			from: "2026-01-01T00:00:00Z", to: "2033-01-01T00:00:00Z",
			want: []string{"2028-02-29T12:00:00+01:00", "2032-02-29T12:00:00+01:00"},
		},
		{
			name: "day-of-month and day-of-week are OR-ed when neither starts with a star",
			zone: "UTC", spec: "0 0 13 * fri",
			from: "2026-02-01T00:00:00Z", to: "2026-03-01T00:00:00Z",
			want: []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z"},
		},
		{
			name: "the first seven days OR Mondays is every first-week day plus every Monday",
			zone: "UTC", spec: "0 0 1-7 * 1",
			from: "2026-06-01T00:00:00Z", to: "2026-06-16T00:00:00Z",
			want: []string{
				"2026-06-01T00:00:00Z", "2026-06-02T00:00:00Z", "2026-06-03T00:00:00Z", "2026-06-04T00:00:00Z",
				"2026-06-05T00:00:00Z", "2026-06-06T00:00:00Z", "2026-06-07T00:00:00Z", "2026-06-08T00:00:00Z",
				"2026-06-15T00:00:00Z",
			},
		},
		{
			name: "a starred step in day-of-month AND-s it with day-of-week (robfig's star bit would OR them)",
			zone: "UTC", spec: "0 0 */2 * 5",
			from: "2026-05-01T00:00:00Z", to: "2026-06-01T00:00:00Z",
			want: []string{"2026-05-01T00:00:00Z", "2026-05-15T00:00:00Z", "2026-05-29T00:00:00Z"},
		},
		{
			name: "day-of-week 7 is Sunday, as in Vixie cron",
			zone: "UTC", spec: "0 12 * * 7",
			from: "2026-03-01T00:00:00Z", to: "2026-03-15T00:00:00Z",
			want: []string{"2026-03-01T12:00:00Z", "2026-03-08T12:00:00Z"},
		},
		{
			name: "a day-of-week range may end at 7 and step through it",
			zone: "UTC", spec: "0 12 * * 5-7,1-7/3",
			from: "2026-03-01T00:00:00Z", to: "2026-03-09T00:00:00Z",
			// 5-7: Fri, Sat, Sun; 1-7/3: Mon, Thu, Sun.
			want: []string{
				"2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z", "2026-03-05T12:00:00Z", "2026-03-06T12:00:00Z",
				"2026-03-07T12:00:00Z", "2026-03-08T12:00:00Z",
			},
		},
		{
			name: "a star in day-of-week AND-s it with day-of-month",
			zone: "UTC", spec: "0 0 13 * *",
			from: "2026-02-01T00:00:00Z", to: "2026-04-01T00:00:00Z",
			want: []string{"2026-02-13T00:00:00Z", "2026-03-13T00:00:00Z"},
		},
		{
			name: "@weekly fires at Sunday midnight",
			zone: "America/New_York", spec: "@weekly",
			from: "2026-03-01T00:00:00-05:00", to: "2026-03-16T00:00:00-04:00",
			want: []string{"2026-03-01T00:00:00-05:00", "2026-03-08T00:00:00-05:00", "2026-03-15T00:00:00-04:00"},
		},
		{
			name: "@monthly and @yearly fire at midnight on the first",
			zone: "Asia/Shanghai", spec: "@yearly",
			from: "2026-01-01T00:00:00+08:00", to: "2028-01-01T00:00:00+08:00",
			want: []string{"2026-01-01T00:00:00+08:00", "2027-01-01T00:00:00+08:00"},
		},
		{
			name: "a never-matching spec has no occurrences",
			zone: "UTC", spec: "0 0 30 2 *",
			from: "2026-01-01T00:00:00Z", to: "2126-01-01T00:00:00Z",
			want: []string{},
		},
		{
			name: "an impossible date OR-ed with a weekday still fires on that weekday",
			zone: "UTC", spec: "0 0 30 2 mon",
			from: "2026-02-01T00:00:00Z", to: "2026-02-12T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"},
		},
		{
			name: "a range boundary with seconds excludes to and includes from",
			zone: "UTC", spec: "*/15 * * * *",
			from: "2026-03-08T02:15:00Z", to: "2026-03-08T02:45:00Z",
			want: []string{"2026-03-08T02:15:00Z", "2026-03-08T02:30:00Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MustParse(t, tt.spec, tt.zone)
			got, truncated := s.Occurrences(MustTime(t, tt.from), MustTime(t, tt.to), 1000)
			if truncated {
				t.Fatalf("Occurrences(%q) truncated", tt.spec)
			}
			if g, w := strings.Join(local(got, s.Location()), " "), strings.Join(tt.want, " "); g != w {
				t.Errorf("%q in %s over [%s, %s):\n got  %s\n want %s", tt.spec, tt.zone, tt.from, tt.to, g, w)
			}
			for _, o := range got {
				if o.Location() != time.UTC {
					t.Errorf("occurrence %v is not in UTC", o)
				}
			}
		})
	}
}

// robfig/cron v3.0.1's own Next skips `30 2 * * *` on a spring-forward day and
// fires `30 1 * * *` twice on a fall-back day (SPEC §5); these are the cases
// that made us compute occurrences ourselves.
func TestNextGetsRobfigsDSTBugCasesRight(t *testing.T) {
	tests := []struct {
		name, spec, after string
		want              []string // the next occurrences, chained through Next
	}{
		{
			name: "30 2 * * * fires at 03:00 EDT on New York's spring-forward day",
			spec: "30 2 * * *", after: "2026-03-07T12:00:00-05:00",
			want: []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		{
			name: "30 1 * * * fires once at 01:30 EDT on New York's fall-back day",
			spec: "30 1 * * *", after: "2026-10-31T12:00:00-04:00",
			want: []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MustParse(t, tt.spec, "America/New_York")
			at := MustTime(t, tt.after)
			var got []time.Time
			for range tt.want {
				next, ok := s.Next(at)
				if !ok {
					t.Fatalf("Next(%v): no occurrence", at)
				}
				got, at = append(got, next), next
			}
			if g, w := strings.Join(local(got, s.Location()), " "), strings.Join(tt.want, " "); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
		})
	}
}

func TestNextIsStrictlyAfterItsArgument(t *testing.T) {
	s := MustParse(t, "*/15 * * * *", "America/New_York")
	occ := MustTime(t, "2026-03-08T03:15:00-04:00")
	tests := []struct {
		name, after, want string
	}{
		{"an occurrence is not its own next", "2026-03-08T03:15:00-04:00", "2026-03-08T03:30:00-04:00"},
		{"a nanosecond before an occurrence yields it", occ.Add(-time.Nanosecond).Format(time.RFC3339Nano), "2026-03-08T03:15:00-04:00"},
		{"a nanosecond after an occurrence skips it", occ.Add(time.Nanosecond).Format(time.RFC3339Nano), "2026-03-08T03:30:00-04:00"},
		{"the last reading before the gap leads to the first after it", "2026-03-08T01:45:00-05:00", "2026-03-08T03:00:00-04:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after, err := time.Parse(time.RFC3339Nano, tt.after)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := s.Next(after)
			if !ok || !got.Equal(MustTime(t, tt.want)) {
				t.Errorf("Next(%s) = %v, %v; want %s", tt.after, got.In(s.Location()).Format(time.RFC3339), ok, tt.want)
			}
		})
	}
}

func TestPrevReturnsTheLastOccurrenceAtOrBefore(t *testing.T) {
	tests := []struct {
		name, zone, spec, at, want string
	}{
		{"an occurrence is its own prev", "America/New_York", "30 2 * * *", "2026-03-08T03:00:00-04:00", "2026-03-08T03:00:00-04:00"},
		{"the gap's fire is found from just after it", "America/New_York", "30 2 * * *", "2026-03-08T12:00:00-04:00", "2026-03-08T03:00:00-04:00"},
		{"the second pass of a fold is the latest for a wildcard spec", "America/New_York", "*/30 1 * * *", "2026-11-01T01:59:00-05:00", "2026-11-01T01:30:00-05:00"},
		{"the first pass of a fold is the latest for a fixed spec", "America/New_York", "30 1 * * *", "2026-11-01T01:59:00-05:00", "2026-11-01T01:30:00-04:00"},
		{"a leap day is found years back", "UTC", "0 0 29 2 *", "2031-06-01T00:00:00Z", "2028-02-29T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MustParse(t, tt.spec, tt.zone)
			got, ok := s.Prev(MustTime(t, tt.at))
			if !ok || !got.Equal(MustTime(t, tt.want)) {
				t.Errorf("Prev(%s) = %s, %v; want %s", tt.at, got.In(s.Location()).Format(time.RFC3339), ok, tt.want)
			}
		})
	}
}

func TestNeverMatchingSpecsHaveNoNextOrPrev(t *testing.T) {
	for _, spec := range []string{"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30-31 feb *", "0 0 31 2 */7"} {
		t.Run(fmt.Sprintf("%s never fires", spec), func(t *testing.T) {
			s := MustParse(t, spec, "UTC")
			at := MustTime(t, "2026-01-01T00:00:00Z")
			if next, ok := s.Next(at); ok {
				t.Errorf("Next = %v; want none", next)
			}
			if prev, ok := s.Prev(at); ok {
				t.Errorf("Prev = %v; want none", prev)
			}
			if p := s.Period(); p != 0 {
				t.Errorf("Period = %v; want 0", p)
			}
		})
	}
	t.Run("a leap day on a Sunday is rare but found", func(t *testing.T) {
		s := MustParse(t, "0 0 29 2 */7", "UTC") // */7 in day-of-week is Sunday only
		got, ok := s.Next(MustTime(t, "2026-01-01T00:00:00Z"))
		if want := MustTime(t, "2032-02-29T00:00:00Z"); !ok || !got.Equal(want) {
			t.Errorf("Next = %v, %v; want %v", got, ok, want)
		}
	})
}

func TestOccurrencesAreCappedAndSayTheyWereTruncated(t *testing.T) {
	s := MustParse(t, "* * * * *", "America/New_York")
	from, to := MustTime(t, "2026-01-01T00:00:00Z"), MustTime(t, "2036-01-01T00:00:00Z")
	tests := []struct {
		name          string
		limit         int
		to            time.Time
		wantN         int
		wantTruncated bool
	}{
		{"ten years of minutes stop at the cap", 1000, to, 1000, true},
		{"a range that fits is not truncated", 1000, from.Add(10 * time.Minute), 10, false},
		{"a range that exactly fits is not truncated", 10, from.Add(10 * time.Minute), 10, false},
		{"a zero cap returns nothing but says more exist", 0, to, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := s.Occurrences(from, tt.to, tt.limit)
			if len(got) != tt.wantN || truncated != tt.wantTruncated {
				t.Errorf("got %d, truncated %v; want %d, %v", len(got), truncated, tt.wantN, tt.wantTruncated)
			}
		})
	}
}

func TestIntervalsAreBlindToWallClocks(t *testing.T) {
	ny := MustZone(t, "America/New_York")
	tests := []struct {
		name, spec, anchor, from, to string
		want                         []string
	}{
		{
			name: "every 2h keeps two elapsed hours across the spring-forward gap",
			spec: "every 2h", anchor: "2026-03-07T00:30:00-05:00",
			from: "2026-03-08T00:00:00-05:00", to: "2026-03-08T08:00:00-04:00",
			want: []string{"2026-03-08T00:30:00-05:00", "2026-03-08T03:30:00-04:00", "2026-03-08T05:30:00-04:00", "2026-03-08T07:30:00-04:00"},
		},
		{
			name: "every 90m fires in both passes of the fold",
			spec: "every 90m", anchor: "2026-11-01T00:00:00-04:00",
			from: "2026-11-01T00:00:00-04:00", to: "2026-11-01T04:00:00-05:00",
			want: []string{"2026-11-01T00:00:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:30:00-05:00"},
		},
		{
			name: "@every 1h30m extends the grid before its anchor",
			spec: "@every 1h30m", anchor: "2026-06-01T12:00:00Z",
			from: "2026-06-01T08:00:00Z", to: "2026-06-01T12:00:01Z",
			// 12:00Z, 10:30Z, 09:00Z: the grid runs backwards from the anchor too.
			want: []string{"2026-06-01T05:00:00-04:00", "2026-06-01T06:30:00-04:00", "2026-06-01T08:00:00-04:00"},
		},
		{
			name: "an anchor centuries away still lands on its grid",
			spec: "every 7s", anchor: "1826-01-01T00:00:00Z",
			from: "2026-01-01T00:00:00Z", to: "2026-01-01T00:00:14Z",
			// 200 years = 73049 days = 6311433600 s ≡ 3 (mod 7), so the grid
			// sits 4 s after midnight UTC.
			want: []string{"2025-12-31T19:00:04-05:00", "2025-12-31T19:00:11-05:00"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSchedule(tt.spec, ny, MustTime(t, tt.anchor))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := s.Occurrences(MustTime(t, tt.from), MustTime(t, tt.to), 100)
			if g, w := strings.Join(local(got, ny), " "), strings.Join(tt.want, " "); g != w {
				t.Errorf("got  %s\nwant %s", g, w)
			}
			for i := 1; i < len(got); i++ {
				if next, _ := s.Next(got[i-1]); !next.Equal(got[i]) {
					t.Errorf("Next(%v) = %v; want %v", got[i-1], next, got[i])
				}
				if prev, _ := s.Prev(got[i].Add(-time.Nanosecond)); !prev.Equal(got[i-1]) {
					t.Errorf("Prev(%v - 1ns) = %v; want %v", got[i], prev, got[i-1])
				}
			}
		})
	}
}

func TestOneShotsFireOnce(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"a wall time in the gap fires at the end of the gap", "at 2026-03-08T02:30", "2026-03-08T03:00:00-04:00"},
		{"a wall time in the fold fires at its first pass", "at 2026-11-01T01:30", "2026-11-01T01:30:00-04:00"},
		{"a wall time with seconds keeps them", "at 2026-12-01T09:00:30", "2026-12-01T09:00:30-05:00"},
		{"an instant with an offset ignores the zone", "at 2026-12-01T09:00:00+01:00", "2026-12-01T03:00:00-05:00"},
		{"an instant in UTC ignores the zone", "at 2026-12-01T09:00:00Z", "2026-12-01T04:00:00-05:00"},
		{"an instant may omit its seconds", "at 2026-12-01T09:00-08:00", "2026-12-01T12:00:00-05:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := MustParse(t, tt.spec, "America/New_York")
			want := MustTime(t, tt.want)
			if s.Kind() != KindOneShot || s.Period() != 0 || s.Wildcard() {
				t.Errorf("Kind, Period, Wildcard = %v, %v, %v; want oneshot, 0, false", s.Kind(), s.Period(), s.Wildcard())
			}
			if got, ok := s.Next(want.Add(-time.Hour)); !ok || !got.Equal(want) {
				t.Errorf("Next = %s, %v; want %s", got.In(s.Location()).Format(time.RFC3339), ok, tt.want)
			}
			if got, ok := s.Next(want); ok {
				t.Errorf("Next(at) = %v; want none: a one-shot fires once", got)
			}
			if got, ok := s.Prev(want); !ok || !got.Equal(want) {
				t.Errorf("Prev(at) = %v, %v; want %v", got, ok, want)
			}
			if got, _ := s.Occurrences(want, want.Add(time.Second), 10); len(got) != 1 || !got[0].Equal(want) {
				t.Errorf("Occurrences = %v; want [%v]", got, want)
			}
			if got, _ := s.Occurrences(want.Add(-time.Hour), want, 10); len(got) != 0 {
				t.Errorf("Occurrences before it = %v; want none", got)
			}
		})
	}
}

func TestParseScheduleReadsEveryForm(t *testing.T) {
	anchor := MustTime(t, "2026-01-01T00:00:00Z")
	tests := []struct {
		spec     string
		kind     Kind
		wildcard bool
		period   time.Duration
	}{
		{"*/15 * * * *", KindCron, true, 15 * time.Minute},
		{"*/7 * * * *", KindCron, true, 4 * time.Minute}, // :56 → :00
		{"0 * * * *", KindCron, true, time.Hour},
		{"*/5 9 * * *", KindCron, true, 5 * time.Minute},
		{"30 2 * * *", KindCron, false, 24 * time.Hour},
		{"0 9,17 * * *", KindCron, false, 8 * time.Hour},
		{"0 9 * * mon-fri", KindCron, false, 24 * time.Hour},
		{"0 0 1-7 * 1", KindCron, false, 24 * time.Hour},
		{"0 12 * JAN-Mar Sun", KindCron, false, 7 * 24 * time.Hour},
		{"0-59 2 * * *", KindCron, false, time.Minute},
		{"? ? ? ? ?", KindCron, true, time.Minute},
		{"  30   2 * * *  ", KindCron, false, 24 * time.Hour},
		{"@hourly", KindCron, true, time.Hour},
		{"@daily", KindCron, false, 24 * time.Hour},
		{"@midnight", KindCron, false, 24 * time.Hour},
		{"@weekly", KindCron, false, 7 * 24 * time.Hour},
		{"@monthly", KindCron, false, 28 * 24 * time.Hour},
		{"@yearly", KindCron, false, 365 * 24 * time.Hour},
		{"@annually", KindCron, false, 365 * 24 * time.Hour},
		{"0 0 29 2 *", KindCron, false, 4*365*24*time.Hour + 24*time.Hour},
		{"every 90m", KindInterval, false, 90 * time.Minute},
		{"every 2h", KindInterval, false, 2 * time.Hour},
		{"@every 1h30m", KindInterval, false, 90 * time.Minute},
		{"every 1s", KindInterval, false, time.Second},
		{"at 2026-12-01T09:00", KindOneShot, false, 0},
		{"at 2026-12-01T09:00:30", KindOneShot, false, 0},
		{"at 2026-12-01T09:00:00+01:00", KindOneShot, false, 0},
		{"at 2026-12-01T09:00:00Z", KindOneShot, false, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q is a %s spec", tt.spec, tt.kind), func(t *testing.T) {
			s, err := ParseSchedule(tt.spec, time.UTC, anchor)
			if err != nil {
				t.Fatal(err)
			}
			if s.Kind() != tt.kind || s.Wildcard() != tt.wildcard || s.Period() != tt.period || s.Spec() != tt.spec {
				t.Errorf("Kind, Wildcard, Period, Spec = %v, %v, %v, %q; want %v, %v, %v, %q",
					s.Kind(), s.Wildcard(), s.Period(), s.Spec(), tt.kind, tt.wildcard, tt.period, tt.spec)
			}
		})
	}
}

func TestParseScheduleNamesWhatIsWrong(t *testing.T) {
	anchor := MustTime(t, "2026-01-01T00:00:00Z")
	tests := []struct {
		spec, want string
	}{
		{"", `bad spec "": empty spec`},
		{"   ", `bad spec "   ": empty spec`},
		{"61 * * * *", `bad spec "61 * * * *": minute field: 61 out of range 0-59`},
		{"* 24 * * *", `bad spec "* 24 * * *": hour field: 24 out of range 0-23`},
		{"* * 0 * *", `bad spec "* * 0 * *": day-of-month field: 0 out of range 1-31`},
		{"* * * 13 *", `bad spec "* * * 13 *": month field: 13 out of range 1-12`},
		{"* * * * 8", `bad spec "* * * * 8": day-of-week field: 8 out of range 0-7`},
		{"* * * * 7-1", `bad spec "* * * * 7-1": day-of-week field: range "7-1" runs backwards`},
		{"* * * foo *", `bad spec "* * * foo *": month field: "foo" is not a number or month name`},
		{"* * * * funday", `bad spec "* * * * funday": day-of-week field: "funday" is not a number or day name`},
		{"x * * * *", `bad spec "x * * * *": minute field: "x" is not a number`},
		{"* 5-3 * * *", `bad spec "* 5-3 * * *": hour field: range "5-3" runs backwards`},
		{"1-2-3 * * * *", `bad spec "1-2-3 * * * *": minute field: too many hyphens in "1-2-3"`},
		{"*/2/3 * * * *", `bad spec "*/2/3 * * * *": minute field: too many slashes in "*/2/3"`},
		{"*/0 * * * *", `bad spec "*/0 * * * *": minute field: step in "*/0" must be positive`},
		{"*/x * * * *", `bad spec "*/x * * * *": minute field: step "x" in "*/x" is not a number`},
		{"-5 * * * *", `bad spec "-5 * * * *": minute field: missing number in "-5"`},
		{", * * * *", `bad spec ", * * * *": minute field: no values in ","`},
		{"0 0 1 1 * *", `bad spec "0 0 1 1 * *": expected 5 fields (minute hour day-of-month month day-of-week), found 6`},
		{"0 0 1", `bad spec "0 0 1": expected 5 fields (minute hour day-of-month month day-of-week), found 3`},
		{"@fortnightly", `bad spec "@fortnightly": unknown descriptor "@fortnightly" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION)`},
		{"@daily 9", `bad spec "@daily 9": descriptor @daily takes nothing after it, found "9"`},
		{"TZ=UTC 0 0 * * *", `bad spec "TZ=UTC 0 0 * * *": a TZ= prefix is not allowed: the zone is the job's own field`},
		{"CRON_TZ=Europe/Berlin 0 0 * * *", `bad spec "CRON_TZ=Europe/Berlin 0 0 * * *": a CRON_TZ= prefix is not allowed: the zone is the job's own field`},
		{"every -5m", `bad spec "every -5m": interval must be positive`},
		{"every 0s", `bad spec "every 0s": interval must be positive`},
		{"@every 500ms", `bad spec "@every 500ms": interval 500ms is shorter than the 1s minimum`},
		{"every banana", `bad spec "every banana": interval: "banana" is not a duration (want e.g. 90m, 2h or 1h30m)`},
		{"every 1h 30m", `bad spec "every 1h 30m": interval: want one Go duration after "every", such as 90m, 2h or 1h30m`},
		{"every", `bad spec "every": interval: want one Go duration after "every", such as 90m, 2h or 1h30m`},
		{"at 2026-13-01T09:00", `bad spec "at 2026-13-01T09:00": one-shot: "2026-13-01T09:00" is not a time: month out of range`},
		{"at 2026-02-30T09:00", `bad spec "at 2026-02-30T09:00": one-shot: "2026-02-30T09:00" is not a time: day out of range`},
		{"at 2026-12-01T25:00", `bad spec "at 2026-12-01T25:00": one-shot: "2026-12-01T25:00" is not a time: hour out of range`},
		{"at 2026-12-01", `bad spec "at 2026-12-01": one-shot: "2026-12-01" is not a time (want e.g. 2026-12-01T09:00, 2026-12-01T09:00:30 or 2026-12-01T09:00:00+01:00)`},
		{"at 2026-12-01 09:00", `bad spec "at 2026-12-01 09:00": one-shot: want one time after "at" (want e.g. 2026-12-01T09:00, 2026-12-01T09:00:30 or 2026-12-01T09:00:00+01:00)`},
		{"at 2026-12-01T09:00:00.5Z", `bad spec "at 2026-12-01T09:00:00.5Z": one-shot: "2026-12-01T09:00:00.5Z" has fractional seconds; whole seconds only`},
		{"at tomorrow", `bad spec "at tomorrow": one-shot: "tomorrow" is not a time (want e.g. 2026-12-01T09:00, 2026-12-01T09:00:30 or 2026-12-01T09:00:00+01:00)`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q is refused", tt.spec), func(t *testing.T) {
			_, err := ParseSchedule(tt.spec, time.UTC, anchor)
			if !errors.Is(err, ErrBadSpec) {
				t.Fatalf("err = %v; want ErrBadSpec", err)
			}
			if err.Error() != tt.want {
				t.Errorf("err = %s\n want %s", err, tt.want)
			}
		})
	}
	t.Run("an interval without an anchor is refused", func(t *testing.T) {
		_, err := ParseSchedule("every 2h", time.UTC, time.Time{})
		want := `bad spec "every 2h": an interval needs an anchor instant (e.g. the job's creation time)`
		if !errors.Is(err, ErrBadSpec) || err.Error() != want {
			t.Errorf("err = %v; want %s", err, want)
		}
	})
}

func TestAScheduleIsSafeForConcurrentUse(t *testing.T) {
	s := MustParse(t, "0 9 * * mon-fri", "Europe/Berlin")
	after := MustTime(t, "2026-03-27T12:00:00Z")
	done := make(chan time.Duration)
	for range 8 {
		go func() {
			s.Next(after)
			s.Occurrences(after, after.Add(72*time.Hour), 10)
			done <- s.Period()
		}()
	}
	for range 8 {
		if p := <-done; p != 24*time.Hour {
			t.Errorf("Period = %v; want 24h", p)
		}
	}
}
