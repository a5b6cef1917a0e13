package platform_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/gateway/platform"
	"herald/internal/clock"
	"herald/outbox"
)

// t0 is where the Manual clocks of these tests stand.
var t0 = time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)

// vectorSecret is the Standard Webhooks test secret (libraries/go tests).
const vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// plusSecret is a whsec_ secret whose base64 is all "+", pasted into the URL
// unescaped as operators do: a query parser would read every "+" as a space.
var plusSecret = "whsec_" + strings.Repeat("++++", 8)

// received is one request a test receiver got.
type received struct {
	header http.Header
	body   []byte
	query  string
	path   string
}

// receiver is a webhook endpoint: it records every request and answers
// with reply.
type receiver struct {
	mu    sync.Mutex
	got   []received
	reply http.HandlerFunc
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rv.mu.Lock()
	rv.got = append(rv.got, received{header: r.Header.Clone(), body: body, query: r.URL.RawQuery, path: r.URL.Path})
	rv.mu.Unlock()
	if rv.reply != nil {
		rv.reply(w, r)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (rv *receiver) requests() []received {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]received(nil), rv.got...)
}

// newWebhook starts a receiver answering with reply and returns a webhook
// sender for it, signing with secrets, on a Manual clock at t0.
func newWebhook(t *testing.T, reply http.HandlerFunc, secrets ...string) (outbox.Sender, *receiver, *clock.Manual) {
	t.Helper()
	rv := &receiver{reply: reply}
	ts := httptest.NewServer(rv)
	t.Cleanup(ts.Close)
	if len(secrets) == 0 {
		secrets = []string{vectorSecret}
	}
	spec := "hook=webhook:" + ts.URL + "/hooks/herald?team=7"
	for _, s := range secrets {
		spec += "&secret=" + s
	}
	m := clock.NewManual(t0)
	p, err := platform.Parse(spec, platform.Options{Clock: m})
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	t.Cleanup(p.Sender.(*platform.Webhook).CloseIdleConnections)
	return p.Sender, rv, m
}

