package fakeplatform_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/fakeplatform"
)

const sendPath = "/telegram/chats/c1/messages"

// TestEveryFaultKindAsAClientSeesIt arms each fault kind once and checks what
// a real http.Client gets back and what the journal holds.
func TestEveryFaultKindAsAClientSeesIt(t *testing.T) {
	tests := []struct {
		name  string
		fault map[string]any
		// check runs with the fault armed; msg is the text it should send.
		check func(t *testing.T, e *env, msg string)
		// wantJournal is how many entries the journal holds afterwards.
		wantJournal int
	}{
		{
			name:  "timeout_before_accept holds until the client gives up and never accepts",
			fault: map[string]any{"kind": "timeout_before_accept"},
			check: func(t *testing.T, e *env, msg string) {
				ctx, cancel := context.WithCancel(context.Background())
				ch := e.async(ctx, http.MethodPost, sendPath, map[string]any{"text": msg})
				e.mustWaitHeld(1)
				wantNoReply(t, ch)
				cancel() // the client gives up
				r := mustReply(t, ch)
				wantConnError(t, r)
				waitFor(t, "the fake to notice the client left", func() bool { return e.srv.Stats().Held == 0 })
			},
		},
		{
			name:  "timeout_before_accept also ends when the client's own timeout fires",
			fault: map[string]any{"kind": "timeout_before_accept"},
			check: func(t *testing.T, e *env, msg string) {
				e.client.Timeout = 100 * time.Millisecond
				r := e.send("telegram", "c1", msg)
				wantConnError(t, r)
				waitFor(t, "the fake to notice the client left", func() bool { return e.srv.Stats().Held == 0 })
			},
		},
		{
			name:  "ack_lost accepts and journals, then breaks the connection",
			fault: map[string]any{"kind": "ack_lost"},
			check: func(t *testing.T, e *env, msg string) {
				wantConnError(t, e.send("telegram", "c1", msg))
				if got := e.texts("telegram", "c1"); len(got) != 1 || got[0] != msg {
					t.Fatalf("chat shows %q, want the message that lost its ack", got)
				}
			},
			wantJournal: 1,
		},
		{
			name:  "rate_limit answers 429 with the default retry_after of 1 s",
			fault: map[string]any{"kind": "rate_limit"},
			check: func(t *testing.T, e *env, msg string) {
				r := e.send("telegram", "c1", msg)
				wantStatus(t, r, http.StatusTooManyRequests, "Too Many Requests: retry after 1")
				if r.header.Get("Retry-After") != "1" || r.body["retry_after"] != 1.0 {
					t.Fatalf("Retry-After %q, body %s; want 1 and 1", r.header.Get("Retry-After"), r.raw)
				}
			},
		},
		{
			name:  "rate_limit with a fractional retry_after rounds the header up",
			fault: map[string]any{"kind": "rate_limit", "retry_after": 0.2},
			check: func(t *testing.T, e *env, msg string) {
				r := e.send("telegram", "c1", msg)
				wantStatus(t, r, http.StatusTooManyRequests, "Too Many Requests: retry after 1")
				if r.header.Get("Retry-After") != "1" || r.body["retry_after"] != 0.2 {
					t.Fatalf("Retry-After %q, body %s; want 1 and 0.2", r.header.Get("Retry-After"), r.raw)
				}
			},
		},
		{
			name:  "rate_limit of 2.5 s says Retry-After 3",
			fault: map[string]any{"kind": "rate_limit", "retry_after": 2.5},
			check: func(t *testing.T, e *env, msg string) {
				r := e.send("telegram", "c1", msg)
				wantStatus(t, r, http.StatusTooManyRequests, "Too Many Requests: retry after 3")
				if r.header.Get("Retry-After") != "3" || r.body["retry_after"] != 2.5 {
					t.Fatalf("Retry-After %q, body %s; want 3 and 2.5", r.header.Get("Retry-After"), r.raw)
				}
			},
		},
		{
			name:  "server_error answers 500 and accepts nothing",
			fault: map[string]any{"kind": "server_error"},
			check: func(t *testing.T, e *env, msg string) {
				wantStatus(t, e.send("telegram", "c1", msg), http.StatusInternalServerError, "Internal Server Error")
			},
		},
		{
			name:  "reset breaks the connection and accepts nothing",
			fault: map[string]any{"kind": "reset"},
			check: func(t *testing.T, e *env, msg string) {
				wantConnError(t, e.send("telegram", "c1", msg))
			},
		},
		{
			name:  "hold_before_accept accepts only when released",
			fault: map[string]any{"kind": "hold_before_accept"},
			check: func(t *testing.T, e *env, msg string) {
				ch := e.async(context.Background(), http.MethodPost, sendPath, map[string]any{"text": msg})
				e.mustWaitHeld(1)
				if n := len(e.entries()); n != 0 {
					t.Fatalf("journal holds %d entries while the request is held before accept", n)
				}
				wantNoReply(t, ch)
				if n := e.srv.Release(); n != 1 {
					t.Fatalf("Release = %d, want 1", n)
				}
				r := mustReply(t, ch)
				wantStatus(t, r, http.StatusOK, "")
				if r.body["message_id"] != "1" {
					t.Fatalf("answer %s, want message_id 1", r.raw)
				}
			},
			wantJournal: 1,
		},
		{
			name:  "hold_after_accept journals first and answers when released",
			fault: map[string]any{"kind": "hold_after_accept"},
			check: func(t *testing.T, e *env, msg string) {
				ch := e.async(context.Background(), http.MethodPost, sendPath, map[string]any{"text": msg})
				e.mustWaitHeld(1)
				if es := e.entries(); len(es) != 1 || es[0].Text != msg {
					t.Fatalf("journal = %+v while the answer is held, want the message", es)
				}
				wantNoReply(t, ch)
				e.srv.Release()
				wantStatus(t, mustReply(t, ch), http.StatusOK, "")
			},
			wantJournal: 1,
		},
		{
			name:  "over_length rejects a short text as too long",
			fault: map[string]any{"kind": "over_length"},
			check: func(t *testing.T, e *env, msg string) {
				wantStatus(t, e.send("telegram", "c1", msg), http.StatusBadRequest, "Bad Request: message is too long")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fakeplatform.Config{})
			e.mustFault(tt.fault)
			tt.check(t, e, "hello")
			if n := len(e.entries()); n != tt.wantJournal {
				t.Fatalf("journal holds %d entries, want %d", n, tt.wantJournal)
			}
			kind := fakeplatform.FaultKind(tt.fault["kind"].(string))
			st := e.srv.Stats()
			if st.FaultsFired[kind] != 1 || st.Accepted[fakeplatform.OpSend] != int64(tt.wantJournal) {
				t.Fatalf("stats = %+v, want 1 %s fired and %d sends accepted", st, kind, tt.wantJournal)
			}
			if f := e.srv.Faults(); len(f) != 0 {
				t.Fatalf("fault still armed after its one use: %+v", f)
			}
			// The fault is used up: the next send goes through untouched.
			e.client.Timeout = 0
			wantStatus(t, e.send("telegram", "c1", "after"), http.StatusOK, "")
		})
	}
}

