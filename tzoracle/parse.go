package tzoracle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// kind tells the walk which rule of SPEC §5 applies to a parsed spec.
type kind int

const (
	kindFixed     kind = iota // cron spec, neither minute nor hour starts with '*'
	kindWildcard              // cron spec, minute or hour starts with '*'
	kindInterval              // "every D" / "@every D"
	kindAtWall                // "at 2026-12-01T09:00": a wall reading in the zone
	kindAtInstant             // "at 2026-12-01T09:00:00+01:00": an absolute instant
)

// spec is the parsed form. Field sets are bitmasks indexed by the field's
// value (minute 0-59, hour 0-23, dom 1-31, month 1-12, dow 0-6 with 0=Sunday).
type spec struct {
	kind kind

	minute, hour, dom, month, dow uint64
	// domStar/dowStar record whether the field's text starts with '*':
	// Vixie cron decides between OR and AND on that, not on the resulting set.
	domStar, dowStar bool

	period time.Duration // kindInterval
	wall   time.Time     // kindAtWall: the reading, carried in a UTC Time
	at     time.Time     // kindAtInstant
}

// descriptors are expanded textually so that the fixed/wildcard and
// OR/AND decisions are taken on the same field text as for a written spec
// (@hourly = "0 * * * *" is therefore a wildcard spec, @daily a fixed one).
var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

type fieldDef struct {
	name     string
	min, max int
	names    []string // names[i] is the value min+i (nil: numbers only)
}

// openMax is where "*" and "N/step" stop: day-of-week stops at 6, since 7
// only repeats Sunday and "1/2" must mean Mon, Wed, Fri (not also Sunday).
func (d fieldDef) openMax() int {
	if d.max == 7 {
		return 6
	}
	return d.max
}

var (
	fMinute = fieldDef{name: "minute", min: 0, max: 59}
	fHour   = fieldDef{name: "hour", min: 0, max: 23}
	fDom    = fieldDef{name: "day-of-month", min: 1, max: 31}
	fMonth  = fieldDef{name: "month", min: 1, max: 12,
		names: []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}}
	// Day-of-week accepts 0-7: 7 is Sunday again, as in Vixie cron and cronie.
	fDow = fieldDef{name: "day-of-week", min: 0, max: 7,
		names: []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}}
)

// Validate reports whether spec is accepted by Occurrences, with the same
// error Occurrences would return (nil when the spec is good). It needs no
// zone or window, so tests can compare the grammar alone with the
// scheduler's.
func Validate(specText string) error {
	_, err := parse(specText)
	return err
}

func parse(text string) (*spec, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return nil, errors.New("tzoracle: empty spec")
	}
	fields := strings.Fields(s)
	head := strings.ToLower(fields[0])

	switch {
	case head == "every" || head == "@every":
		return parseInterval(text, fields)
	case head == "at":
		return parseAt(text, fields)
	case strings.HasPrefix(head, "@"):
		exp, ok := descriptors[head]
		if !ok {
			return nil, fmt.Errorf("tzoracle: spec %q: unknown descriptor %q", text, fields[0])
		}
		if len(fields) != 1 {
			return nil, fmt.Errorf("tzoracle: spec %q: descriptor %s takes no fields", text, fields[0])
		}
		fields = strings.Fields(exp)
	}

	if len(fields) != 5 {
		return nil, fmt.Errorf("tzoracle: spec %q: %d fields, want 5 (minute hour day-of-month month day-of-week)", text, len(fields))
	}
	sp := &spec{}
	var err error
	defs := []fieldDef{fMinute, fHour, fDom, fMonth, fDow}
	dsts := []*uint64{&sp.minute, &sp.hour, &sp.dom, &sp.month, &sp.dow}
	for i, def := range defs {
		if *dsts[i], err = parseField(fields[i], def); err != nil {
			return nil, fmt.Errorf("tzoracle: spec %q: %w", text, err)
		}
	}
	// Sunday is both 0 and 7; fold 7 onto 0 so matching needs one bit.
	if sp.dow&(1<<7) != 0 {
		sp.dow = sp.dow&^(1<<7) | 1
	}
	sp.domStar = strings.HasPrefix(fields[2], "*")
	sp.dowStar = strings.HasPrefix(fields[4], "*")
	if strings.HasPrefix(fields[0], "*") || strings.HasPrefix(fields[1], "*") {
		sp.kind = kindWildcard
	} else {
		sp.kind = kindFixed
	}
	return sp, nil
}

