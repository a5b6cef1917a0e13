package faultpoint_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald/internal/clock"
	"herald/internal/faultpoint"
)

func TestParseRejectsBadEntriesWithTheirReason(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"nope.point=kill", `unknown fault point "nope.point"`},
		{"outbox.sent", "want point[@hit]=action"},
		{"outbox.sent@0=kill", `hit "0" is not a positive integer`},
		{"outbox.sent@x=kill", `hit "x" is not a positive integer`},
		{"outbox.sent=explode", `unknown action "explode"`},
		{"outbox.sent=exit:300", `exit status "300"`},
		{"outbox.sent=delay:soon", `delay "soon"`},
		{"outbox.sent=pause", "pause needs a file"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := faultpoint.Parse(tt.spec, clock.Real{}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse(%q) = %v, want an error containing %q", tt.spec, err, tt.want)
			}
		})
	}
}

func TestUnarmedSetDoesNothing(t *testing.T) {
	var nilSet *faultpoint.Set
	if err := nilSet.Hit(context.Background(), faultpoint.OutboxSent); err != nil {
		t.Fatal(err)
	}
	s, err := faultpoint.Parse(" ; ", clock.Real{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Armed() {
		t.Fatal("an empty spec armed something")
	}
}

func TestErrorFiresOnlyOnTheNamedHit(t *testing.T) {
	var log bytes.Buffer
	s, err := faultpoint.Parse("outbox.claimed@3=error", clock.Real{}, &log)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		err := s.Hit(context.Background(), faultpoint.OutboxClaimed)
		if (i == 3) != errors.Is(err, faultpoint.ErrInjected) {
			t.Fatalf("pass %d: Hit = %v", i, err)
		}
	}
	if err := s.Hit(context.Background(), faultpoint.OutboxSent); err != nil {
		t.Fatalf("an unarmed point returned %v", err)
	}
	if got := log.String(); got != "faultpoint: outbox.claimed hit 3: error\n" {
		t.Fatalf("fault log = %q", got)
	}
}

func TestDelayFollowsTheProcessClock(t *testing.T) {
	m := clock.NewManual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := faultpoint.Parse("outbox.sent=delay:1h", m, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Hit(context.Background(), faultpoint.OutboxSent) }()
	if err := m.WaitForTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	m.Advance(time.Hour)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestPauseIsARendezvousOnAFile(t *testing.T) {
	gate := filepath.Join(t.TempDir(), "gate")
	s, err := faultpoint.Parse("cron.claimed=pause:"+gate, clock.Real{}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Hit(context.Background(), faultpoint.CronClaimed) }()
	arrived := gate + ".arrived-" + strconv.Itoa(os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.PollReal(ctx, time.Millisecond, func() bool { _, err := os.Stat(arrived); return err == nil }); err != nil {
		t.Fatal("the paused point never announced its arrival")
	}
	select {
	case <-done:
		t.Fatal("pause returned before its file existed")
	default:
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestKillAndExitEndTheProcess runs this test binary as a child that hits an
// armed point, and checks how the child ended.
func TestKillAndExitEndTheProcess(t *testing.T) {
	if os.Getenv("FAULTPOINT_CHILD") != "" {
		s, err := faultpoint.Parse(os.Getenv(faultpoint.EnvFaults), clock.Real{}, nil)
		if err != nil {
			os.Exit(99)
		}
		_ = s.Hit(context.Background(), faultpoint.OutboxSent)
		os.Exit(0)
	}
	tests := []struct {
		spec   string
		signal syscall.Signal
		code   int
	}{
		{"outbox.sent=kill", syscall.SIGKILL, -1},
		{"outbox.sent=exit:7", 0, 7},
		{"outbox.sent@2=kill", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKillAndExitEndTheProcess$")
			cmd.Env = append(os.Environ(), "FAULTPOINT_CHILD=1", faultpoint.EnvFaults+"="+tt.spec)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			st := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tt.signal != 0 {
				if !st.Signaled() || st.Signal() != tt.signal {
					t.Fatalf("child ended with %v, want signal %v", err, tt.signal)
				}
				if !strings.Contains(stderr.String(), "faultpoint: outbox.sent hit 1: kill") {
					t.Fatalf("fault log missing; stderr = %q", stderr.String())
				}
				return
			}
			if st.ExitStatus() != tt.code {
				t.Fatalf("child exit = %d (%v), want %d; stderr = %q", st.ExitStatus(), err, tt.code, stderr.String())
			}
		})
	}
}
