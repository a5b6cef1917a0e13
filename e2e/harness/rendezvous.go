package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Rendezvous is a row of numbered gates for one fault point's `pause:FILE`
// rules (SPEC §6): the Nth pass of the point in every process armed with
// Faults parks on gate N until the test opens it. While parked, a process
// shows as the file GATE.arrived-<pid> (internal/faultpoint), so a test
// can wait until every contender holds the same pass and then let them all
// go at once.
type Rendezvous struct {
	Dir   string
	Point string
}

// NewRendezvous makes dir, where the gates of point live.
func NewRendezvous(tb testing.TB, dir, point string) *Rendezvous {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return &Rendezvous{Dir: dir, Point: point}
}

// Gate is the file that releases pass n.
func (r *Rendezvous) Gate(n int) string { return filepath.Join(r.Dir, fmt.Sprintf("gate-%04d", n)) }

// Faults is the HERALD_FAULTS value that parks passes 1..passes of the
// point, each on its own gate. Passes after the last are not armed.
func (r *Rendezvous) Faults(passes int) string {
	entries := make([]string, 0, passes)
	for n := 1; n <= passes; n++ {
		entries = append(entries, fmt.Sprintf("%s@%d=pause:%s", r.Point, n, r.Gate(n)))
	}
	return strings.Join(entries, ";")
}

var arrivedName = regexp.MustCompile(`^gate-(\d+)\.arrived-(\d+)$`)

// Parked returns, by pass, the pids parked at the gates now.
func (r *Rendezvous) Parked() (map[int][]int, error) {
	ents, err := os.ReadDir(r.Dir)
	if err != nil {
		return nil, fmt.Errorf("read gates: %w", err)
	}
	out := map[int][]int{}
	for _, e := range ents {
		m := arrivedName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pass, _ := strconv.Atoi(m[1])
		pid, _ := strconv.Atoi(m[2])
		out[pass] = append(out[pass], pid)
	}
	for _, pids := range out {
		sort.Ints(pids)
	}
	return out, nil
}

// errOutOfStep marks a failure no waiting can cure.
var errOutOfStep = errors.New("out of step")

// WaitParked waits until every one of procs is parked at pass n. It fails
// at once when one of them exits, or is parked at a later pass (out of
// step with the test's count: it passed the point more often than
// expected), and when the deadline passes; the error says who was parked
// where. Gates before n are open, so a process still shown there is only
// on its way out.
func (r *Rendezvous) WaitParked(ctx context.Context, n int, procs ...*Proc) error {
	var ahead error
	err := Eventually(ctx, fmt.Sprintf("%s pass %d parked in %d processes", r.Point, n, len(procs)), func() error {
		parked, err := r.Parked()
		if err != nil {
			return err
		}
		at := map[int]bool{}
		for _, pid := range parked[n] {
			at[pid] = true
		}
		var missing []string
		for _, p := range procs {
			for pass, pids := range parked {
				if pass > n && slices.Contains(pids, p.Pid()) {
					ahead = fmt.Errorf("%w: %s (pid %d) is parked at %s pass %d while pass %d is awaited; parked: %v",
						errOutOfStep, p.Name, p.Pid(), r.Point, pass, n, parked)
					return nil
				}
			}
			if p.Exited() {
				ahead = fmt.Errorf("%s exited (%v) before reaching %s pass %d; last lines:\n%s", p.Name, p.ExitErr(), r.Point, n, tail(p.Lines(), 15))
				return nil
			}
			if !at[p.Pid()] {
				missing = append(missing, fmt.Sprintf("%s (pid %d)", p.Name, p.Pid()))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not parked at pass %d: %s; parked: %v", n, strings.Join(missing, ", "), parked)
		}
		return nil
	})
	if ahead != nil {
		return ahead
	}
	return err
}

// AssertNoneParked returns an error naming every process parked at any
// gate: before a step that should make nothing due, nobody may be waiting.
func (r *Rendezvous) AssertNoneParked(open int) error {
	parked, err := r.Parked()
	if err != nil {
		return err
	}
	for pass := range parked {
		if pass > open {
			return fmt.Errorf("%w: processes parked at %s passes beyond %d (the last opened): %v", errOutOfStep, r.Point, open, parked)
		}
	}
	return nil
}

// Open opens gate n: every process parked at pass n goes on.
func (r *Rendezvous) Open(tb testing.TB, n int) {
	tb.Helper()
	if err := os.WriteFile(r.Gate(n), nil, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// OpenAll opens gates 1..passes, so no process can stay parked (cleanup).
func (r *Rendezvous) OpenAll(passes int) {
	for n := 1; n <= passes; n++ {
		_ = os.WriteFile(r.Gate(n), nil, 0o644)
	}
}

// ownerLine is the structured log line naming a herald process's owner id
// (the id its claims and fire attempts carry).
var ownerLine = regexp.MustCompile(`msg="boot sweep starting" owner=([0-9a-f]+)`)

// Owner returns the node's owner id, read from its log.
func (n *Node) Owner(ctx context.Context) (string, error) {
	m, err := n.WaitLine(ctx, ownerLine)
	if err != nil {
		return "", err
	}
	return m[1], nil
}
