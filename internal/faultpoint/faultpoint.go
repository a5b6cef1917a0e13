// Package faultpoint holds herald's named fault points: places in the code
// where a test can kill, hang, pause, delay or fail the process, armed from
// the environment (SPEC §6, after gofail).
//
// HERALD_FAULTS="point[@hit]=action;…" arms points. Actions:
//
//	kill          SIGKILL this process
//	exit:N        exit with status N at once (no deferred functions run)
//	hang          block forever
//	error         make Hit return an error wrapping ErrInjected
//	delay:D       sleep D (a Go duration) on the process clock
//	pause:FILE    block until FILE exists (a rendezvous); while waiting,
//	              FILE.arrived-<pid> exists so a test knows who is parked
//
// `@hit` fires the action on the Nth pass only (default 1). Every firing
// first writes one line to the fault log (standard error):
//
//	faultpoint: outbox.sent hit 1: kill
//
// so a suite can check that every armed point was reached. Unarmed, Hit
// costs one atomic load.
package faultpoint

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"herald/internal/clock"
)

// EnvFaults names the environment variable that arms fault points.
const EnvFaults = "HERALD_FAULTS"

// ErrInjected is wrapped by the error Hit returns for the `error` action.
var ErrInjected = errors.New("injected fault")

// ErrUnknownPoint is wrapped by Parse for a point name not in Catalog.
var ErrUnknownPoint = errors.New("unknown fault point")

// Names of fault points. They are stable: tests outside the code arm them
// by name (SPEC §7).
const (
	OutboxRecorded = "outbox.recorded"
	OutboxClaimed  = "outbox.claimed"
	OutboxSent     = "outbox.sent"
	OutboxSettled  = "outbox.settled"
	BootClaimed    = "boot.claimed"
	BootSent       = "boot.sent"
	CronDue        = "cron.due"
	CronClaimed    = "cron.claimed"
	CronStarted    = "cron.started"
	CronFinished   = "cron.finished"
	CronHeartbeat  = "cron.heartbeat"
)

// Point is one named fault point and the crash window it guards.
type Point struct {
	Name   string
	Window string
}

// Catalog returns every fault point, in the order of the protocol steps.
func Catalog() []Point {
	return []Point{
		{OutboxRecorded, "recorded-unsent: the obligation is committed as pending; nothing claimed or sent"},
		{OutboxClaimed, "attempting-unsent: the claim is committed (attempting, fencing token bumped); nothing sent"},
		{OutboxSent, "sent-unacked: the platform answered; the outcome is not yet settled in the ledger"},
		{OutboxSettled, "settled: the outcome is committed; the worker has not yet moved on"},
		{BootClaimed, "boot sweep: an orphaned row is claimed for redelivery; nothing sent"},
		{BootSent, "boot sweep: the redelivery was answered; the outcome is not yet settled"},
		{CronDue, "a due occurrence was read; its claim transaction has not begun (a rendezvous for replicas)"},
		{CronClaimed, "fire claim committed and next occurrence advanced; the execution has not started"},
		{CronStarted, "execution marked running; the action has not finished"},
		{CronFinished, "the action finished; the terminal record and its delivery are not yet committed"},
		{CronHeartbeat, "a heartbeat is about to refresh the fire claim"},
	}
}

type action int

const (
	actKill action = iota
	actExit
	actHang
	actError
	actDelay
	actPause
)

type rule struct {
	hit    int64
	act    action
	code   int
	delay  time.Duration
	file   string
	source string // the rule as written, for the fault log
}

type point struct {
	passes atomic.Int64
	rules  []rule
}

// Set is the armed fault points of one process. A nil *Set is valid and
// has nothing armed.
type Set struct {
	armed  atomic.Bool
	points map[string]*point
	clk    clock.Clock
	mu     sync.Mutex // serialises fault-log lines
	log    io.Writer
}

// Parse arms the points described by spec (the HERALD_FAULTS syntax). An
// empty spec gives a Set with nothing armed. Errors name the offending entry:
// an unknown point (ErrUnknownPoint), a bad hit count or an unknown action.
// clk drives `delay`; log receives one line per firing (nil: standard error).
func Parse(spec string, clk clock.Clock, log io.Writer) (*Set, error) {
	if log == nil {
		log = os.Stderr
	}
	s := &Set{points: map[string]*point{}, clk: clk, log: log}
	known := map[string]bool{}
	for _, p := range Catalog() {
		known[p.Name] = true
	}
	for _, entry := range strings.Split(spec, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		r, name, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("%s entry %q: %w", EnvFaults, entry, err)
		}
		if !known[name] {
			return nil, fmt.Errorf("%s entry %q: %w %q (see `herald faults list`)", EnvFaults, entry, ErrUnknownPoint, name)
		}
		p := s.points[name]
		if p == nil {
			p = &point{}
			s.points[name] = p
		}
		p.rules = append(p.rules, r)
	}
	s.armed.Store(len(s.points) > 0)
	return s, nil
}

