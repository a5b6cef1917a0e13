package cron

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
)

// dstCase is one hand-worked case of ../testdata/dst_cases.json: the
// occurrences of spec in zone over [from, to), with the reasoning in why.
type dstCase struct {
	Name   string   `json:"name"`
	Zone   string   `json:"zone"`
	Spec   string   `json:"spec"`
	Anchor string   `json:"anchor"` // intervals only
	From   string   `json:"from"`
	To     string   `json:"to"`
	Want   []string `json:"want"` // RFC 3339 with the local offset
	Why    string   `json:"why"`
}

func TestOccurrencesReproduceTheHandWorkedDSTCases(t *testing.T) {
	data, err := os.ReadFile("../testdata/dst_cases.json")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("../testdata/dst_cases.json is not written yet")
	}
	if err != nil {
		t.Fatal(err)
	}
	var cases []dstCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("read dst_cases.json: %v", err)
	}
	if len(cases) == 0 {
		t.Fatal("dst_cases.json holds no cases")
	}
	instant := func(t *testing.T, v string) time.Time {
		t.Helper()
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Fatalf("case file: %v", err)
		}
		return at
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			loc, err := LoadZone(c.Zone, time.UTC) // a case without a zone runs on a UTC server
			if err != nil {
				t.Fatal(err)
			}
			var anchor time.Time
			if c.Anchor != "" {
				anchor = instant(t, c.Anchor)
			}
			s, err := ParseSchedule(c.Spec, loc, anchor)
			if err != nil {
				t.Fatalf("%v\nwhy: %s", err, c.Why)
			}
			got, truncated := s.Occurrences(instant(t, c.From), instant(t, c.To), 100_000)
			same := !truncated && len(got) == len(c.Want)
			for i := 0; same && i < len(got); i++ {
				same = got[i].Equal(instant(t, c.Want[i]))
			}
			if !same {
				t.Errorf("%q in %s over [%s, %s):\n got  %s\n want %s\nwhy: %s",
					c.Spec, c.Zone, c.From, c.To, strings.Join(local(got, loc), " "), strings.Join(c.Want, " "), c.Why)
			}
		})
	}
}
