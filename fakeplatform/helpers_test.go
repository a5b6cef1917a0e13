package fakeplatform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/internal/clock"
)

// t0 is where the Manual clocks of these tests start.
var t0 = time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)

// waitTimeout bounds every wait on a condition.
const waitTimeout = 10 * time.Second

// env is one fake platform behind a real HTTP server, with its journal in a
// temporary directory.
type env struct {
	t       *testing.T
	srv     *fakeplatform.Server
	ts      *httptest.Server
	url     string
	journal string
	clock   *clock.Manual
	client  *http.Client
}

// newEnv starts a fake on a Manual clock at t0. cfg may set DedupWindow or
// JournalPath; the rest is filled in.
func newEnv(t *testing.T, cfg fakeplatform.Config) *env {
	t.Helper()
	if cfg.JournalPath == "" {
		cfg.JournalPath = filepath.Join(t.TempDir(), "journal.jsonl")
	}
	m := clock.NewManual(t0)
	if cfg.Clock == nil {
		cfg.Clock = m
	}
	srv, err := fakeplatform.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	// Cleanups run last-in first-out: the fake releases its held requests
	// before the HTTP server waits for them.
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	// No keep-alive: every request has its own connection, so a connection
	// a fault breaks never affects the next request.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(client.CloseIdleConnections)
	return &env{t: t, srv: srv, ts: ts, url: ts.URL, journal: cfg.JournalPath, clock: m, client: client}
}

// reply is what a client saw: a response, or an error instead of one.
type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
	err    error
}

func (r reply) String() string {
	if r.err != nil {
		return "error: " + r.err.Error()
	}
	return r.raw
}

// do sends one request with a JSON body (nil for none). It never fails the
// test, so it may run on any goroutine.
func (e *env) do(ctx context.Context, method, path string, body any) reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{err: fmt.Errorf("encode body: %w", err)}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		return reply{err: fmt.Errorf("new request: %w", err)}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return reply{status: resp.StatusCode, err: err}
	}
	r := reply{status: resp.StatusCode, header: resp.Header, raw: strings.TrimSpace(string(raw))}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		r.err = fmt.Errorf("%s %s: answer is not JSON: %q", method, path, raw)
	}
	return r
}

// async sends a request in the background; the reply arrives on the channel.
func (e *env) async(ctx context.Context, method, path string, body any) <-chan reply {
	ch := make(chan reply, 1)
	go func() { ch <- e.do(ctx, method, path, body) }()
	return ch
}

func (e *env) send(profile, chat, text string) reply {
	return e.do(context.Background(), http.MethodPost, "/"+profile+"/chats/"+chat+"/messages", map[string]any{"text": text})
}

func (e *env) sendKey(profile, chat, text, key string) reply {
	return e.do(context.Background(), http.MethodPost, "/"+profile+"/chats/"+chat+"/messages",
		map[string]any{"text": text, "idempotency_key": key})
}

func (e *env) edit(profile, chat, id, text string) reply {
	return e.do(context.Background(), http.MethodPatch, "/"+profile+"/chats/"+chat+"/messages/"+id, map[string]any{"text": text})
}

func (e *env) del(profile, chat, id string) reply {
	return e.do(context.Background(), http.MethodDelete, "/"+profile+"/chats/"+chat+"/messages/"+id, nil)
}

// list returns the chat's messages as GET shows them.
func (e *env) list(profile, chat string) []fakeplatform.Message {
	e.t.Helper()
	resp, err := e.client.Get(e.url + "/" + profile + "/chats/" + chat + "/messages")
	if err != nil {
		e.t.Fatalf("list: %v", err)
	}
	defer resp.Body.Close()
	var out struct {
		OK       bool                   `json:"ok"`
		Messages []fakeplatform.Message `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || !out.OK {
		e.t.Fatalf("list: status %d, err %v", resp.StatusCode, err)
	}
	return out.Messages
}

// texts returns the texts of a chat as GET shows them.
func (e *env) texts(profile, chat string) []string {
	e.t.Helper()
	out := []string{}
	for _, m := range e.list(profile, chat) {
		out = append(out, m.Text)
	}
	return out
}

// entries reads the journal.
func (e *env) entries() []fakeplatform.Entry {
	e.t.Helper()
	es, err := fakeplatform.ReadJournal(e.journal)
	if err != nil {
		e.t.Fatalf("ReadJournal: %v", err)
	}
	return es
}

// mustFault arms a fault over the control API.
func (e *env) mustFault(f map[string]any) int64 {
	e.t.Helper()
	r := e.do(context.Background(), http.MethodPost, "/control/faults", f)
	if r.err != nil || r.status != http.StatusCreated {
		e.t.Fatalf("arm fault %v: %v (status %d)", f, r, r.status)
	}
	return int64(r.body["id"].(float64))
}

// mustWaitHeld waits until n requests are held by faults.
func (e *env) mustWaitHeld(n int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.srv.WaitHeld(ctx, n); err != nil {
		e.t.Fatal(err)
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := clock.PollReal(ctx, time.Millisecond, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// mustReply waits for a reply from async.
func mustReply(t *testing.T, ch <-chan reply) reply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("no reply within the deadline")
		return reply{}
	}
}

// wantNoReply checks that no reply has arrived yet.
func wantNoReply(t *testing.T, ch <-chan reply) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("got a reply while the request should be held: %v", r)
	default:
	}
}

// wantStatus checks a reply's status and, if desc is not empty, that it is
// the platform's error JSON with that description.
func wantStatus(t *testing.T, r reply, status int, desc string) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("want status %d, got %v", status, r.err)
	}
	if r.status != status {
		t.Fatalf("status = %d, want %d (%s)", r.status, status, r.raw)
	}
	if desc == "" {
		return
	}
	if r.body["ok"] != false || r.body["error_code"] != float64(status) || r.body["description"] != desc {
		t.Fatalf("answer = %s, want {\"ok\":false,\"error_code\":%d,\"description\":%q}", r.raw, status, desc)
	}
}

// wantConnError checks that the client saw no answer at all.
func wantConnError(t *testing.T, r reply) {
	t.Helper()
	if r.err == nil {
		t.Fatalf("want a broken connection, got status %d: %s", r.status, r.raw)
	}
}