// TestHeldRequestsLandAfterTheClientGaveUp shows the two holds that accept
// even when nobody is listening any more: the platform was slow, not down.
func TestHeldRequestsLandAfterTheClientGaveUp(t *testing.T) {
	for _, kind := range []string{"hold_before_accept", "hold_after_accept"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, fakeplatform.Config{})
			e.mustFault(map[string]any{"kind": kind})
			ctx, cancel := context.WithCancel(context.Background())
			ch := e.async(ctx, http.MethodPost, sendPath, map[string]any{"text": "slow"})
			e.mustWaitHeld(1)
			cancel()
			wantConnError(t, mustReply(t, ch))
			if e.srv.Stats().Held != 1 {
				t.Fatal("the hold ended when the client left; it should wait for release")
			}
			e.srv.Release()
			waitFor(t, "the held send to be journalled", func() bool {
				return e.srv.Stats().Accepted[fakeplatform.OpSend] == 1
			})
			if got := e.texts("telegram", "c1"); len(got) != 1 || got[0] != "slow" {
				t.Fatalf("chat shows %q, want the slow message", got)
			}
		})
	}
}

// TestHoldsEndByDuration arms holds with a duration over the control API and
// checks the answer comes, without a release, no earlier than the hold.
func TestHoldsEndByDuration(t *testing.T) {
	const hold = 80 * time.Millisecond
	for _, kind := range []string{"hold_before_accept", "hold_after_accept"} {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, fakeplatform.Config{})
			e.mustFault(map[string]any{"kind": kind, "hold": hold.String()})
			start := time.Now()
			r := e.send("telegram", "c1", "later")
			elapsed := time.Since(start)
			wantStatus(t, r, http.StatusOK, "")
			if elapsed < hold {
				t.Fatalf("answered after %v, before the %v hold ended", elapsed, hold)
			}
			if n := len(e.entries()); n != 1 {
				t.Fatalf("journal holds %d entries, want 1", n)
			}
		})
	}
}

