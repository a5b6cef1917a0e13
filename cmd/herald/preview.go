package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"herald/cron"
)

// DefaultPreviewMax is how many occurrences `herald cron preview` prints
// unless --max says otherwise; a range holding more is an error, never a
// silent truncation.
const DefaultPreviewMax = 10000

// cronCmd dispatches `herald cron VERB`.
func cronCmd(args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "preview" {
		return fmt.Errorf("%w: want `herald cron preview --spec SPEC --from T --to T`", errUsage)
	}
	return cronPreview(args[1:], getenv, stdout)
}

// cmdFlags is a flag set whose every error is one line: the flag package's
// complaint is returned (and printed once, by run) instead of being printed
// with the whole flag list; -h prints the synopsis and flags to stdout.
type cmdFlags struct {
	*flag.FlagSet
	synopsis string
	stdout   io.Writer
}

// quietFlags returns the flag set of `herald NAME`; synopsis is its usage
// line without "herald".
func quietFlags(name, synopsis string, stdout io.Writer) *cmdFlags {
	fs := flag.NewFlagSet("herald "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, synopsis: synopsis, stdout: stdout}
}

// parse parses args. -h (flag.ErrHelp) prints the help and is returned as
// is, for the caller to end the command successfully; other errors are
// usage errors.
func (fs *cmdFlags) parse(args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprintf(fs.stdout, "usage: herald %s\n\nflags:\n", fs.synopsis)
		fs.SetOutput(fs.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return err
	}
	return fmt.Errorf("%w: %w (see %s -h)", errUsage, err, fs.Name())
}

// parseInstant reads the RFC 3339 instant of flag name.
func parseInstant(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: --%s %q is not an RFC 3339 instant (want e.g. 2026-03-08T02:30:00-05:00 or 2026-03-08T07:30:00Z)", errUsage, name, v)
	}
	return t, nil
}

// previewOccurrence is one element of `herald cron preview --json`.
type previewOccurrence struct {
	At  string `json:"at"`  // RFC 3339 with the zone's local offset
	UTC string `json:"utc"` // the same instant in UTC
}

// cronPreview is `herald cron preview` (SPEC §7): every occurrence of a spec
// in [from, to), under the scheduler's own DST policy (SPEC §5), one RFC 3339
// instant with its local offset per line. Instants print with as many
// fractional digits as they have: none for cron specs and one-shots, and an
// interval anchored on a fraction of a second keeps it.
func cronPreview(args []string, getenv func(string) string, stdout io.Writer) error {
	const synopsis = "cron preview --spec SPEC [--tz ZONE] --from T --to T [--anchor T] [--json] [--max N]"
	fs := quietFlags("cron preview", synopsis, stdout)
	spec := fs.String("spec", "", "the `SPEC`: \"30 2 * * *\", \"@hourly\", \"every 2h\", \"at 2026-12-01T09:00\" (required)")
	tz := fs.String("tz", "", "`ZONE`, the IANA zone whose wall clock the spec is read on (default: HERALD_TZ, else the local zone)")
	fromS := fs.String("from", "", "start of the range, inclusive: an RFC 3339 instant `T` (required)")
	toS := fs.String("to", "", "end of the range, exclusive: an RFC 3339 instant `T` (required)")
	anchorS := fs.String("anchor", "", "origin of an interval's grid: an RFC 3339 instant `T` (required for intervals, ignored otherwise)")
	asJSON := fs.Bool("json", false, `print a JSON array of {"at": local, "utc": UTC}`)
	limit := fs.Int("max", DefaultPreviewMax, "fail if the range holds more than `N` occurrences")
	if err := fs.parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (quote a spec that has spaces: --spec '30 2 * * *')", errUsage, fs.Arg(0))
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"spec", *spec}, {"from", *fromS}, {"to", *toS}} {
		if f.v == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s (want herald %s)", errUsage, strings.Join(missing, ", "), synopsis)
	}
	if *limit < 1 {
		return fmt.Errorf("%w: --max %d: want a positive count", errUsage, *limit)
	}
	from, err := parseInstant("from", *fromS)
	if err != nil {
		return err
	}
	to, err := parseInstant("to", *toS)
	if err != nil {
		return err
	}
	if !from.Before(to) {
		return fmt.Errorf("%w: --to %s is not after --from %s: the range [from, to) is empty", errUsage, *toS, *fromS)
	}
	var anchor time.Time
	if *anchorS != "" {
		if anchor, err = parseInstant("anchor", *anchorS); err != nil {
			return err
		}
	}
	server, err := cron.ServerZone(getenv("HERALD_TZ"))
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	loc, err := cron.LoadZone(*tz, server)
	if err != nil {
		return fmt.Errorf("%w: --tz: %w", errUsage, err)
	}
	// Without --anchor, parse with a stand-in so that cron itself says
	// whether the spec is an interval, which needs the real one.
	parseAnchor := anchor
	if parseAnchor.IsZero() {
		parseAnchor = from
	}
	sched, err := cron.ParseSchedule(*spec, loc, parseAnchor)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if sched.Kind() == cron.KindInterval && anchor.IsZero() {
		return fmt.Errorf("%w: interval spec %q needs --anchor T, the RFC 3339 instant its grid starts from (a job's anchor defaults to its creation instant)", errUsage, *spec)
	}
	times, truncated := sched.Occurrences(from, to, *limit)
	if truncated {
		return fmt.Errorf("%w: more than %d occurrences of %q in [%s, %s): narrow the range or raise --max", errUsage, *limit, *spec, *fromS, *toS)
	}
	if *asJSON {
		out := make([]previewOccurrence, len(times))
		for i, t := range times {
			out[i] = previewOccurrence{At: t.In(loc).Format(localOffsetFormat), UTC: t.UTC().Format(time.RFC3339Nano)}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	w := bufio.NewWriter(stdout)
	for _, t := range times {
		w.WriteString(t.In(loc).Format(localOffsetFormat))
		w.WriteByte('\n')
	}
	return w.Flush()
}

// localOffsetFormat is RFC 3339 with the zone's local offset always written
// as a number: a zero offset prints "+00:00" (London in winter is local
// time at +00:00, which "Z" — UTC — does not say).
const localOffsetFormat = "2006-01-02T15:04:05.999999999-07:00"
