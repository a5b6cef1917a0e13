package fakeplatform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/internal/clock"
)

// hookSecret is the secret of these tests' receivers: "whsec_" and the
// base64 of hookKey.
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var hookKey = mustHookKey(hookSecret)

func mustHookKey(secret string) []byte {
	k, err := fakeplatform.WebhookKey(secret)
	if err != nil {
		panic(err)
	}
	return k
}

// delivery is one webhook POST as a sender builds it; the zero value of a
// field means "as herald would send it".
type delivery struct {
	receiver   string // default "r1"
	id         string // webhook-id; default "msg_1"
	ts         string // webhook-timestamp; default the env's clock
	body       []byte // default a message.created payload of chat, text, redelivery
	chat, text string
	redelivery bool
	// sig replaces the signature header ("-" sends none); default signed
	// with key (default hookKey).
	sig string
	key []byte
	// header sets extra headers after signing ("-" as a value deletes).
	header map[string]string
}

func heraldPayload(chat, text string, redelivery bool) []byte {
	b, err := json.Marshal(map[string]any{
		"type": "message.created",
		"data": map[string]any{"chat_id": chat, "text": text, "part": 0, "parts": 1, "redelivery": redelivery, "obligation_id": 42},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// hook POSTs d to the env's webhook receiver.
func (e *env) hook(ctx context.Context, d delivery) reply {
	if d.receiver == "" {
		d.receiver = "r1"
	}
	if d.id == "" {
		d.id = "msg_1"
	}
	if d.ts == "" {
		d.ts = strconv.FormatInt(e.clock.Now().Unix(), 10)
	}
	if d.chat == "" {
		d.chat = "c1"
	}
	if d.text == "" {
		d.text = "hello ✉️"
	}
	if d.body == nil {
		d.body = heraldPayload(d.chat, d.text, d.redelivery)
	}
	if d.key == nil {
		d.key = hookKey
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/webhook/"+d.receiver, bytes.NewReader(d.body))
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(fakeplatform.HeaderWebhookID, d.id)
	req.Header.Set(fakeplatform.HeaderWebhookTimestamp, d.ts)
	req.Header.Set(fakeplatform.HeaderRedelivery, strconv.FormatBool(d.redelivery))
	switch d.sig {
	case "":
		req.Header.Set(fakeplatform.HeaderWebhookSignature, fakeplatform.SignWebhook(d.key, d.id, d.ts, d.body))
	case "-":
	default:
		req.Header.Set(fakeplatform.HeaderWebhookSignature, d.sig)
	}
	for k, v := range d.header {
		if v == "-" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
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
		r.err = fmt.Errorf("webhook: answer is not JSON: %q", raw)
	}
	return r
}

func newHookEnv(t *testing.T, cfg fakeplatform.Config) *env {
	t.Helper()
	if cfg.WebhookSecret == "" {
		cfg.WebhookSecret = hookSecret
	}
	return newEnv(t, cfg)
}

// TestWebhookSignatureMatchesTheStandardWebhooksVector checks SignWebhook
// against the test vector the Standard Webhooks reference libraries share,
// and that the receiver verifies it: the vector's payload is no
// message.created event, so a verified delivery is refused with 400 for its
// type — past the 401 of a bad signature and the 400 of a stale timestamp.
func TestWebhookSignatureMatchesTheStandardWebhooksVector(t *testing.T) {
	const (
		id   = "msg_p5jXN8AQM9LWM0D4loKWxJek"
		ts   = "1614265330"
		body = `{"test": 2432232314}`
		want = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	)
	if got := fakeplatform.SignWebhook(hookKey, id, ts, []byte(body)); got != want {
		t.Fatalf("SignWebhook = %s, want %s", got, want)
	}
	e := newHookEnv(t, fakeplatform.Config{})
	e.clock.Set(time.Unix(1614265330, 0).Add(time.Minute))
	d := delivery{id: id, ts: ts, body: []byte(body), sig: "v1,bm9wZQ== " + want}
	wantStatus(t, e.hook(context.Background(), d), http.StatusBadRequest,
		`Bad Request: unsupported event type "" (want message.created)`)
	d.body = []byte(`{"test": 2432232315}`)
	wantStatus(t, e.hook(context.Background(), d), http.StatusUnauthorized, "Unauthorized: no matching webhook signature")
	if n := len(e.entries()); n != 0 {
		t.Fatalf("journal holds %d entries, want none", n)
	}
}

// TestWebhookReceiverJournalsAndDeduplicates delivers one webhook, its
// retries (marked, with the same webhook-id) and the same id to another
// receiver, restarts the fake and delivers again.
func TestWebhookReceiverJournalsAndDeduplicates(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "journal.jsonl")
	e := newHookEnv(t, fakeplatform.Config{JournalPath: journal})
	ctx := context.Background()

	r := e.hook(ctx, delivery{id: "hk1", chat: "room/1", text: "hello ✉️ مرحبا"})
	wantStatus(t, r, http.StatusOK, "")
	if r.raw != `{"id":"1"}` {
		t.Fatalf("answer = %s, want {\"id\":\"1\"}", r.raw)
	}
	want := fakeplatform.Entry{Seq: 1, Op: fakeplatform.OpSend, ChatID: "room/1", MessageID: "1", Text: "hello ✉️ مرحبا",
		IdempotencyKey: "hk1", At: t0, Profile: fakeplatform.ProfileWebhook, Receiver: "r1"}
	if got := e.entries(); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("journal = %+v, want [%+v]", got, want)
	}

	// The retry after a lost answer: marked, a later timestamp, same id.
	e.clock.Advance(90 * time.Second)
	r = e.hook(ctx, delivery{id: "hk1", chat: "room/1", text: "[possible duplicate] hello ✉️ مرحبا", redelivery: true})
	wantStatus(t, r, http.StatusOK, "")
	if r.raw != `{"id":"1","deduplicated":true}` {
		t.Fatalf("repeat answer = %s, want the first id, deduplicated", r.raw)
	}
	// Another receiver keeps its own ids; a new id is a new message.
	wantStatus(t, e.hook(ctx, delivery{receiver: "r2", id: "hk1", chat: "room/1", text: "to r2"}), http.StatusOK, "")
	wantStatus(t, e.hook(ctx, delivery{id: "hk2", chat: "room/1", text: "second", redelivery: true}), http.StatusOK, "")

	got := e.entries()
	if len(got) != 3 || got[1].Receiver != "r2" || got[2].IdempotencyKey != "hk2" || !got[2].Redelivery {
		t.Fatalf("journal = %+v, want hk1@r1, hk1@r2, hk2@r1 (marked)", got)
	}
	if st := e.srv.Stats(); st.Deduplicated != 1 || st.Accepted[fakeplatform.OpSend] != 3 {
		t.Fatalf("stats = %+v, want 1 deduplicated, 3 accepted", st)
	}
	if msgs := e.srv.Messages(fakeplatform.ProfileWebhook, "room/1"); len(msgs) != 3 || msgs[0].IdempotencyKey != "hk1" {
		t.Fatalf("Messages = %+v", msgs)
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}

	// A restarted receiver still knows every id it took.
	e2 := newHookEnv(t, fakeplatform.Config{JournalPath: journal})
	for _, d := range []delivery{{id: "hk1", text: "again"}, {receiver: "r2", id: "hk1", text: "again"}, {id: "hk2", text: "again"}} {
		r := e2.hook(ctx, d)
		wantStatus(t, r, http.StatusOK, "")
		if r.body["deduplicated"] != true {
			t.Fatalf("after a restart, %s@%s was journalled again: %s", d.id, d.receiver, r.raw)
		}
	}
	wantStatus(t, e2.hook(ctx, delivery{id: "hk3"}), http.StatusOK, "")
	if got := e2.entries(); len(got) != 4 || got[3].MessageID != "4" {
		t.Fatalf("journal after restart = %+v, want one new entry with id 4", got)
	}
}

// TestWebhookReceiverRefuses checks every delivery a careful receiver turns
// away, and that none of them is journalled or consumes a fault.
func TestWebhookReceiverRefuses(t *testing.T) {
	now := strconv.FormatInt(t0.Unix(), 10)
	tests := []struct {
		name   string
		d      delivery
		status int
		desc   string
		// payload: a problem of the payload, found after the faults (as for
		// the chat API); the others are the receiver's authentication and
		// parsing, which no fault precedes.
		payload bool
	}{
		{"no signature", delivery{sig: "-"}, 401, "Unauthorized: missing webhook-signature header", false},
		{"signed with another secret", delivery{key: []byte("not the key")}, 401, "Unauthorized: no matching webhook signature", false},
		{"a signature of another body", delivery{sig: fakeplatform.SignWebhook(hookKey, "msg_1", now, []byte("{}"))}, 401, "Unauthorized: no matching webhook signature", false},
		{"a signature of another id", delivery{sig: fakeplatform.SignWebhook(hookKey, "msg_2", now, heraldPayload("c1", "hello ✉️", false))}, 401, "Unauthorized: no matching webhook signature", false},
		{"a v2 signature only", delivery{sig: "v2," + strings.TrimPrefix(fakeplatform.SignWebhook(hookKey, "msg_1", now, heraldPayload("c1", "hello ✉️", false)), "v1,")}, 401, "Unauthorized: no matching webhook signature", false},
		{"garbage signatures", delivery{sig: "v1,!!! v1, ,"}, 401, "Unauthorized: no matching webhook signature", false},
		{"no webhook-id", delivery{header: map[string]string{"webhook-id": "-"}}, 400, "Bad Request: missing webhook-id header", false},
		{"no webhook-timestamp", delivery{header: map[string]string{"webhook-timestamp": "-"}}, 400, "Bad Request: missing webhook-timestamp header", false},
		{"a timestamp that is no number", delivery{ts: "yesterday"}, 400, "Bad Request: webhook-timestamp is not unix seconds", false},
		{"a timestamp six minutes old", delivery{ts: strconv.FormatInt(t0.Add(-6*time.Minute).Unix(), 10)}, 400, "Bad Request: webhook-timestamp too old (6m0s before the receiver's clock, tolerance 5m0s)", false},
		{"a timestamp six minutes ahead", delivery{ts: strconv.FormatInt(t0.Add(6*time.Minute).Unix(), 10)}, 400, "Bad Request: webhook-timestamp too new (6m0s after the receiver's clock, tolerance 5m0s)", false},
		{"a body that is no JSON", delivery{body: []byte("hello")}, 400, "", false},
		{"another event type", delivery{body: []byte(`{"type":"message.deleted","data":{"chat_id":"c1","text":"x"}}`)}, 400, `Bad Request: unsupported event type "message.deleted" (want message.created)`, true},
		{"no chat", delivery{body: []byte(`{"type":"message.created","data":{"text":"x"}}`)}, 400, "Bad Request: data.chat_id is empty", true},
		{"no text", delivery{body: []byte(`{"type":"message.created","data":{"chat_id":"c1","text":""}}`)}, 400, "Bad Request: message text is empty", true},
		{"a part past the parts", delivery{body: []byte(`{"type":"message.created","data":{"chat_id":"c1","text":"x","part":2,"parts":2}}`)}, 400, "Bad Request: data.part 2 is out of range", true},
		{"a marker header that disagrees with the body", delivery{header: map[string]string{"herald-redelivery": "true"}}, 400, "Bad Request: herald-redelivery header says true, data.redelivery says false", true},
		{"a marker header that is no boolean", delivery{header: map[string]string{"herald-redelivery": "maybe"}}, 400, `Bad Request: herald-redelivery header "maybe" is not a boolean`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newHookEnv(t, fakeplatform.Config{})
			// Payload problems are found after the faults, as for the chat
			// API; an unauthenticated request never reaches them.
			e.mustFault(map[string]any{"op": "send", "profile": "webhook", "kind": "server_error"})
			r := e.hook(context.Background(), tt.d)
			if tt.payload {
				wantStatus(t, r, http.StatusInternalServerError, "Internal Server Error")
				r = e.hook(context.Background(), tt.d)
			} else if armed := e.srv.Faults(); len(armed) != 1 {
				t.Fatalf("a refused delivery consumed a fault: %+v", armed)
			}
			wantStatus(t, r, tt.status, tt.desc)
			if n := len(e.entries()); n != 0 {
				t.Fatalf("journal holds %d entries, want none", n)
			}
		})
	}

	t.Run("a delivery within the tolerance, and a rotated signature list", func(t *testing.T) {
		e := newHookEnv(t, fakeplatform.Config{})
		ts := strconv.FormatInt(t0.Add(-4*time.Minute).Unix(), 10)
		body := heraldPayload("c1", "late but fine", false)
		sigs := fakeplatform.SignWebhook([]byte("old key"), "msg_1", ts, body) + " " + fakeplatform.SignWebhook(hookKey, "msg_1", ts, body)
		wantStatus(t, e.hook(context.Background(), delivery{ts: ts, body: body, sig: sigs}), http.StatusOK, "")
	})
	t.Run("a custom tolerance", func(t *testing.T) {
		e := newHookEnv(t, fakeplatform.Config{WebhookTolerance: time.Minute})
		ts := strconv.FormatInt(t0.Add(-2*time.Minute).Unix(), 10)
		wantStatus(t, e.hook(context.Background(), delivery{ts: ts}), http.StatusBadRequest,
			"Bad Request: webhook-timestamp too old (2m0s before the receiver's clock, tolerance 1m0s)")
	})
	t.Run("a receiver without a secret", func(t *testing.T) {
		e := newEnv(t, fakeplatform.Config{})
		wantStatus(t, e.hook(context.Background(), delivery{}), http.StatusUnauthorized,
			"Unauthorized: no webhook secret configured (start the fake with --webhook-secret)")
	})
	t.Run("a raw secret without the whsec_ prefix", func(t *testing.T) {
		e := newEnv(t, fakeplatform.Config{WebhookSecret: "plain-text-key"})
		wantStatus(t, e.hook(context.Background(), delivery{key: []byte("plain-text-key")}), http.StatusOK, "")
	})
}

// TestWebhookReceiverFaults arms each fault kind herald must survive for
// the webhook profile and one chat, and checks what a sender sees, what
// the journal holds, and that the sender's retry (same webhook-id, marked)
// then lands exactly once.
func TestWebhookReceiverFaults(t *testing.T) {
	tests := []struct {
		kind  string
		check func(t *testing.T, e *env, r reply)
		// landed: the faulted delivery was journalled.
		landed bool
	}{
		{"ack_lost", func(t *testing.T, e *env, r reply) { wantConnError(t, r) }, true},
		{"reset", func(t *testing.T, e *env, r reply) { wantConnError(t, r) }, false},
		{"timeout_before_accept", func(t *testing.T, e *env, r reply) { wantConnError(t, r) }, false},
		{"server_error", func(t *testing.T, e *env, r reply) {
			wantStatus(t, r, http.StatusInternalServerError, "Internal Server Error")
		}, false},
		{"rate_limit", func(t *testing.T, e *env, r reply) {
			wantStatus(t, r, http.StatusTooManyRequests, "Too Many Requests: retry after 1")
			if r.header.Get("Retry-After") != "1" || r.body["retry_after"] != 0.2 {
				t.Fatalf("Retry-After %q, body %s", r.header.Get("Retry-After"), r.raw)
			}
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			e := newHookEnv(t, fakeplatform.Config{})
			e.client.Timeout = 300 * time.Millisecond // ends timeout_before_accept
			// Faults for another profile or chat must not fire here.
			e.mustFault(map[string]any{"op": "send", "profile": "telegram", "chat_id": "c1", "kind": tt.kind, "retry_after": 0.2})
			e.mustFault(map[string]any{"op": "send", "profile": "webhook", "chat_id": "c2", "kind": tt.kind, "retry_after": 0.2})
			e.mustFault(map[string]any{"op": "send", "profile": "webhook", "chat_id": "c1", "kind": tt.kind, "retry_after": 0.2})
			ctx := context.Background()
			tt.check(t, e, e.hook(ctx, delivery{id: "hk1", chat: "c1", text: "once"}))
			if n := len(e.entries()); (n == 1) != tt.landed {
				t.Fatalf("journal holds %d entries after %s, landed = %v", n, tt.kind, tt.landed)
			}
			if armed := e.srv.Faults(); len(armed) != 2 || armed[0].Fault.Profile != "telegram" || armed[1].Fault.ChatID != "c2" {
				t.Fatalf("armed faults = %+v, want the telegram and c2 ones untouched", armed)
			}
			if st := e.srv.Stats(); st.FaultsFired[fakeplatform.FaultKind(tt.kind)] != 1 {
				t.Fatalf("faults fired = %v, want one %s", st.FaultsFired, tt.kind)
			}
			e.client.Timeout = 0
			r := e.hook(ctx, delivery{id: "hk1", chat: "c1", text: "[possible duplicate] once", redelivery: true})
			wantStatus(t, r, http.StatusOK, "")
			if r.body["id"] != "1" || (r.body["deduplicated"] == true) != tt.landed {
				t.Fatalf("retry answered %s (faulted delivery landed: %v)", r.raw, tt.landed)
			}
			got := e.entries()
			if len(got) != 1 || got[0].Redelivery == tt.landed {
				t.Fatalf("journal = %+v, want exactly one copy", got)
			}
		})
	}
}

// TestWebhookFaultsOverTheControlAPI arms a webhook fault over HTTP and
// lists it back with its profile.
func TestWebhookFaultsOverTheControlAPI(t *testing.T) {
	e := newHookEnv(t, fakeplatform.Config{})
	e.mustFault(map[string]any{"op": "send", "profile": "webhook", "chat_id": "c1", "kind": "ack_lost", "count": 2})
	r := e.do(context.Background(), http.MethodGet, "/control/faults", nil)
	want := `{"faults":[{"id":1,"op":"send","chat_id":"c1","profile":"webhook","kind":"ack_lost","count":2,"remaining":2}]}`
	if r.raw != want {
		t.Fatalf("GET /control/faults = %s, want %s", r.raw, want)
	}
	// A chat API send never matches the webhook profile.
	wantStatus(t, e.send("telegram", "c1", "x"), http.StatusOK, "")
	if a := e.srv.Faults(); len(a) != 1 || a[0].Remaining != 2 {
		t.Fatalf("a telegram send consumed the webhook fault: %+v", a)
	}
}

func TestWebhookConfigIsValidated(t *testing.T) {
	for _, cfg := range []fakeplatform.Config{
		{WebhookSecret: "whsec_!!!not base64"},
		{WebhookSecret: "whsec_"},
		{WebhookSecret: hookSecret, WebhookTolerance: -time.Second},
	} {
		cfg.JournalPath = filepath.Join(t.TempDir(), "journal.jsonl")
		cfg.Clock = clock.NewManual(t0)
		srv, err := fakeplatform.New(cfg)
		if err == nil {
			srv.Close()
			t.Errorf("New(%+v) accepted it", cfg)
			continue
		}
		if strings.Contains(err.Error(), "!!!") {
			t.Errorf("New error quotes the secret: %v", err)
		}
	}
}
