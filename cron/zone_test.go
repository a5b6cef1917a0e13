package cron

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLoadZone(t *testing.T) {
	ny := MustZone(t, "America/New_York")
	tests := []struct {
		name, zone string
		server     *time.Location
		want       string // the Location's name, or the error
	}{
		{"an empty zone is the server zone", "", ny, "America/New_York"},
		{"an empty zone without a server zone is UTC", "", nil, "UTC"},
		{"an IANA name is loaded", "Australia/Lord_Howe", ny, "Australia/Lord_Howe"},
		{"UTC is a zone", "UTC", ny, "UTC"},
		{"an unknown name is refused by name", "Mars/Olympus", ny, `unknown zone "Mars/Olympus": want an IANA name such as "Europe/Berlin"`},
		{"a path is not a zone name", "../../etc/passwd", ny, `unknown zone "../../etc/passwd": want an IANA name such as "Europe/Berlin"`},
		{"Local is refused, so a job never depends on the process's environment", "Local", ny, `unknown zone "Local": not an IANA zone name; leave the zone empty to use the server zone`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc, err := LoadZone(tt.zone, tt.server)
			if strings.HasPrefix(tt.want, "unknown zone") {
				if !errors.Is(err, ErrUnknownZone) || err.Error() != tt.want {
					t.Errorf("err = %v; want %s", err, tt.want)
				}
				return
			}
			if err != nil || loc.String() != tt.want {
				t.Errorf("LoadZone(%q) = %v, %v; want %s", tt.zone, loc, err, tt.want)
			}
		})
	}
}

func TestServerZone(t *testing.T) {
	t.Run("an unset HERALD_TZ is the process's local zone", func(t *testing.T) {
		if loc, err := ServerZone(""); err != nil || loc != time.Local {
			t.Errorf("ServerZone(\"\") = %v, %v; want Local", loc, err)
		}
	})
	t.Run("HERALD_TZ names an IANA zone", func(t *testing.T) {
		if loc, err := ServerZone("Europe/Berlin"); err != nil || loc.String() != "Europe/Berlin" {
			t.Errorf("ServerZone = %v, %v; want Europe/Berlin", loc, err)
		}
	})
	t.Run("an unknown HERALD_TZ is refused by name", func(t *testing.T) {
		_, err := ServerZone("Nowhere/Special")
		want := `HERALD_TZ: unknown zone "Nowhere/Special": want an IANA name such as "Europe/Berlin"`
		if !errors.Is(err, ErrUnknownZone) || err.Error() != want {
			t.Errorf("err = %v; want %s", err, want)
		}
	})
}

// A job without a zone is read on the server zone's wall clock, which must
// follow that zone's DST changes rather than freeze one offset.
func TestAJobWithoutAZoneKeepsTheServerWallClockAcrossDST(t *testing.T) {
	server := MustZone(t, "America/New_York")
	loc, err := LoadZone("", server)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSchedule("0 9 * * *", loc, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := s.Occurrences(MustTime(t, "2026-03-07T00:00:00Z"), MustTime(t, "2026-03-10T00:00:00Z"), 10)
	want := "2026-03-07T09:00:00-05:00 2026-03-08T09:00:00-04:00 2026-03-09T09:00:00-04:00"
	if g := strings.Join(local(got, server), " "); g != want {
		t.Errorf("got  %s\nwant %s", g, want)
	}
}

func TestWallReadingsResolveToGapsAndFolds(t *testing.T) {
	tests := []struct {
		name, zone, wall string // wall: a reading, written as if UTC
		passes           []string
		fixed            string // the one instant a fixed-time spec fires at
	}{
		{
			name: "New York's 02:30 on spring-forward day is in the gap (time.Date says 01:30 EST)",
			zone: "America/New_York", wall: "2026-03-08T02:30:00Z",
			passes: nil, fixed: "2026-03-08T03:00:00-04:00",
		},
		{
			name: "New York's 01:30 on fall-back day passes twice",
			zone: "America/New_York", wall: "2026-11-01T01:30:00Z",
			passes: []string{"2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00"}, fixed: "2026-11-01T01:30:00-04:00",
		},
		{
			name: "Berlin's 02:30 on fall-back day is first passed in summer time (time.Date picks the second)",
			zone: "Europe/Berlin", wall: "2026-10-25T02:30:00Z",
			passes: []string{"2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"}, fixed: "2026-10-25T02:30:00+02:00",
		},
		{
			name: "Santiago's midnight on 6 September is in the gap (time.Date says 23:00 the day before)",
			zone: "America/Santiago", wall: "2026-09-06T00:00:00Z",
			passes: nil, fixed: "2026-09-06T01:00:00-03:00",
		},
		{
			name: "the first reading after a gap is its transition instant",
			zone: "America/New_York", wall: "2026-03-08T03:00:00Z",
			passes: []string{"2026-03-08T03:00:00-04:00"}, fixed: "2026-03-08T03:00:00-04:00",
		},
		{
			name: "the first reading of a gap is in it",
			zone: "Pacific/Chatham", wall: "2026-09-27T02:45:00Z",
			passes: nil, fixed: "2026-09-27T03:45:00+13:45",
		},
		{
			name: "the last second before a fold's end passes twice",
			zone: "Australia/Lord_Howe", wall: "2026-04-05T01:59:59Z",
			passes: []string{"2026-04-05T01:59:59+11:00", "2026-04-05T01:59:59+10:30"}, fixed: "2026-04-05T01:59:59+11:00",
		},
		{
			name: "a reading in a zone without transitions passes once",
			zone: "UTC", wall: "2026-03-08T02:30:00Z",
			passes: []string{"2026-03-08T02:30:00Z"}, fixed: "2026-03-08T02:30:00Z",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			loc := MustZone(t, tt.zone)
			w := MustTime(t, tt.wall).Unix()
			ps := zonePeriods(nil, loc, w-offsetMargin, w+offsetMargin+1)
			var got []time.Time
			for _, at := range wallInstants(nil, ps, w) {
				got = append(got, time.Unix(at, 0))
			}
			if g, want := strings.Join(local(got, loc), " "), strings.Join(tt.passes, " "); g != want {
				t.Errorf("passes = %s; want %s", g, want)
			}
			fixed := time.Unix(resolveFixed(loc, w), 0).In(loc).Format(time.RFC3339)
			if fixed != tt.fixed {
				t.Errorf("fixed-time instant = %s; want %s", fixed, tt.fixed)
			}
		})
	}
}
