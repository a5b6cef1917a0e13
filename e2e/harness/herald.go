package harness

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// ReadyLine is what `herald serve` prints once it serves (SPEC §7 contract
// of this repository: printed after the boot sweep).
var ReadyLine = regexp.MustCompile(`^herald: serving on (http://\S+)`)

// BootSweepLine is the structured log line of a finished boot sweep.
var BootSweepLine = regexp.MustCompile(`msg="boot sweep done" claimed=(\d+)`)

// Marker is the visible prefix herald puts on every copy that may repeat an
// earlier one (README, "Delivery guarantees").
const Marker = "[possible duplicate] "

// Herald is one data directory that herald processes run on, one after
// another or side by side.
type Herald struct {
	Bin  string
	Home string
	// Env is given to every process started (HERALD_HOME is added).
	Env []string
	n   int
}

// NewHerald prepares a herald on home.
func NewHerald(bins Binaries, home string, env ...string) *Herald {
	return &Herald{Bin: bins.Herald, Home: home, Env: env}
}

// Node is one running herald process.
type Node struct {
	*Proc
	URL string
}

// Start starts a herald process on the data directory (with extra env added
// for this process only) and waits for its ready line.
func (h *Herald) Start(tb testing.TB, extraEnv ...string) *Node {
	tb.Helper()
	n := h.StartNoWait(tb, extraEnv...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		tb.Fatal(err)
	}
	return n
}

// StartNoWait starts a herald process and returns at once.
func (h *Herald) StartNoWait(tb testing.TB, extraEnv ...string) *Node {
	tb.Helper()
	h.n++
	env := append([]string{"HERALD_HOME=" + h.Home, "HERALD_ADDR=127.0.0.1:0"}, h.Env...)
	env = append(env, extraEnv...)
	p := Start(tb, fmt.Sprintf("herald-%d", h.n), h.Home, h.Bin, env, "serve")
	return &Node{Proc: p}
}

// WaitReady waits for the ready line and records the node's URL.
func (n *Node) WaitReady(ctx context.Context) error {
	m, err := n.WaitLine(ctx, ReadyLine)
	if err != nil {
		return err
	}
	n.URL = m[1]
	return nil
}

// BootClaimed returns how many rows the node's boot sweep claimed.
func (n *Node) BootClaimed(ctx context.Context) (int, error) {
	m, err := n.WaitLine(ctx, BootSweepLine)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(m[1])
}

// Stop sends SIGTERM and waits for a clean exit (status 0).
func (n *Node) Stop(tb testing.TB) {
	tb.Helper()
	if err := n.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("SIGTERM %s: %v", n.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := n.Wait(ctx); err != nil {
		tb.Fatal(err)
	}
	if code := n.ExitCode(); code != 0 {
		tb.Fatalf("%s exited %d after SIGTERM, want 0; last lines:\n%s", n.Name, code, tail(n.Lines(), 20))
	}
}

// Message is a POST /v1/messages body.
type Message struct {
	Platform       string `json:"platform"`
	ChatID         string `json:"chat_id"`
	Text           string `json:"text"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// MessageView is the part of a message answer the suites read.
type MessageView struct {
	ID    int64  `json:"id"`
	State string `json:"state"`
	Parts []struct {
		State string `json:"state"`
	} `json:"parts"`
}

// Post sends m to the node and returns the answer and its status.
func (n *Node) Post(ctx context.Context, m Message) (MessageView, int, error) {
	var v MessageView
	status, err := JSON(ctx, http.MethodPost, n.URL+"/v1/messages", m, &v)
	return v, status, err
}
