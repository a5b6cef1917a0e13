package tzoracle

import (
	"strings"
	"testing"
	"time"
)

// set builds a field bitmask from values, for readable expectations.
func set(vs ...int) uint64 {
	var b uint64
	for _, v := range vs {
		b |= 1 << uint(v)
	}
	return b
}

func span(lo, hi, step int) uint64 {
	var b uint64
	for v := lo; v <= hi; v += step {
		b |= 1 << uint(v)
	}
	return b
}

func TestParseGood(t *testing.T) {
	type want struct {
		kind                          kind
		minute, hour, dom, month, dow uint64
		domStar, dowStar              bool
	}
	all := func(k kind, min, hr uint64) want {
		return want{k, min, hr, span(1, 31, 1), span(1, 12, 1), span(0, 6, 1), true, true}
	}
	tests := []struct {
		spec string
		want want
	}{
		{"* * * * *", all(kindWildcard, span(0, 59, 1), span(0, 23, 1))},
		{"*/15 * * * *", all(kindWildcard, set(0, 15, 30, 45), span(0, 23, 1))},
		{"  30   2 * * *  ", all(kindFixed, set(30), set(2))},
		{"0 * * * *", all(kindWildcard, set(0), span(0, 23, 1))},
		{"@hourly", all(kindWildcard, set(0), span(0, 23, 1))},
		{"*/5 9 * * *", all(kindWildcard, span(0, 55, 5), set(9))},
		{"0-59/20 1 * * *", all(kindFixed, set(0, 20, 40), set(1))},
		{"1-30/5 1,2,3 * * *", all(kindFixed, set(1, 6, 11, 16, 21, 26), set(1, 2, 3))},
		{"5/20 0 * * *", all(kindFixed, set(5, 25, 45), set(0))}, // robfig: N/step = N-max/step
		{"0 0 * * *", all(kindFixed, set(0), set(0))},
		{"@daily", all(kindFixed, set(0), set(0))},
		{"@midnight", all(kindFixed, set(0), set(0))},
		{"@DAILY", all(kindFixed, set(0), set(0))},
		{"0 9 */2 * 5", want{kindFixed, set(0), set(9), span(1, 31, 2), span(1, 12, 1), set(5), true, false}},
		{"0 9 13 * 5", want{kindFixed, set(0), set(9), set(13), span(1, 12, 1), set(5), false, false}},
		{"0 9 13 * fri", want{kindFixed, set(0), set(9), set(13), span(1, 12, 1), set(5), false, false}},
		{"0 9 * jan-MAR,Dec MON-fri", want{kindFixed, set(0), set(9), span(1, 31, 1), set(1, 2, 3, 12), span(1, 5, 1), true, false}},
		{"0 9 * * 7", want{kindFixed, set(0), set(9), span(1, 31, 1), span(1, 12, 1), set(0), true, false}},
		{"0 9 * * 5-7", want{kindFixed, set(0), set(9), span(1, 31, 1), span(1, 12, 1), set(0, 5, 6), true, false}},
		{"0 9 * * */2", want{kindFixed, set(0), set(9), span(1, 31, 1), span(1, 12, 1), set(0, 2, 4, 6), true, true}},
		{"@weekly", want{kindFixed, set(0), set(0), span(1, 31, 1), span(1, 12, 1), set(0), true, false}},
		{"@monthly", want{kindFixed, set(0), set(0), set(1), span(1, 12, 1), span(0, 6, 1), false, true}},
		{"@yearly", want{kindFixed, set(0), set(0), set(1), set(1), span(0, 6, 1), false, true}},
		{"@annually", want{kindFixed, set(0), set(0), set(1), set(1), span(0, 6, 1), false, true}},
		{"0 0 31 2 *", want{kindFixed, set(0), set(0), set(31), set(2), span(0, 6, 1), false, true}}, // valid, never fires
		{"59 23 * * *", all(kindFixed, set(59), set(23))},
		{"0 12 * * 1/2", want{kindFixed, set(0), set(12), span(1, 31, 1), span(1, 12, 1), set(1, 3, 5), true, false}},
		{"0 12 * * MON/2", want{kindFixed, set(0), set(12), span(1, 31, 1), span(1, 12, 1), set(1, 3, 5), true, false}},
		{"0 12 * * 0-7/7", want{kindFixed, set(0), set(12), span(1, 31, 1), span(1, 12, 1), set(0), true, false}},
		{"0 12 * * */100", want{kindFixed, set(0), set(12), span(1, 31, 1), span(1, 12, 1), set(0), true, true}},
	}
	for _, tt := range tests {
		sp, err := parse(tt.spec)
		if err != nil {
			t.Errorf("parse(%q): %v", tt.spec, err)
			continue
		}
		got := want{sp.kind, sp.minute, sp.hour, sp.dom, sp.month, sp.dow, sp.domStar, sp.dowStar}
		if got != tt.want {
			t.Errorf("parse(%q) =\n %+v\nwant\n %+v", tt.spec, got, tt.want)
		}
	}
}