// TestReleaseOverHTTP holds one request of each holding kind and releases
// them all with POST /control/release.
func TestReleaseOverHTTP(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	e.mustFault(map[string]any{"kind": "hold_before_accept", "chat_id": "a"})
	e.mustFault(map[string]any{"kind": "hold_after_accept", "chat_id": "b"})
	e.mustFault(map[string]any{"kind": "timeout_before_accept", "chat_id": "c"})
	ctx := context.Background()
	ra := e.async(ctx, http.MethodPost, "/telegram/chats/a/messages", map[string]any{"text": "A"})
	rb := e.async(ctx, http.MethodPost, "/telegram/chats/b/messages", map[string]any{"text": "B"})
	rc := e.async(ctx, http.MethodPost, "/telegram/chats/c/messages", map[string]any{"text": "C"})
	e.mustWaitHeld(3)
	stats := e.do(ctx, http.MethodGet, "/control/stats", nil)
	if stats.body["held"] != 3.0 {
		t.Fatalf("stats = %s, want held 3", stats.raw)
	}
	rel := e.do(ctx, http.MethodPost, "/control/release", nil)
	wantStatus(t, rel, http.StatusOK, "")
	if rel.body["released"] != 3.0 {
		t.Fatalf("release answered %s, want released 3", rel.raw)
	}
	wantStatus(t, mustReply(t, ra), http.StatusOK, "")
	wantStatus(t, mustReply(t, rb), http.StatusOK, "")
	wantConnError(t, mustReply(t, rc)) // released, still never answered
	var chats []string
	for _, en := range e.entries() {
		chats = append(chats, en.ChatID)
	}
	if len(chats) != 2 || chats[0] == "c" || chats[1] == "c" {
		t.Fatalf("journal chats = %q, want a and b only", chats)
	}
	if n := e.do(ctx, http.MethodPost, "/control/release", nil); n.body["released"] != 0.0 {
		t.Fatalf("second release answered %s, want released 0", n.raw)
	}
}

// TestCloseReleasesHolds checks that Close lets a held send land and answer
// before the journal closes, and that later requests get 503.
func TestCloseReleasesHolds(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	e.mustFault(map[string]any{"kind": "hold_before_accept"})
	ch := e.async(context.Background(), http.MethodPost, sendPath, map[string]any{"text": "held"})
	e.mustWaitHeld(1)
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, mustReply(t, ch), http.StatusOK, "")
	if es := e.entries(); len(es) != 1 || es[0].Text != "held" {
		t.Fatalf("journal = %+v, want the held send", es)
	}
	wantStatus(t, e.send("telegram", "c1", "late"), http.StatusServiceUnavailable, "Service Unavailable: server is shutting down")
}

// step is one operation of a fault-matching scenario and what it must get.
type step struct {
	op, profile, chat string
	want              int // HTTP status; 0 means the connection breaks
}