func parseEntry(entry string) (rule, string, error) {
	lhs, act, ok := strings.Cut(entry, "=")
	if !ok {
		return rule{}, "", errors.New("want point[@hit]=action")
	}
	name, hitText, hasHit := strings.Cut(strings.TrimSpace(lhs), "@")
	r := rule{hit: 1, source: entry}
	if hasHit {
		n, err := strconv.ParseInt(hitText, 10, 64)
		if err != nil || n < 1 {
			return rule{}, "", fmt.Errorf("hit %q is not a positive integer", hitText)
		}
		r.hit = n
	}
	verb, arg, _ := strings.Cut(strings.TrimSpace(act), ":")
	switch verb {
	case "kill":
		r.act = actKill
	case "hang":
		r.act = actHang
	case "error":
		r.act = actError
	case "exit":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 || n > 255 {
			return rule{}, "", fmt.Errorf("exit status %q is not an integer in 0..255", arg)
		}
		r.act, r.code = actExit, n
	case "delay":
		d, err := time.ParseDuration(arg)
		if err != nil || d < 0 {
			return rule{}, "", fmt.Errorf("delay %q is not a non-negative Go duration", arg)
		}
		r.act, r.delay = actDelay, d
	case "pause":
		if arg == "" {
			return rule{}, "", errors.New("pause needs a file: pause:FILE")
		}
		r.act, r.file = actPause, arg
	default:
		return rule{}, "", fmt.Errorf("unknown action %q (kill, exit:N, hang, error, delay:D, pause:FILE)", verb)
	}
	return r, strings.TrimSpace(name), nil
}

// Armed reports whether any point is armed.
func (s *Set) Armed() bool { return s != nil && s.armed.Load() }

// Hit passes the fault point name. When a rule for this pass is armed it
// carries out its action: it may never return (kill, exit, hang), return
// after a delay or a rendezvous, or return an error wrapping ErrInjected.
// A delay or pause ended by ctx returns ctx.Err().
func (s *Set) Hit(ctx context.Context, name string) error {
	if s == nil || !s.armed.Load() {
		return nil
	}
	p := s.points[name]
	if p == nil {
		return nil
	}
	n := p.passes.Add(1)
	for _, r := range p.rules {
		if r.hit == n {
			return s.fire(ctx, name, n, r)
		}
	}
	return nil
}

// Passes returns how many times name has been passed while armed.
func (s *Set) Passes(name string) int64 {
	if s == nil || s.points[name] == nil {
		return 0
	}
	return s.points[name].passes.Load()
}

// ArmedNames returns the armed point names, sorted.
func (s *Set) ArmedNames() []string {
	if s == nil {
		return nil
	}
	var out []string
	for n := range s.points {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func (s *Set) logf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.log, format+"\n", args...)
}

func (s *Set) fire(ctx context.Context, name string, n int64, r rule) error {
	switch r.act {
	case actKill:
		s.logf("faultpoint: %s hit %d: kill", name, n)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case actExit:
		s.logf("faultpoint: %s hit %d: exit %d", name, n, r.code)
		os.Exit(r.code)
	case actHang:
		s.logf("faultpoint: %s hit %d: hang", name, n)
		select {}
	case actError:
		s.logf("faultpoint: %s hit %d: error", name, n)
		return fmt.Errorf("fault point %s: %w", name, ErrInjected)
	case actDelay:
		s.logf("faultpoint: %s hit %d: delay %s", name, n, r.delay)
		return clock.Sleep(ctx, s.clk, r.delay)
	case actPause:
		s.logf("faultpoint: %s hit %d: pause until %s exists", name, n, r.file)
		arrived := fmt.Sprintf("%s.arrived-%d", r.file, os.Getpid())
		if f, err := os.Create(arrived); err == nil {
			f.Close()
		}
		err := clock.PollReal(ctx, 2*time.Millisecond, func() bool {
			_, err := os.Stat(r.file)
			return err == nil
		})
		os.Remove(arrived)
		if err == nil {
			s.logf("faultpoint: %s hit %d: resumed", name, n)
		}
		return err
	}
	return nil
}