func TestParseIntervalsAndOneShots(t *testing.T) {
	for _, tt := range []struct {
		spec   string
		period time.Duration
	}{
		{"every 90m", 90 * time.Minute},
		{"every 2h", 2 * time.Hour},
		{"@every 1h30m", 90 * time.Minute},
		{"Every 1.5h", 90 * time.Minute},
		{"@every 45s", 45 * time.Second},
	} {
		sp, err := parse(tt.spec)
		if err != nil || sp.kind != kindInterval || sp.period != tt.period {
			t.Errorf("parse(%q) = %+v, %v; want interval %s", tt.spec, sp, err, tt.period)
		}
	}
	for _, tt := range []struct {
		spec string
		kind kind
		t    string
	}{
		{"at 2026-12-01T09:00", kindAtWall, "2026-12-01T09:00:00Z"},
		{"at 2026-12-01T09:00:30", kindAtWall, "2026-12-01T09:00:30Z"},
		{"at 2026-12-01T09:00:00+01:00", kindAtInstant, "2026-12-01T08:00:00Z"},
		{"at 2026-12-01T09:00:00Z", kindAtInstant, "2026-12-01T09:00:00Z"},
		{"AT 2026-12-01T09:00-05:00", kindAtInstant, "2026-12-01T14:00:00Z"},
	} {
		sp, err := parse(tt.spec)
		if err != nil {
			t.Errorf("parse(%q): %v", tt.spec, err)
			continue
		}
		got := sp.at
		if sp.kind == kindAtWall {
			got = sp.wall
		}
		if sp.kind != tt.kind || got.UTC().Format(time.RFC3339) != tt.t {
			t.Errorf("parse(%q) = kind %d %s, want kind %d %s", tt.spec, sp.kind, got.UTC().Format(time.RFC3339), tt.kind, tt.t)
		}
	}
}

func TestParseBad(t *testing.T) {
	tests := []struct {
		spec string
		want []string // substrings the error must contain
	}{
		{"", []string{"empty spec"}},
		{"   ", []string{"empty spec"}},
		{"* * * *", []string{"4 fields", "want 5"}},
		{"0 0 * * * *", []string{"6 fields", "want 5"}},
		{"60 * * * *", []string{"minute", "60 out of range 0-59"}},
		{"0 24 * * *", []string{"hour", "24 out of range 0-23"}},
		{"0 0 0 * *", []string{"day-of-month", "0 out of range 1-31"}},
		{"0 0 32 * *", []string{"day-of-month", "32 out of range"}},
		{"0 0 * 13 *", []string{"month", "13 out of range 1-12"}},
		{"0 0 * 0 *", []string{"month", "0 out of range"}},
		{"0 0 * * 8", []string{"day-of-week", "8 out of range 0-7"}},
		{"*/0 * * * *", []string{"minute", "step 0", "at least 1"}},
		{"*/ * * * *", []string{"minute", "bad step"}},
		{"*/x * * * *", []string{"minute", "bad step \"x\""}},
		{"*/-5 * * * *", []string{"minute", "bad step"}},
		{"1-30/0 * * * *", []string{"minute", "step 0"}},
		{"0 0 * FOO *", []string{"month", "unknown name \"FOO\""}},
		{"0 0 * * FUN", []string{"day-of-week", "unknown name \"FUN\""}},
		{"0 0 * MON *", []string{"month", "unknown name \"MON\""}},
		{"0 0 * * JAN", []string{"day-of-week", "unknown name \"JAN\""}},
		{"x 0 * * *", []string{"minute", "not a number"}},
		{"0 JAN * * *", []string{"hour", "not a number"}},
		{"30-10 * * * *", []string{"minute", "runs backwards"}},
		{"1-2-3 * * * *", []string{"minute", "bad number"}},
		{"-5 * * * *", []string{"minute", "missing value"}},
		{"1, * * * *", []string{"minute", "empty list element"}},
		{"? * * * *", []string{"minute"}},
		{"0 0 ? * *", []string{"day-of-month"}},
		{"@reboot", []string{"unknown descriptor"}},
		{"@daily 5", []string{"takes no fields"}},
		{"every", []string{"duration"}},
		{"every 0s", []string{"greater than zero"}},
		{"every -1h", []string{"greater than zero"}},
		{"@every banana", []string{"bad interval"}},
		{"every 1h 2h", []string{"duration"}},
		{"at", []string{"date-time"}},
		{"at tomorrow", []string{"bad date-time"}},
		{"at 2026-02-30T09:00", []string{"bad date-time"}},
		{"at 2026-12-01T25:00", []string{"bad date-time"}},
	}
	for _, tt := range tests {
		err := Validate(tt.spec)
		if err == nil {
			t.Errorf("Validate(%q) = nil, want an error", tt.spec)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%q) = %q, want it to mention %q", tt.spec, err, w)
			}
		}
		if _, err2 := Occurrences(tt.spec, time.UTC, time.Time{}, time.Unix(0, 0), time.Unix(3600, 0)); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("Occurrences(%q) error %v differs from Validate's %v", tt.spec, err2, err)
		}
	}
}
