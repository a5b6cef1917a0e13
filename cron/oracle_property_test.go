package cron_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"herald/cron"
	"herald/tzoracle"
)

// randomSpec draws a 5-field cron spec mixing fixed and wildcard minute and
// hour fields, steps, ranges, lists and the day-of-month/day-of-week rules.
func randomSpec(r *rand.Rand) string {
	pick := func(opts ...string) string { return opts[r.IntN(len(opts))] }
	minute := pick("0", "30", "15", "45", "59", "*/15", "*/7", "*", "0,30", "5-10", "*/20", "1-59/29")
	hour := pick("*", "2", "1", "0", "3", "9", "23", "*/2", "1-3", "0,12", "2,3", "*/6")
	dom := pick("*", "*", "*", "1", "13", "29", "31", "*/2", "1-7", "15,30")
	month := pick("*", "*", "*", "3", "10,11", "*/3", "2")
	dow := pick("*", "*", "*", "0", "5", "1-5", "SAT,SUN", "*/2", "7")
	return fmt.Sprintf("%s %s %s %s %s", minute, hour, dom, month, dow)
}

var propertyZones = []string{
	"UTC", "America/New_York", "Europe/London", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe",
	"Pacific/Chatham", "America/Santiago", "Asia/Shanghai", "America/St_Johns", "Asia/Tehran",
	"Pacific/Auckland", "America/Havana", "Africa/Casablanca", "Europe/Dublin", "America/Los_Angeles",
}

// TestTheSchedulerAgreesWithTheOracle compares cron.Schedule with the
// independent tzoracle on random specs × zones over two years
// (HERALD_SEED reproduces a run; HERALD_PROPERTY_CASES sets the count).
func TestTheSchedulerAgreesWithTheOracle(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("HERALD_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	cases := 150
	if testing.Short() {
		cases = 30
	}
	if v := os.Getenv("HERALD_PROPERTY_CASES"); v != "" {
		cases, _ = strconv.Atoi(v)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(2, 0, 0)
	for i := 0; i < cases; i++ {
		spec := randomSpec(r)
		zone := propertyZones[r.IntN(len(propertyZones))]
		if r.IntN(10) == 0 {
			spec = fmt.Sprintf("every %dm", 7+r.IntN(200))
		}
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		anchor := from.Add(time.Duration(r.IntN(86400)) * time.Second)
		want, err := tzoracle.Occurrences(spec, loc, anchor, from, to)
		if err != nil {
			t.Fatalf("seed %d: oracle refused %q: %v", seed, spec, err)
		}
		s, err := cron.ParseSchedule(spec, loc, anchor)
		if err != nil {
			t.Fatalf("seed %d: scheduler refused %q: %v", seed, spec, err)
		}
		got, truncated := s.Occurrences(from, to, 2000000)
		if truncated {
			t.Fatalf("seed %d: %q truncated", seed, spec)
		}
		if d := diff(got, want, loc); d != "" {
			t.Errorf("seed %d (reproduce with HERALD_SEED=%d): %q in %s: %s", seed, seed, spec, zone, d)
		}
		// Next from a random instant agrees with the oracle's next.
		at := from.Add(time.Duration(r.Int64N(int64(to.Sub(from)) - int64(48*time.Hour))))
		if next, ok := s.Next(at); ok {
			for _, w := range want {
				if w.After(at) {
					if !w.Equal(next) {
						t.Errorf("seed %d: %q in %s: Next(%s) = %s, oracle %s", seed, spec, zone, at.Format(time.RFC3339), next.In(loc).Format(time.RFC3339), w.In(loc).Format(time.RFC3339))
					}
					break
				}
			}
		}
	}
}

func diff(got, want []time.Time, loc *time.Location) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("%d occurrences, oracle %d; first missing %s", len(got), len(want), want[i].In(loc).Format(time.RFC3339))
		case i >= len(want):
			return fmt.Sprintf("%d occurrences, oracle %d; first extra %s", len(got), len(want), got[i].In(loc).Format(time.RFC3339))
		case !got[i].Equal(want[i]):
			return fmt.Sprintf("occurrence %d: %s, oracle %s", i, got[i].In(loc).Format(time.RFC3339), want[i].In(loc).Format(time.RFC3339))
		}
	}
	return ""
}