// TestFaultMatching checks that faults pick operations by op, chat, profile
// and count, and that the oldest armed matching fault fires first.
func TestFaultMatching(t *testing.T) {
	tests := []struct {
		name   string
		faults []map[string]any
		steps  []step
	}{
		{
			name:   "a count of 2 affects exactly the next two operations",
			faults: []map[string]any{{"kind": "rate_limit", "count": 2}},
			steps:  []step{{"send", "telegram", "c1", 429}, {"send", "telegram", "c1", 429}, {"send", "telegram", "c1", 200}},
		},
		{
			name:   "a chat fault leaves other chats alone",
			faults: []map[string]any{{"kind": "server_error", "chat_id": "c2"}},
			steps:  []step{{"send", "telegram", "c1", 200}, {"send", "telegram", "c2", 500}, {"send", "telegram", "c2", 200}},
		},
		{
			name:   "an edit fault lets sends and deletes through",
			faults: []map[string]any{{"kind": "over_length", "op": "edit"}},
			steps:  []step{{"send", "telegram", "c1", 200}, {"edit", "telegram", "c1", 400}, {"edit", "telegram", "c1", 200}},
		},
		{
			name:   "a delete fault fires on the delete only",
			faults: []map[string]any{{"kind": "reset", "op": "delete"}},
			steps:  []step{{"send", "telegram", "c1", 200}, {"edit", "telegram", "c1", 200}, {"delete", "telegram", "c1", 0}, {"delete", "telegram", "c1", 200}},
		},
		{
			name:   "an any-op fault fires on whatever comes first",
			faults: []map[string]any{{"kind": "server_error", "op": "", "count": 2}},
			steps:  []step{{"send", "telegram", "c1", 500}, {"send", "telegram", "c1", 500}, {"send", "telegram", "c1", 200}},
		},
		{
			name: "the oldest matching fault fires first",
			faults: []map[string]any{
				{"kind": "rate_limit"},
				{"kind": "server_error", "chat_id": "c1"},
			},
			steps: []step{{"send", "telegram", "c1", 429}, {"send", "telegram", "c1", 500}, {"send", "telegram", "c1", 200}},
		},
		{
			name: "an older fault for another chat does not block a newer one",
			faults: []map[string]any{
				{"kind": "server_error", "chat_id": "c2"},
				{"kind": "rate_limit"},
			},
			steps: []step{{"send", "telegram", "c1", 429}, {"send", "telegram", "c2", 500}, {"send", "telegram", "c2", 200}},
		},
		{
			name:   "a profile fault fires on that profile only",
			faults: []map[string]any{{"kind": "rate_limit", "profile": "discord"}},
			steps:  []step{{"send", "telegram", "c1", 200}, {"send", "slack", "c1", 200}, {"send", "discord", "c1", 429}, {"send", "discord", "c1", 200}},
		},
		{
			name: "an ack_lost fault on one chat of two",
			faults: []map[string]any{
				{"kind": "ack_lost", "chat_id": "c2", "op": "send", "count": 2},
			},
			steps: []step{{"send", "telegram", "c2", 0}, {"send", "telegram", "c1", 200}, {"send", "telegram", "c2", 0}, {"send", "telegram", "c2", 200}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fakeplatform.Config{})
			for _, f := range tt.faults {
				e.mustFault(f)
			}
			last := map[string]string{} // chat → last message id sent
			for i, s := range tt.steps {
				var r reply
				switch s.op {
				case "send":
					r = e.send(s.profile, s.chat, fmt.Sprintf("text %d", i))
					if r.err == nil && r.status == http.StatusOK {
						last[s.profile+"/"+s.chat] = r.body["message_id"].(string)
					}
				case "edit":
					r = e.edit(s.profile, s.chat, last[s.profile+"/"+s.chat], fmt.Sprintf("edit %d", i))
				case "delete":
					r = e.del(s.profile, s.chat, last[s.profile+"/"+s.chat])
				}
				if s.want == 0 {
					if r.err == nil {
						t.Fatalf("step %d (%s %s %s): got %d %s, want a broken connection", i, s.op, s.profile, s.chat, r.status, r.raw)
					}
					continue
				}
				if r.err != nil || r.status != s.want {
					t.Fatalf("step %d (%s %s %s): got %v (status %d), want %d", i, s.op, s.profile, s.chat, r, r.status, s.want)
				}
			}
			if f := e.srv.Faults(); len(f) != 0 {
				t.Fatalf("faults left armed: %+v", f)
			}
		})
	}
}

// TestControlAPIListsAndClearsFaults checks GET and DELETE /control/faults
// and the remaining count as a fault is used.
func TestControlAPIListsAndClearsFaults(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	ctx := context.Background()
	id1 := e.mustFault(map[string]any{"kind": "rate_limit", "count": 3, "retry_after": 0.5, "chat_id": "c1"})
	id2 := e.mustFault(map[string]any{"kind": "hold_after_accept", "op": "edit", "hold": "250ms"})
	if id1 != 1 || id2 != 2 {
		t.Fatalf("ids = %d, %d, want 1, 2", id1, id2)
	}
	wantStatus(t, e.send("telegram", "c1", "x"), http.StatusTooManyRequests, "")
	r := e.do(ctx, http.MethodGet, "/control/faults", nil)
	want := `{"faults":[` +
		`{"id":1,"op":"","chat_id":"c1","kind":"rate_limit","count":3,"retry_after":0.5,"remaining":2},` +
		`{"id":2,"op":"edit","chat_id":"","kind":"hold_after_accept","count":1,"hold":"250ms","remaining":1}]}`
	if r.raw != want {
		t.Fatalf("GET /control/faults =\n%s\nwant\n%s", r.raw, want)
	}
	c := e.do(ctx, http.MethodDelete, "/control/faults", nil)
	if c.status != http.StatusOK || c.body["cleared"] != 2.0 {
		t.Fatalf("DELETE /control/faults = %d %s, want cleared 2", c.status, c.raw)
	}
	wantStatus(t, e.send("telegram", "c1", "x"), http.StatusOK, "")
	if r := e.do(ctx, http.MethodGet, "/control/faults", nil); r.raw != `{"faults":[]}` {
		t.Fatalf("after clear: %s", r.raw)
	}
	st := e.do(ctx, http.MethodGet, "/control/stats", nil)
	want = `{"accepted":{"delete":0,"edit":0,"send":1},"deduplicated":0,` +
		`"faults_fired":{"ack_lost":0,"hold_after_accept":0,"hold_before_accept":0,"over_length":0,"rate_limit":1,"reset":0,"server_error":0,"timeout_before_accept":0},` +
		`"held":0,"journal_seq":1}`
	if st.raw != want {
		t.Fatalf("GET /control/stats =\n%s\nwant\n%s", st.raw, want)
	}
	if h := e.do(ctx, http.MethodGet, "/healthz", nil); h.status != http.StatusOK || h.raw != `{"ok":true}` {
		t.Fatalf("GET /healthz = %d %s", h.status, h.raw)
	}
}

