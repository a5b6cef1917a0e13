package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// runHerald runs the herald command in-process with env as its whole
// environment and returns its exit status, stdout and stderr.
func runHerald(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// dstCase is one hand-worked case of testdata/dst_cases.json.
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

func mustReadDSTCases(t *testing.T) []dstCase {
	t.Helper()
	data, err := os.ReadFile("../../testdata/dst_cases.json")
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
	return cases
}

// previewArgs is the command line that previews c.
func previewArgs(c dstCase, extra ...string) []string {
	args := []string{"cron", "preview", "--spec", c.Spec, "--from", c.From, "--to", c.To}
	if c.Zone != "" {
		args = append(args, "--tz", c.Zone)
	}
	if c.Anchor != "" {
		args = append(args, "--anchor", c.Anchor)
	}
	return append(args, extra...)
}

func TestPreviewPrintsEveryHandWorkedDSTCase(t *testing.T) {
	env := map[string]string{"HERALD_TZ": "UTC"} // a case without a zone runs on a UTC server
	for _, c := range mustReadDSTCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			code, out, errOut := runHerald(t, env, previewArgs(c)...)
			want := ""
			if len(c.Want) > 0 {
				want = strings.Join(c.Want, "\n") + "\n"
			}
			if code != 0 || errOut != "" || out != want {
				t.Fatalf("herald %s\nexit %d, stderr %q\n got:\n%s want:\n%s why: %s",
					strings.Join(previewArgs(c), " "), code, errOut, out, want, c.Why)
			}
		})
	}
}

func TestPreviewJSONGivesEachOccurrenceLocallyAndInUTC(t *testing.T) {
	env := map[string]string{"HERALD_TZ": "UTC"}
	for _, c := range mustReadDSTCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			code, out, errOut := runHerald(t, env, previewArgs(c, "--json")...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			var got []map[string]string
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("--json printed %q: %v", out, err)
			}
			if len(got) != len(c.Want) {
				t.Fatalf("got %d occurrences, want %d: %s", len(got), len(c.Want), out)
			}
			for i, o := range got {
				at, err := time.Parse(time.RFC3339, c.Want[i])
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"at": c.Want[i], "utc": at.UTC().Format(time.RFC3339)}
				if len(o) != 2 || o["at"] != want["at"] || o["utc"] != want["utc"] {
					t.Fatalf("occurrence %d = %v, want %v", i, o, want)
				}
			}
		})
	}
}

func TestPreviewOutputDetails(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"an empty range prints nothing", nil,
			[]string{"--spec", "0 9 * * *", "--tz", "UTC", "--from", "2026-01-01T10:00:00Z", "--to", "2026-01-01T11:00:00Z"}, ""},
		{"an empty range prints an empty JSON array", nil,
			[]string{"--spec", "0 9 * * *", "--tz", "UTC", "--from", "2026-01-01T10:00:00Z", "--to", "2026-01-01T11:00:00Z", "--json"}, "[]\n"},
		{"without --tz the spec is read in HERALD_TZ", map[string]string{"HERALD_TZ": "Europe/Berlin"},
			[]string{"--spec", "0 12 * * *", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z"}, "2026-01-01T12:00:00+01:00\n"},
		{"the range is half-open and --max may equal the count", nil,
			[]string{"--spec", "@hourly", "--tz", "UTC", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T03:00:00Z", "--max", "3"},
			"2026-01-01T00:00:00+00:00\n2026-01-01T01:00:00+00:00\n2026-01-01T02:00:00+00:00\n"},
		{"an interval keeps its anchor's fraction of a second", nil,
			[]string{"--spec", "every 1h", "--tz", "UTC", "--anchor", "2026-01-01T00:00:00.5Z", "--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T02:00:00Z"},
			"2026-01-01T00:00:00.5+00:00\n2026-01-01T01:00:00.5+00:00\n"},
		{"flags may come in any order and --anchor is ignored by cron specs", nil,
			[]string{"--to", "2026-01-01T02:00:00+01:00", "--anchor", "2020-01-01T00:00:00Z", "--from", "2026-01-01T00:00:00+01:00", "--tz", "Europe/Paris", "--spec", "30 * * * *"},
			"2026-01-01T00:30:00+01:00\n2026-01-01T01:30:00+01:00\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runHerald(t, tt.env, append([]string{"cron", "preview"}, tt.args...)...)
			if code != 0 || errOut != "" || out != tt.want {
				t.Fatalf("exit %d, stderr %q, stdout %q; want %q", code, errOut, out, tt.want)
			}
		})
	}
}