// parseField turns one field ("*", "1,2", "1-5", "*/15", "1-30/5", "MON-FRI",
// and robfig's "N/step" = "N-max/step") into a bitmask.
func parseField(text string, def fieldDef) (uint64, error) {
	if text == "" {
		return 0, fmt.Errorf("%s: empty field", def.name)
	}
	var set uint64
	for _, elem := range strings.Split(text, ",") {
		if elem == "" {
			return 0, fmt.Errorf("%s: empty list element in %q", def.name, text)
		}
		rng, stepText, hasStep := strings.Cut(elem, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || stepText == "" || stepText[0] == '+' || stepText[0] == '-' {
				return 0, fmt.Errorf("%s: bad step %q in %q (want a positive number)", def.name, stepText, elem)
			}
			if n < 1 {
				return 0, fmt.Errorf("%s: step %d in %q must be at least 1", def.name, n, elem)
			}
			// A step wider than any field has the same effect as 64 and
			// cannot overflow the loop below.
			step = min(n, 64)
		}
		var lo, hi int
		switch {
		case rng == "*":
			lo, hi = def.min, def.openMax()
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = parseValue(a, def, elem); err != nil {
				return 0, err
			}
			if hi, err = parseValue(b, def, elem); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("%s: range %q runs backwards (%d > %d)", def.name, rng, lo, hi)
			}
		default:
			var err error
			if lo, err = parseValue(rng, def, elem); err != nil {
				return 0, err
			}
			hi = lo
			if hasStep { // robfig/cron reads "N/step" as "N-max/step"
				hi = def.openMax()
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << uint(v)
		}
	}
	return set, nil
}

func parseValue(text string, def fieldDef, elem string) (int, error) {
	if text == "" {
		return 0, fmt.Errorf("%s: missing value in %q", def.name, elem)
	}
	if c := text[0]; c >= '0' && c <= '9' {
		n, err := strconv.Atoi(text)
		if err != nil {
			return 0, fmt.Errorf("%s: bad number %q in %q", def.name, text, elem)
		}
		if n < def.min || n > def.max {
			return 0, fmt.Errorf("%s: %d out of range %d-%d", def.name, n, def.min, def.max)
		}
		return n, nil
	}
	for i, name := range def.names {
		if strings.EqualFold(text, name) {
			return def.min + i, nil
		}
	}
	if def.names == nil {
		return 0, fmt.Errorf("%s: %q is not a number", def.name, text)
	}
	return 0, fmt.Errorf("%s: unknown name %q (want %s-%s or a number)", def.name, text, def.names[0], def.names[len(def.names)-1])
}

func parseInterval(text string, fields []string) (*spec, error) {
	if len(fields) != 2 {
		return nil, fmt.Errorf("tzoracle: spec %q: want %q followed by one Go duration such as 90m or 1h30m", text, fields[0])
	}
	d, err := time.ParseDuration(fields[1])
	if err != nil {
		return nil, fmt.Errorf("tzoracle: spec %q: bad interval: %v", text, err)
	}
	if d <= 0 {
		return nil, fmt.Errorf("tzoracle: spec %q: interval %s must be greater than zero", text, d)
	}
	return &spec{kind: kindInterval, period: d}, nil
}

func parseAt(text string, fields []string) (*spec, error) {
	if len(fields) != 2 {
		return nil, fmt.Errorf("tzoracle: spec %q: want \"at\" followed by one date-time such as 2026-12-01T09:00", text)
	}
	v := fields[1]
	// With an offset or Z it is an instant; without, a wall reading.
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04Z07:00"} {
		if t, err := time.Parse(layout, v); err == nil {
			return &spec{kind: kindAtInstant, at: t}, nil
		}
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, time.UTC); err == nil {
			return &spec{kind: kindAtWall, wall: t}, nil
		}
	}
	return nil, fmt.Errorf("tzoracle: spec %q: bad date-time %q (want 2006-01-02T15:04[:05] with an optional Z or ±hh:mm offset)", text, v)
}
