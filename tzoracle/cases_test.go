package tzoracle

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"
)

// dstCase is one entry of ../testdata/dst_cases.json; the file is shared
// with the scheduler's tests and `herald cron preview`, so its shape is
// fixed: instants are RFC 3339 with the zone's local offset, [from, to).
type dstCase struct {
	Name   string   `json:"name"`
	Zone   string   `json:"zone"`
	Spec   string   `json:"spec"`
	Anchor string   `json:"anchor"`
	From   string   `json:"from"`
	To     string   `json:"to"`
	Want   []string `json:"want"`
	Why    string   `json:"why"`
}

func loadCases(t *testing.T) []dstCase {
	t.Helper()
	raw, err := os.ReadFile("../testdata/dst_cases.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var cases []dstCase
	if err := dec.Decode(&cases); err != nil {
		t.Fatalf("dst_cases.json: %v", err)
	}
	return cases
}

func mustTime(t *testing.T, what, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestDSTCases checks the oracle against the hand-worked cases. The wants
// were derived by hand from the tz rules quoted in each "why"; a mismatch
// means either the oracle or the hand derivation is wrong, never "update
// the file from the oracle".
func TestDSTCases(t *testing.T) {
	cases := loadCases(t)
	if len(cases) < 40 {
		t.Errorf("only %d cases, want at least 40", len(cases))
	}
	seen := map[string]bool{}
	zones := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Errorf("duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
		zones[c.Zone] = true
		t.Run(c.Name, func(t *testing.T) {
			if c.Why == "" {
				t.Error("case has no \"why\"")
			}
			loc, err := time.LoadLocation(c.Zone)
			if err != nil {
				t.Fatal(err)
			}
			from := mustTime(t, "from", c.From)
			to := mustTime(t, "to", c.To)
			var anchor time.Time
			if c.Anchor != "" {
				anchor = mustTime(t, "anchor", c.Anchor)
			}
			// The file itself: each want is a valid instant, ascending, in
			// [from, to), written with the zone's offset at that instant.
			for i, w := range c.Want {
				wt := mustTime(t, "want", w)
				if i > 0 && !mustTime(t, "want", c.Want[i-1]).Before(wt) {
					t.Errorf("want[%d] %s is not after want[%d]", i, w, i-1)
				}
				if wt.Before(from) || !wt.Before(to) {
					t.Errorf("want[%d] %s is outside [from, to)", i, w)
				}
				if got := wt.In(loc).Format("2006-01-02T15:04:05.999999999-07:00"); got != w {
					t.Errorf("want[%d] %s is written with the wrong offset: the zone reads %s", i, w, got)
				}
			}

			occ, err := Occurrences(c.Spec, loc, anchor, from, to)
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(occ))
			for i, o := range occ {
				if o.Location() != time.UTC {
					t.Errorf("occurrence %d is in %s, want UTC", i, o.Location())
				}
				got[i] = o.In(loc).Format("2006-01-02T15:04:05.999999999-07:00")
			}
			if !slices.Equal(got, c.Want) && !(len(got) == 0 && len(c.Want) == 0) {
				t.Errorf("spec %q in %s:\n got %q\nwant %q\nwhy: %s", c.Spec, c.Zone, got, c.Want, c.Why)
			}
		})
	}
	for _, z := range []string{"America/New_York", "Europe/London", "Australia/Sydney", "Australia/Lord_Howe",
		"Pacific/Chatham", "America/Santiago", "Asia/Shanghai", "UTC"} {
		if !zones[z] {
			t.Errorf("no case covers %s", z)
		}
	}
}
