package platform_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/gateway/platform"
	"herald/internal/clock"
	"herald/internal/split"
	"herald/outbox"
)

// fakeEnv is a real fake platform behind a real HTTP server.
type fakeEnv struct {
	srv *fakeplatform.Server
	url string
}

func newFakeEnv(t *testing.T) *fakeEnv {
	t.Helper()
	srv, err := fakeplatform.New(fakeplatform.Config{
		JournalPath: filepath.Join(t.TempDir(), "journal.jsonl"),
		Clock:       clock.NewManual(t0),
	})
	if err != nil {
		t.Fatalf("fakeplatform.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	// Cleanups run last-in first-out: the fake lets its held requests go
	// before the HTTP server waits for them.
	t.Cleanup(ts.Close)
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("fakeplatform Close: %v", err)
		}
	})
	return &fakeEnv{srv: srv, url: ts.URL}
}

// sender returns a fake: adapter for profile, parsed from its spec.
func (e *fakeEnv) sender(t *testing.T, profile string) outbox.Sender {
	t.Helper()
	p, err := platform.Parse("f=fake:"+e.url+"?profile="+profile, platform.Options{Clock: clock.NewManual(t0)})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	t.Cleanup(p.Sender.(*platform.Fake).CloseIdleConnections)
	return p.Sender
}

func (e *fakeEnv) arm(t *testing.T, f fakeplatform.Fault) {
	t.Helper()
	if _, err := e.srv.AddFault(f); err != nil {
		t.Fatalf("AddFault: %v", err)
	}
}

func (e *fakeEnv) texts(profile, chat string) []string {
	var out []string
	for _, m := range e.srv.Messages(profile, chat) {
		out = append(out, m.Text)
	}
	return out
}

func msg(chat, text, key string) outbox.Outgoing {
	return outbox.Outgoing{ObligationID: 1, Platform: "f", ChatID: chat, Text: text, DeliveryKey: key, Parts: 1}
}

func TestFakeDelivers(t *testing.T) {
	e := newFakeEnv(t)
	s := e.sender(t, "telegram")
	for _, chat := range []string{"c1", "room/with slash?and=query", "ünïcode"} {
		id, err := s.Send(context.Background(), msg(chat, "hello "+chat, "k1"))
		if err != nil {
			t.Fatalf("Send to %q: %v", chat, err)
		}
		got := e.srv.Messages("telegram", chat)
		if len(got) != 1 || got[0].MessageID != id || got[0].Text != "hello "+chat || got[0].IdempotencyKey != "k1" || got[0].Redelivery {
			t.Errorf("chat %q shows %+v, want one message %q with id %q", chat, got, "hello "+chat, id)
		}
	}
	marked := msg("c1", outbox.Marker+"again", "k2")
	marked.Redelivery = true
	if _, err := s.Send(context.Background(), marked); err != nil {
		t.Fatal(err)
	}
	if got := e.srv.Messages("telegram", "c1"); len(got) != 2 || !got[1].Redelivery {
		t.Errorf("the redelivery flag did not reach the fake: %+v", got)
	}
}

func TestFakeFaults(t *testing.T) {
	tests := []struct {
		name      string
		fault     fakeplatform.FaultKind
		retry     float64
		timeout   time.Duration // a ctx deadline for the send, if any
		want      outbox.ErrorClass
		wantRetry time.Duration
		wantInErr string
		// landed is whether the chat shows the message afterwards.
		landed bool
	}{
		{name: "timeout_before_accept with a short deadline is ambiguous", fault: fakeplatform.FaultTimeoutBeforeAccept,
			timeout: 200 * time.Millisecond, want: outbox.ClassAmbiguous, wantInErr: "context deadline exceeded"},
		{name: "ack_lost is ambiguous, and the message did land", fault: fakeplatform.FaultAckLost,
			want: outbox.ClassAmbiguous, landed: true},
		{name: "rate_limit is rate_limited with the exact retry_after", fault: fakeplatform.FaultRateLimit, retry: 2.5,
			want: outbox.ClassRateLimited, wantRetry: 2500 * time.Millisecond, wantInErr: "status 429: Too Many Requests: retry after 3"},
		{name: "server_error is ambiguous", fault: fakeplatform.FaultServerError,
			want: outbox.ClassAmbiguous, wantInErr: "status 500: Internal Server Error"},
		{name: "reset is ambiguous", fault: fakeplatform.FaultReset,
			want: outbox.ClassAmbiguous},
		{name: "over_length is permanent with the platform's words", fault: fakeplatform.FaultOverLength,
			want: outbox.ClassPermanent, wantInErr: "status 400: Bad Request: message is too long"},
		{name: "hold_before_accept past the deadline is ambiguous, and lands later", fault: fakeplatform.FaultHoldBeforeAccept,
			timeout: 200 * time.Millisecond, want: outbox.ClassAmbiguous, wantInErr: "context deadline exceeded", landed: true},
		{name: "hold_after_accept past the deadline is ambiguous, and landed", fault: fakeplatform.FaultHoldAfterAccept,
			timeout: 200 * time.Millisecond, want: outbox.ClassAmbiguous, wantInErr: "context deadline exceeded", landed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newFakeEnv(t)
			s := e.sender(t, "telegram")
			e.arm(t, fakeplatform.Fault{Kind: tt.fault, RetryAfter: tt.retry})
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			id, err := s.Send(ctx, msg("c1", "hello", "k1"))
			if err == nil {
				t.Fatalf("Send = %q, nil; want a %s error", id, tt.want)
			}
			t.Logf("Send error: %v", err)
			se := mustSendError(t, err, tt.want)
			if se.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %v, want %v", se.RetryAfter, tt.wantRetry)
			}
			if !strings.Contains(err.Error(), `send to fake/telegram chat "c1": `) {
				t.Errorf("error lacks its context: %v", err)
			}
			if !strings.Contains(err.Error(), tt.wantInErr) {
				t.Errorf("error %q does not say %q", err, tt.wantInErr)
			}
			if tt.timeout > 0 && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error does not wrap context.DeadlineExceeded: %v", err)
			}
			if tt.fault == fakeplatform.FaultHoldBeforeAccept {
				e.srv.Release() // let the held request go on and land
				waitFor(t, "the held send to land", func() bool { return len(e.texts("telegram", "c1")) == 1 })
			}
			if got := e.texts("telegram", "c1"); (len(got) == 1) != tt.landed || len(got) > 1 {
				t.Errorf("chat shows %q; landed = %v", got, tt.landed)
			}
			// The adapter is still usable: the fault broke one
			// connection, not the pool.
			if _, err := s.Send(context.Background(), msg("c1", "after", "k2")); err != nil {
				t.Errorf("the next send failed: %v", err)
			}
		})
	}
}