func TestPreviewRefusesABadCommandLineWithOneLineAndExit2(t *testing.T) {
	const from, to = "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string // the whole stderr line
	}{
		{"a bad spec", nil, []string{"--spec", "61 * * * *", "--from", from, "--to", to},
			`herald: usage: bad spec "61 * * * *": minute field: 61 out of range 0-59`},
		{"an unknown zone", nil, []string{"--spec", "@daily", "--tz", "Mars/Olympus", "--from", from, "--to", to},
			`herald: usage: --tz: unknown zone "Mars/Olympus": want an IANA name such as "Europe/Berlin"`},
		{"an unknown HERALD_TZ", map[string]string{"HERALD_TZ": "Mars/Olympus"}, []string{"--spec", "@daily", "--from", from, "--to", to},
			`herald: usage: HERALD_TZ: unknown zone "Mars/Olympus": want an IANA name such as "Europe/Berlin"`},
		{"an interval without --anchor", nil, []string{"--spec", "every 2h", "--from", from, "--to", to},
			`herald: usage: interval spec "every 2h" needs --anchor T, the RFC 3339 instant its grid starts from (a job's anchor defaults to its creation instant)`},
		{"a --from that is no instant", nil, []string{"--spec", "@daily", "--from", "yesterday", "--to", to},
			`herald: usage: --from "yesterday" is not an RFC 3339 instant (want e.g. 2026-03-08T02:30:00-05:00 or 2026-03-08T07:30:00Z)`},
		{"a --from without an offset", nil, []string{"--spec", "@daily", "--from", "2026-01-01T00:00:00", "--to", to},
			`herald: usage: --from "2026-01-01T00:00:00" is not an RFC 3339 instant (want e.g. 2026-03-08T02:30:00-05:00 or 2026-03-08T07:30:00Z)`},
		{"a bad --anchor", nil, []string{"--spec", "every 2h", "--anchor", "now", "--from", from, "--to", to},
			`herald: usage: --anchor "now" is not an RFC 3339 instant (want e.g. 2026-03-08T02:30:00-05:00 or 2026-03-08T07:30:00Z)`},
		{"a missing --to", nil, []string{"--spec", "@daily", "--from", from},
			`herald: usage: missing --to (want herald cron preview --spec SPEC [--tz ZONE] --from T --to T [--anchor T] [--json] [--max N])`},
		{"no flags at all", nil, nil,
			`herald: usage: missing --spec, --from, --to (want herald cron preview --spec SPEC [--tz ZONE] --from T --to T [--anchor T] [--json] [--max N])`},
		{"an empty range", nil, []string{"--spec", "@daily", "--from", to, "--to", from},
			`herald: usage: --to 2026-01-01T00:00:00Z is not after --from 2026-01-02T00:00:00Z: the range [from, to) is empty`},
		{"more occurrences than --max", nil, []string{"--spec", "@hourly", "--from", from, "--to", to, "--max", "23"},
			`herald: usage: more than 23 occurrences of "@hourly" in [2026-01-01T00:00:00Z, 2026-01-02T00:00:00Z): narrow the range or raise --max`},
		{"a --max of zero", nil, []string{"--spec", "@hourly", "--from", from, "--to", to, "--max", "0"},
			`herald: usage: --max 0: want a positive count`},
		{"an unknown flag", nil, []string{"--spec", "@hourly", "--from", from, "--to", to, "--zone", "UTC"},
			`herald: usage: flag provided but not defined: -zone (see herald cron preview -h)`},
		{"an unquoted spec", nil, []string{"--spec", "30", "2", "*", "*", "*", "--from", from, "--to", to},
			`herald: usage: unexpected argument "2" (quote a spec that has spaces: --spec '30 2 * * *')`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HERALD_TZ": "UTC"}
			for k, v := range tt.env {
				env[k] = v
			}
			code, out, errOut := runHerald(t, env, append([]string{"cron", "preview"}, tt.args...)...)
			if code != 2 || out != "" || errOut != tt.want+"\n" {
				t.Fatalf("exit %d, stdout %q\n got stderr %q\nwant stderr %q", code, out, errOut, tt.want+"\n")
			}
		})
	}
}

func TestPreviewHelpPrintsTheFlagsAndSucceeds(t *testing.T) {
	code, out, errOut := runHerald(t, nil, "cron", "preview", "-h")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "usage: herald cron preview --spec SPEC") || !strings.Contains(out, "-anchor T") {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errOut, out)
	}
	if code, _, errOut := runHerald(t, nil, "cron", "next"); code != 2 || strings.Count(errOut, "\n") != 1 {
		t.Fatalf("herald cron next: exit %d, stderr %q", code, errOut)
	}
}