// verifySignature checks a request the way a Standard Webhooks receiver
// does, written from the spec text rather than from the sender: the key is
// the base64 after "whsec_" (else the secret's bytes), the signed content is
// "{webhook-id}.{webhook-timestamp}.{body}", and webhook-signature holds one
// or more space-separated "v1,<base64 HMAC-SHA256>", any of which may match.
func verifySignature(secret string, h http.Header, body []byte) error {
	key := []byte(secret)
	if b64, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(b64); err != nil {
			return fmt.Errorf("test secret: %w", err)
		}
	}
	id, ts := h.Get("webhook-id"), h.Get("webhook-timestamp")
	if id == "" || ts == "" {
		return errors.New("missing webhook-id or webhook-timestamp")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Split(h.Get("webhook-signature"), " ") {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("no signature in %q verifies", h.Get("webhook-signature"))
}

func TestWebhookSendsASignedStandardWebhook(t *testing.T) {
	tests := []struct {
		name         string
		secrets      []string
		verifyWith   string
		wantSigCount int
	}{
		{"a whsec_ secret is base64 of the key", []string{vectorSecret}, vectorSecret, 1},
		{"a secret without whsec_ is the key's bytes", []string{"plain-" + secretWord}, "plain-" + secretWord, 1},
		{"a + in a pasted secret stays a +", []string{plusSecret}, plusSecret, 1},
		{"during rotation the receiver's new key verifies", []string{vectorSecret, "new-" + secretWord}, "new-" + secretWord, 2},
		{"during rotation the receiver's old key verifies", []string{vectorSecret, "new-" + secretWord}, vectorSecret, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rv, m := newWebhook(t, nil, tt.secrets...)
			msg := outbox.Outgoing{
				ObligationID: 42, Platform: "hook", ChatID: "room/1", Text: `a <b> & "c"`,
				DeliveryKey: "dk_42", Part: 1, Parts: 3,
			}
			id, err := s.Send(context.Background(), msg)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if id != "dk_42" {
				t.Errorf("message id = %q, want the webhook-id when the receiver says nothing", id)
			}
			reqs := rv.requests()
			if len(reqs) != 1 {
				t.Fatalf("receiver got %d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if err := verifySignature(tt.verifyWith, r.header, r.body); err != nil {
				t.Errorf("signature does not verify: %v", err)
			}
			if n := len(strings.Split(r.header.Get("webhook-signature"), " ")); n != tt.wantSigCount {
				t.Errorf("%d signatures, want %d", n, tt.wantSigCount)
			}
			if got, want := r.header.Get("webhook-timestamp"), strconv.FormatInt(m.Now().Unix(), 10); got != want {
				t.Errorf("webhook-timestamp = %q, want the clock's %q", got, want)
			}
			if got := r.header.Get("webhook-id"); got != "dk_42" {
				t.Errorf("webhook-id = %q, want the delivery key", got)
			}
			if got := r.header.Get("herald-redelivery"); got != "false" {
				t.Errorf("herald-redelivery = %q, want false", got)
			}
			if got := r.header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			if r.query != "team=7" || r.path != "/hooks/herald" {
				t.Errorf("request went to %s?%s, want /hooks/herald?team=7 (no secret)", r.path, r.query)
			}
			want := `{"type":"message.created","data":{"chat_id":"room/1","text":"a <b> & \"c\"","part":1,"parts":3,"redelivery":false,"obligation_id":42}}`
			if string(r.body) != want {
				t.Errorf("body:\n got %s\nwant %s", r.body, want)
			}
		})
	}
}

func TestWebhookIDIsStableAcrossRetriesOfOneObligation(t *testing.T) {
	s, rv, m := newWebhook(t, nil)
	first := outbox.Outgoing{ObligationID: 5, ChatID: "c", Text: "hello", DeliveryKey: "dk_5", Parts: 1}
	retry := first
	retry.Text, retry.Redelivery = outbox.Marker+"hello", true
	for _, msg := range []outbox.Outgoing{first, retry} {
		if _, err := s.Send(context.Background(), msg); err != nil {
			t.Fatalf("Send: %v", err)
		}
		m.Advance(90 * time.Second)
	}
	reqs := rv.requests()
	if len(reqs) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(reqs))
	}
	if a, b := reqs[0].header.Get("webhook-id"), reqs[1].header.Get("webhook-id"); a != "dk_5" || b != a {
		t.Errorf("webhook-ids %q then %q, want dk_5 both times", a, b)
	}
	if a, b := reqs[0].header.Get("webhook-timestamp"), reqs[1].header.Get("webhook-timestamp"); a == b {
		t.Errorf("webhook-timestamp did not move with the clock: %q", a)
	}
	if a, b := reqs[0].header.Get("herald-redelivery"), reqs[1].header.Get("herald-redelivery"); a != "false" || b != "true" {
		t.Errorf("herald-redelivery %q then %q, want false then true", a, b)
	}
	var payload struct {
		Data struct {
			Text       string `json:"text"`
			Redelivery bool   `json:"redelivery"`
		} `json:"data"`
	}
	if err := json.Unmarshal(reqs[1].body, &payload); err != nil {
		t.Fatal(err)
	}
	if !payload.Data.Redelivery || payload.Data.Text != outbox.Marker+"hello" {
		t.Errorf("retry payload = %+v, want the marked text with redelivery true", payload.Data)
	}
	for i, r := range reqs {
		if err := verifySignature(vectorSecret, r.header, r.body); err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}
}

