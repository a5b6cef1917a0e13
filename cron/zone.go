package cron

import (
	"errors"
	"fmt"
	"math"
	"time"

	// Embedded so that zones resolve on hosts without /usr/share/zoneinfo
	// (minimal containers); the system database still wins when present.
	_ "time/tzdata"
)

// ErrUnknownZone is wrapped by every error LoadZone and ServerZone return for
// a zone name that is not in the IANA time zone database. The message names
// the zone, e.g. `unknown zone "Mars/Olympus": want an IANA name such as
// "Europe/Berlin"`.
var ErrUnknownZone = errors.New("unknown zone")

// LoadZone returns the zone on whose wall clock a job's spec is read (SPEC §5):
// the job's own IANA zone name, or server when name is empty (the server zone,
// see ServerZone; a nil server means UTC). The returned Location keeps the
// zone's full rules, so a job follows its zone's DST changes. An unknown name
// is an error wrapping ErrUnknownZone. "Local" is refused: it would make a
// job's schedule depend on the environment of whichever process reads it.
func LoadZone(name string, server *time.Location) (*time.Location, error) {
	if name == "" {
		if server == nil {
			return time.UTC, nil
		}
		return server, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("%w %q: not an IANA zone name; leave the zone empty to use the server zone", ErrUnknownZone, name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%w %q: want an IANA name such as \"Europe/Berlin\"", ErrUnknownZone, name)
	}
	return loc, nil
}

// ServerZone returns the server zone of SPEC §5 from the value of HERALD_TZ:
// that IANA zone when set, else the process's local zone (time.Local, which
// follows TZ and /etc/localtime). An unknown name is an error wrapping
// ErrUnknownZone that mentions HERALD_TZ.
func ServerZone(heraldTZ string) (*time.Location, error) {
	if heraldTZ == "" {
		return time.Local, nil
	}
	loc, err := LoadZone(heraldTZ, nil)
	if err != nil {
		return nil, fmt.Errorf("HERALD_TZ: %w", err)
	}
	return loc, nil
}

// offsetMargin exceeds the largest UTC offset any zone has ever used (Manila's
// local mean time, -15:56, until 1844), so every instant whose wall reading
// falls on a given wall-clock day lies within this margin of that day.
const offsetMargin = 26 * 3600

// zonePeriod is a stretch [start, end) of Unix seconds over which a zone's UTC
// offset (off, seconds east) is constant. Unbounded ends are MinInt64/MaxInt64.
type zonePeriod struct {
	start, end, off int64
}

// zonePeriods appends to dst the periods of constant offset that cover the
// instants [lo, hi), in order and contiguous. Neighbouring zone-table entries
// with equal offsets (an abbreviation or isDST change alone) are merged: only
// offset changes move wall clocks.
func zonePeriods(dst []zonePeriod, loc *time.Location, lo, hi int64) []zonePeriod {
	for t := lo; ; {
		tt := time.Unix(t, 0).In(loc)
		_, off := tt.Zone()
		s, e := tt.ZoneBounds()
		start, end := int64(math.MinInt64), int64(math.MaxInt64)
		if !s.IsZero() {
			start = s.Unix()
		}
		if !e.IsZero() {
			end = e.Unix()
		}
		if end <= t {
			end = t + 1 // ZoneBounds always contains t; never loop on a bad table
		}
		if n := len(dst); n > 0 && dst[n-1].off == int64(off) {
			dst[n-1].end = end
		} else {
			dst = append(dst, zonePeriod{start: start, end: end, off: int64(off)})
		}
		if end >= hi {
			return dst
		}
		t = end
	}
}

// wallInstants appends to dst, ascending, every instant (Unix seconds) whose
// wall reading in ps is w (seconds since 1970-01-01T00:00 read as if UTC): none
// in a gap, one normally, two (or more) in a fold. ps must cover w±offsetMargin.
//
// time.Date is no help here: for a gap or fold it returns an instant "correct
// in one of the two zones", which side depending on the zone's table.
func wallInstants(dst []int64, ps []zonePeriod, w int64) []int64 {
	for _, p := range ps {
		if t := w - p.off; t >= p.start && t < p.end {
			dst = append(dst, t)
		}
	}
	return dst
}

// gapEnd returns the first instant after the gap that skips wall reading w:
// the transition at which the clock jumped over w. ok is false when w is not
// in a gap of ps.
func gapEnd(ps []zonePeriod, w int64) (t int64, ok bool) {
	for i := 0; i+1 < len(ps); i++ {
		at := ps[i].end
		if at+ps[i].off <= w && w < at+ps[i+1].off {
			return at, true
		}
	}
	return 0, false
}

// resolveFixed returns the instant a fixed wall reading w fires at in loc
// under SPEC §5: its only pass, its first pass in a fold, or the first instant
// after the gap that skips it.
func resolveFixed(loc *time.Location, w int64) int64 {
	var buf [4]zonePeriod
	ps := zonePeriods(buf[:0], loc, w-offsetMargin, w+offsetMargin+1)
	var ibuf [4]int64
	if in := wallInstants(ibuf[:0], ps, w); len(in) > 0 {
		return in[0]
	}
	if t, ok := gapEnd(ps, w); ok {
		return t
	}
	// Unreachable: a reading that occurs in no period within offsetMargin
	// lies in a gap between two of them.
	return w - ps[0].off
}