// TestControlAPIRejectsBadFaults checks that a fault the fake cannot arm is
// a 400 and arms nothing.
func TestControlAPIRejectsBadFaults(t *testing.T) {
	tests := []struct {
		name string
		body any
	}{
		{"an unknown kind", map[string]any{"kind": "explode"}},
		{"a missing kind", map[string]any{"op": "send"}},
		{"an unknown op", map[string]any{"kind": "reset", "op": "react"}},
		{"a negative count", map[string]any{"kind": "reset", "count": -1}},
		{"a negative retry_after", map[string]any{"kind": "rate_limit", "retry_after": -1}},
		{"a hold that is not a duration", map[string]any{"kind": "hold_before_accept", "hold": "soon"}},
		{"a negative hold", map[string]any{"kind": "hold_before_accept", "hold": "-1s"}},
		{"an unknown profile", map[string]any{"kind": "reset", "profile": "irc"}},
		{"a misspelt field", map[string]any{"kind": "reset", "chat": "c1"}},
		{"a body that is not an object", "reset"},
	}
	e := newEnv(t, fakeplatform.Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(context.Background(), http.MethodPost, "/control/faults", tt.body)
			wantStatus(t, r, http.StatusBadRequest, "")
			if r.body["ok"] != false || r.body["error_code"] != 400.0 {
				t.Fatalf("answer %s, want the error JSON", r.raw)
			}
		})
	}
	if f := e.srv.Faults(); len(f) != 0 {
		t.Fatalf("bad faults were armed: %+v", f)
	}
}

// TestAddFaultInProcess checks the Go API fills defaults.
func TestAddFaultInProcess(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	id, err := e.srv.AddFault(fakeplatform.Fault{Kind: fakeplatform.FaultRateLimit})
	if err != nil {
		t.Fatal(err)
	}
	got := e.srv.Faults()
	want := fakeplatform.ArmedFault{ID: id, Fault: fakeplatform.Fault{Kind: fakeplatform.FaultRateLimit, Count: 1, RetryAfter: 1}, Remaining: 1}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("Faults = %+v, want [%+v]", got, want)
	}
	if n := e.srv.ClearFaults(); n != 1 {
		t.Fatalf("ClearFaults = %d, want 1", n)
	}
}

// TestAckLostOnAReusedConnection pins a trap for adapter authors: with
// keep-alive, Go's http.Transport resends a request that failed on a reused
// connection when it believes the request idempotent — and an
// Idempotency-Key header makes a POST look idempotent. Without the header
// the client sees the broken connection; with it the transport silently
// sends a second copy and reports success.
func TestAckLostOnAReusedConnection(t *testing.T) {
	tests := []struct {
		name        string
		header      bool
		wantErr     bool
		wantJournal int
	}{
		{"a plain POST surfaces the lost ack", false, true, 2},
		{"a POST with an Idempotency-Key header is resent by the transport", true, false, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fakeplatform.Config{})
			// Keep-alive on, and one connection only, so the second request
			// surely reuses the first one's connection.
			client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
			t.Cleanup(client.CloseIdleConnections)
			post := func(text string) (*http.Response, error) {
				req, err := http.NewRequest(http.MethodPost, e.url+sendPath, strings.NewReader(`{"text":"`+text+`"}`))
				if err != nil {
					t.Fatal(err)
				}
				if tt.header {
					req.Header.Set("Idempotency-Key", "k-"+text)
				}
				return client.Do(req)
			}
			resp, err := post("warm") // opens the connection the next request reuses
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			e.mustFault(map[string]any{"kind": "ack_lost"})
			resp, err = post("lost")
			if err == nil {
				resp.Body.Close()
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("client error = %v, want error: %v", err, tt.wantErr)
			}
			if n := len(e.entries()); n != tt.wantJournal {
				t.Fatalf("journal holds %d entries, want %d", n, tt.wantJournal)
			}
		})
	}
}