func TestFakeClosedPortIsRetryable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, err := platform.Parse("f=fake:http://"+addr+"?profile=slack", platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Sender.Send(context.Background(), msg("c1", "hello", "k1"))
	t.Logf("Send error: %v", err)
	se := mustSendError(t, err, outbox.ClassRetryable)
	if !strings.Contains(se.Error(), `send to fake/slack chat "c1": connect failed, request not sent: `) {
		t.Errorf("error = %v", se)
	}
}

func TestFakeExpiredContextSendsNothing(t *testing.T) {
	e := newFakeEnv(t)
	s := e.sender(t, "telegram")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Send(ctx, msg("c1", "hello", "k1"))
	mustSendError(t, err, outbox.ClassRetryable)
	if st := e.srv.Stats(); st.Accepted[fakeplatform.OpSend] != 0 {
		t.Errorf("the fake accepted %d sends", st.Accepted[fakeplatform.OpSend])
	}
}

func TestFakeDiscordDeduplicatesByKey(t *testing.T) {
	e := newFakeEnv(t)
	tests := []struct {
		profile string
		want    int // messages the chat shows after two sends with one key
	}{
		{"discord", 1},
		{"telegram", 2},
		{"slack", 2},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			s := e.sender(t, tt.profile)
			first, err := s.Send(context.Background(), msg("c1", "hello", "dk_7"))
			if err != nil {
				t.Fatal(err)
			}
			retry := msg("c1", outbox.Marker+"hello", "dk_7")
			retry.Redelivery = true
			second, err := s.Send(context.Background(), retry)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(e.texts(tt.profile, "c1")); got != tt.want {
				t.Errorf("chat shows %d messages, want %d", got, tt.want)
			}
			if (first == second) != (tt.want == 1) {
				t.Errorf("message ids %q and %q; want equal only where the key is honoured", first, second)
			}
		})
	}
}

func TestFakeRealOverLengthIsPermanent(t *testing.T) {
	e := newFakeEnv(t)
	s := e.sender(t, "discord")
	// 1001 emoji are 2002 UTF-16 units, over discord's 2000.
	_, err := s.Send(context.Background(), msg("c1", strings.Repeat("😀", 1001), "k"))
	mustSendError(t, err, outbox.ClassPermanent)
	if _, err := s.Send(context.Background(), msg("c1", strings.Repeat("😀", 1000), "k2")); err != nil {
		t.Errorf("a text exactly at the limit failed: %v", err)
	}
}

func TestFakeProfilesMatchTheFakePlatform(t *testing.T) {
	var theirs []platform.FakeProfile
	for _, p := range fakeplatform.AllProfiles() {
		theirs = append(theirs, platform.FakeProfile{Name: p.Name, MaxTextUnits: p.MaxTextUnits, HonoursKey: p.HonoursIdempotencyKey})
	}
	if ours := platform.FakeProfiles(); !slices.Equal(ours, theirs) {
		t.Errorf("FakeProfiles() = %+v, fakeplatform has %+v", ours, theirs)
	}
	e := newFakeEnv(t)
	for _, p := range fakeplatform.AllProfiles() {
		if got, want := e.sender(t, p.Name).Limit(), (split.Limit{Max: p.MaxTextUnits, Unit: split.UTF16}); got != want {
			t.Errorf("%s Limit() = %+v, want %+v", p.Name, got, want)
		}
	}
}

func TestFakeUnreadableSuccessIsAmbiguous(t *testing.T) {
	tests := []struct {
		name  string
		reply http.HandlerFunc
	}{
		{"a 200 that is not JSON", status(http.StatusOK, "OK", nil)},
		{"a 200 without ok", status(http.StatusOK, `{"ok":false,"message_id":"1"}`, nil)},
		{"a 200 without a message id", status(http.StatusOK, `{"ok":true}`, nil)},
		{"a 200 torn mid-body", torn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := httptest.NewServer(tt.reply)
			t.Cleanup(ts.Close)
			p, err := platform.Parse("f=fake:"+ts.URL+"?profile=telegram", platform.Options{})
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Sender.Send(context.Background(), msg("c1", "hello", "k"))
			mustSendError(t, err, outbox.ClassAmbiguous)
		})
	}
}

// waitFor polls cond until it holds, failing after a generous deadline.
// It is for conditions another goroutine brings about, not for ordering.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.PollReal(ctx, 5*time.Millisecond, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
