package cronsoak_test

import (
	"fmt"
	"time"
)

// scenario is one soak: which local zone the processes run in, which zone
// the jobs are read on, and the DST change the run straddles.
type scenario struct {
	name string
	// processTZ is the processes' TZ (their local zone); heraldTZ is
	// HERALD_TZ, left unset when empty.
	processTZ, heraldTZ string
	// jobZone is the zone given to every common job ("" = the server
	// zone); zone is the zone their specs are read on.
	jobZone, zone string
	// changeZone and changeDay name the DST change to straddle: the first
	// offset change of changeZone at or after changeDay 00:00 UTC - 1 day.
	changeZone string
	changeDay  string
	// extra are jobs for this change beyond the common set: a fixed time in
	// the fold or gap where 02:30 is not in it.
	extra []jobDef
	// outageAcrossChange: a short run whose one outage spans the change
	// (instead of the month of events around it).
	outageAcrossChange bool
}

// jobDef is a job of the soak, before it is given to herald.
type jobDef struct {
	name, spec, zone string
	// period sizes the grace (SPEC §5: clamp(period/2, 2 min, 2 h)): the
	// shortest gap between two occurrences on the wall clock.
	period time.Duration
	kind   string // "message", "fail", "gated"
}

func scenarios() []scenario {
	return []scenario{
		{
			name:      "server zone unset on a New York process, spring",
			processTZ: "America/New_York", jobZone: "", zone: "America/New_York",
			changeZone: "America/New_York", changeDay: "2026-03-08",
			// 02:30 is in the gap (02:00 → 03:00).
		},
		{
			name:      "Shanghai jobs on a Los Angeles process, fall",
			processTZ: "America/Los_Angeles", jobZone: "Asia/Shanghai", zone: "Asia/Shanghai",
			changeZone: "America/Los_Angeles", changeDay: "2026-11-01",
			// Shanghai keeps no DST: the process's fold must not leak into its
			// jobs. One server-zone job sits in the process's own fold.
			extra: []jobDef{{name: "fold-0130-server-zone", spec: "30 1 * * *", zone: "", period: 24 * time.Hour, kind: "message"}},
		},
		{
			name:      "New York jobs on a Shanghai process, spring",
			processTZ: "Asia/Shanghai", jobZone: "America/New_York", zone: "America/New_York",
			changeZone: "America/New_York", changeDay: "2026-03-08",
		},
		{
			name:      "New York jobs on a Shanghai process, fall",
			processTZ: "Asia/Shanghai", jobZone: "America/New_York", zone: "America/New_York",
			changeZone: "America/New_York", changeDay: "2026-11-01",
			// New York's fold is 01:00-02:00: 02:30 happens once.
			extra: []jobDef{{name: "fold-0130", spec: "30 1 * * *", zone: "America/New_York", period: 24 * time.Hour, kind: "message"}},
		},
		{
			name:      "Sydney server zone (HERALD_TZ) on a London process, April fall-back",
			processTZ: "Europe/London", heraldTZ: "Australia/Sydney", jobZone: "", zone: "Australia/Sydney",
			changeZone: "Australia/Sydney", changeDay: "2026-04-05",
			// Sydney's fold is 02:00-03:00: 02:30 is in it.
		},
		{
			name:      "server zone unset on a Lord Howe process (30-minute change), April fall-back",
			processTZ: "Australia/Lord_Howe", jobZone: "", zone: "Australia/Lord_Howe",
			changeZone: "Australia/Lord_Howe", changeDay: "2026-04-05",
			// The fold is 01:30-02:00: 02:30 happens once, 01:45 twice (a
			// fixed time fires on the first pass, */15 on both).
			extra: []jobDef{{name: "fold-0145", spec: "45 1 * * *", zone: "", period: 24 * time.Hour, kind: "message"}},
		},
		{
			name:      "Lord Howe jobs (30-minute change) on a UTC process, spring",
			processTZ: "UTC", jobZone: "Australia/Lord_Howe", zone: "Australia/Lord_Howe",
			changeZone: "Australia/Lord_Howe", changeDay: "2026-10-04",
			// The gap is 02:00-02:30: 02:30 exists, 02:15 does not.
			extra: []jobDef{{name: "gap-0215", spec: "15 2 * * *", zone: "Australia/Lord_Howe", period: 24 * time.Hour, kind: "message"}},
		},
		{
			name:      "an outage across the Sydney fall-back fold",
			processTZ: "UTC", jobZone: "Australia/Sydney", zone: "Australia/Sydney",
			changeZone: "Australia/Sydney", changeDay: "2026-04-05", outageAcrossChange: true,
		},
		{
			name:      "an outage across the New York spring-forward gap",
			processTZ: "UTC", jobZone: "America/New_York", zone: "America/New_York",
			changeZone: "America/New_York", changeDay: "2026-03-08", outageAcrossChange: true,
		},
		{
			name:      "an outage across the 30-minute Lord Howe fold",
			processTZ: "UTC", jobZone: "Australia/Lord_Howe", zone: "Australia/Lord_Howe",
			changeZone: "Australia/Lord_Howe", changeDay: "2026-04-05", outageAcrossChange: true,
			extra: []jobDef{{name: "fold-0145", spec: "45 1 * * *", zone: "Australia/Lord_Howe", period: 24 * time.Hour, kind: "message"}},
		},
	}
}

// commonJobs are the jobs of every scenario (zone: the scenario's job zone).
func commonJobs(zone string) []jobDef {
	return []jobDef{
		{name: "daily-0900", spec: "0 9 * * *", zone: zone, period: 24 * time.Hour, kind: "message"},
		{name: "dst-0230", spec: "30 2 * * *", zone: zone, period: 24 * time.Hour, kind: "message"},
		{name: "hourly", spec: "0 * * * *", zone: zone, period: time.Hour, kind: "message"},
		{name: "quarter", spec: "*/15 * * * *", zone: zone, period: 15 * time.Minute, kind: "message"},
		{name: "every-2h", spec: "every 2h", zone: zone, period: 2 * time.Hour, kind: "message"},
		{name: "failing", spec: "45 */6 * * *", zone: zone, period: 6 * time.Hour, kind: "fail"},
		// The gated job fires in a quiet minute (every other occurrence is
		// at a multiple of 15 minutes in UTC, in every zone used here): a run
		// held there for longer than the claim TTL overlaps nothing.
		{name: "gated", spec: "1 6 * * *", zone: "UTC", period: 24 * time.Hour, kind: "gated"},
	}
}

// findChange returns the first offset change of zone from day-1d on.
func findChange(name, day string) (time.Time, error) {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return time.Time{}, err
	}
	d, err := time.Parse("2006-01-02", day)
	if err != nil {
		return time.Time{}, err
	}
	t := d.Add(-24 * time.Hour)
	_, off := t.In(loc).Zone()
	for ; t.Before(d.Add(3 * 24 * time.Hour)); t = t.Add(15 * time.Minute) {
		if _, o := t.In(loc).Zone(); o != off {
			_, end := t.Add(-15 * time.Minute).In(loc).ZoneBounds()
			return end, nil
		}
	}
	return time.Time{}, fmt.Errorf("no offset change in %s around %s", name, day)
}
