package cron

import (
	"testing"
	"time"
)

// BenchmarkNext measures what a scheduler pays after every fire.
func BenchmarkNext(b *testing.B) {
	benches := []struct {
		name, spec, zone, after string
	}{
		{"every quarter hour", "*/15 * * * *", "America/New_York", "2026-06-01T12:07:00Z"},
		{"every minute", "* * * * *", "America/New_York", "2026-06-01T12:07:30Z"},
		{"daily 02:30 in New York on a quiet day", "30 2 * * *", "America/New_York", "2026-06-01T12:00:00Z"},
		{"daily 02:30 in New York into the gap", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00Z"},
		{"leap days only", "0 0 29 2 *", "Europe/Berlin", "2026-06-01T12:00:00Z"},
		{"never matching", "0 0 30 2 *", "UTC", "2026-06-01T12:00:00Z"},
		{"interval", "every 90m", "UTC", "2026-06-01T12:00:00Z"},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			s, err := ParseSchedule(bb.spec, MustZone(b, bb.zone), MustTime(b, "2026-01-01T00:00:00Z"))
			if err != nil {
				b.Fatal(err)
			}
			after := MustTime(b, bb.after)
			b.ReportAllocs()
			for b.Loop() {
				s.Next(after)
			}
		})
	}
}

// BenchmarkOccurrences measures a preview of a day of quarter hours.
func BenchmarkOccurrences(b *testing.B) {
	s := MustParse(b, "*/15 * * * *", "America/New_York")
	from := MustTime(b, "2026-03-08T00:00:00Z")
	to := from.Add(24 * time.Hour)
	b.ReportAllocs()
	for b.Loop() {
		s.Occurrences(from, to, 1000)
	}
}

// BenchmarkParseSchedule measures parsing, Period's date scan included.
func BenchmarkParseSchedule(b *testing.B) {
	loc := MustZone(b, "America/New_York")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseSchedule("*/15 9-17 * * mon-fri", loc, time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}