func TestWebhookResponses(t *testing.T) {
	retryDate := t0.Add(90 * time.Second).Format(http.TimeFormat)
	tests := []struct {
		name       string
		reply      http.HandlerFunc
		wantID     string
		wantClass  outbox.ErrorClass
		wantRetry  time.Duration
		wantGlobal bool
		wantInErr  string
	}{
		{name: "204 without a body delivers under the webhook-id", reply: status(http.StatusNoContent, "", nil), wantID: "dk_1"},
		{name: "200 with text delivers under the webhook-id", reply: status(http.StatusOK, "OK", nil), wantID: "dk_1"},
		{name: "200 with an id returns it", reply: status(http.StatusOK, `{"id":"evt_9"}`, nil), wantID: "evt_9"},
		{name: "202 with a numeric message_id returns it", reply: status(http.StatusAccepted, `{"message_id":1234567890123}`, nil), wantID: "1234567890123"},
		{name: "a 2xx torn mid-body is ambiguous", reply: torn, wantClass: outbox.ClassAmbiguous, wantInErr: "torn"},
		{name: "410 Gone is permanent and says why", reply: status(http.StatusGone, "", nil),
			wantClass: outbox.ClassPermanent, wantInErr: "410 Gone disables the endpoint"},
		{name: "400 is permanent with the receiver's words", reply: status(http.StatusBadRequest, `{"message":"chat_id unknown"}`, nil),
			wantClass: outbox.ClassPermanent, wantInErr: "status 400: chat_id unknown"},
		{name: "401 (bad signature) is permanent", reply: status(http.StatusUnauthorized, "invalid signature\n", nil),
			wantClass: outbox.ClassPermanent, wantInErr: "status 401: Unauthorized: invalid signature"},
		{name: "404 is permanent", reply: status(http.StatusNotFound, "", nil), wantClass: outbox.ClassPermanent},
		{name: "429 with Retry-After in seconds", reply: status(http.StatusTooManyRequests, "", http.Header{"Retry-After": {"7"}}),
			wantClass: outbox.ClassRateLimited, wantRetry: 7 * time.Second},
		{name: "429 with Retry-After as an HTTP-date, measured on the clock", reply: status(http.StatusTooManyRequests, "", http.Header{"Retry-After": {retryDate}}),
			wantClass: outbox.ClassRateLimited, wantRetry: 90 * time.Second},
		{name: "429 with a date in the past waits nothing", reply: status(http.StatusTooManyRequests, "", http.Header{"Retry-After": {t0.Add(-time.Hour).Format(http.TimeFormat)}}),
			wantClass: outbox.ClassRateLimited},
		{name: "429 prefers the JSON retry_after and reads global", reply: status(http.StatusTooManyRequests, `{"message":"You are being rate limited.","retry_after":1.25,"global":true}`, http.Header{"Retry-After": {"2"}}),
			wantClass: outbox.ClassRateLimited, wantRetry: 1250 * time.Millisecond, wantGlobal: true, wantInErr: "You are being rate limited."},
		{name: "429 with Discord's global scope header", reply: status(http.StatusTooManyRequests, "", http.Header{"Retry-After": {"1"}, "X-Ratelimit-Scope": {"global"}}),
			wantClass: outbox.ClassRateLimited, wantRetry: time.Second, wantGlobal: true},
		{name: "429 with Telegram's parameters.retry_after", reply: status(http.StatusTooManyRequests, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}`, nil),
			wantClass: outbox.ClassRateLimited, wantRetry: 3 * time.Second},
		{name: "429 with an absurd wait is capped", reply: status(http.StatusTooManyRequests, "", http.Header{"Retry-After": {"99999999999999"}}),
			wantClass: outbox.ClassRateLimited, wantRetry: platform.MaxRetryAfter},
		{name: "429 with an unreadable Retry-After has no wait", reply: status(http.StatusTooManyRequests, "", http.Header{"Retry-After": {"soon"}}),
			wantClass: outbox.ClassRateLimited},
		{name: "500 is ambiguous", reply: status(http.StatusInternalServerError, "boom", nil), wantClass: outbox.ClassAmbiguous, wantInErr: "status 500"},
		{name: "503 is ambiguous and keeps its Retry-After", reply: status(http.StatusServiceUnavailable, "", http.Header{"Retry-After": {"4"}}),
			wantClass: outbox.ClassAmbiguous, wantRetry: 4 * time.Second},
		{name: "408 is ambiguous", reply: status(http.StatusRequestTimeout, "", nil), wantClass: outbox.ClassAmbiguous},
		{name: "a redirect is not followed and is ambiguous", reply: status(http.StatusFound, "", http.Header{"Location": {"https://elsewhere.example/in?secret=" + secretWord}}),
			wantClass: outbox.ClassAmbiguous, wantInErr: "redirected to https://elsewhere.example/in?secret=REDACTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rv, _ := newWebhook(t, tt.reply)
			id, err := s.Send(context.Background(), outbox.Outgoing{ObligationID: 1, ChatID: "c", Text: "hi", DeliveryKey: "dk_1", Parts: 1})
			if n := len(rv.requests()); n != 1 {
				t.Errorf("receiver got %d requests, want exactly 1 (no redirects, no hidden retries)", n)
			}
			if tt.wantClass == "" {
				if err != nil || id != tt.wantID {
					t.Fatalf("Send = %q, %v; want %q", id, err, tt.wantID)
				}
				return
			}
			t.Logf("Send error: %v", err)
			se := mustSendError(t, err, tt.wantClass)
			if se.RetryAfter != tt.wantRetry || se.Global != tt.wantGlobal {
				t.Errorf("RetryAfter %v Global %v, want %v %v", se.RetryAfter, se.Global, tt.wantRetry, tt.wantGlobal)
			}
			if !strings.HasPrefix(err.Error(), string(tt.wantClass)) || !strings.Contains(se.Err.Error(), `send to webhook 127.0.0.1:`) {
				t.Errorf("error lacks its context: %v", err)
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not say %q", err, tt.wantInErr)
			}
			if strings.Contains(err.Error(), secretWord) {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

func TestWebhookRefusesADeliveryKeyThatCannotBeAWebhookID(t *testing.T) {
	for _, key := range []string{"", "a.b", "a b", "a\nb", "clé"} {
		s, rv, _ := newWebhook(t, nil)
		_, err := s.Send(context.Background(), outbox.Outgoing{ObligationID: 1, ChatID: "c", Text: "hi", DeliveryKey: key})
		mustSendError(t, err, outbox.ClassPermanent)
		if n := len(rv.requests()); n != 0 {
			t.Errorf("key %q: %d requests sent, want none", key, n)
		}
	}
}

func TestWebhookTLSHandshakeFailureIsRetryable(t *testing.T) {
	rv := &receiver{}
	ts := httptest.NewUnstartedServer(rv)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake is expected
	ts.StartTLS()                                   // with a certificate we do not trust
	t.Cleanup(ts.Close)
	p, err := platform.Parse("hook=webhook:"+ts.URL+"/?secret="+vectorSecret, platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Sender.Send(context.Background(), outbox.Outgoing{ObligationID: 1, ChatID: "c", Text: "hi", DeliveryKey: "dk_1"})
	se := mustSendError(t, err, outbox.ClassRetryable)
	if !strings.Contains(se.Error(), "request not sent") {
		t.Errorf("error does not say the request was not sent: %v", se)
	}
	if n := len(rv.requests()); n != 0 {
		t.Errorf("receiver got %d requests through a failed handshake", n)
	}
}

// status answers code with body and extra headers.
func status(code int, body string, h http.Header) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, vs := range h {
			w.Header()[k] = vs
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

// torn answers 200 with a Content-Length it never fulfils, then drops the
// connection.
func torn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Length", "100")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"id":`)
	http.NewResponseController(w).Flush()
	panic(http.ErrAbortHandler)
}

// mustSendError asserts err is a *outbox.SendError of class want.
func mustSendError(t *testing.T, err error, want outbox.ErrorClass) *outbox.SendError {
	t.Helper()
	var se *outbox.SendError
	if !errors.As(err, &se) {
		t.Fatalf("error = %v (%T), want a *outbox.SendError of class %s", err, err, want)
	}
	if se.Class != want {
		t.Fatalf("class = %s, want %s; error: %v", se.Class, want, err)
	}
	if outbox.Classify(err) != se {
		t.Errorf("outbox.Classify does not find the SendError")
	}
	return se
}
