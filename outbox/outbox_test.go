package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/internal/clock"
	"herald/internal/split"
	"herald/internal/store"
	"herald/outbox"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// deadSet is a Liveness where every owner is alive unless marked dead.
type deadSet struct {
	mu   sync.Mutex
	dead map[string]bool
}

func (d *deadSet) Alive(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.dead[id]
}

func (d *deadSet) kill(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead == nil {
		d.dead = map[string]bool{}
	}
	d.dead[id] = true
}

type env struct {
	t    *testing.T
	path string
	clk  *clock.Manual
	live *deadSet
}

func newEnv(t *testing.T) *env {
	return &env{t: t, path: filepath.Join(t.TempDir(), store.FileName), clk: clock.NewManual(t0), live: &deadSet{}}
}

// ledger opens a new ledger on the env's database as a distinct owner, as a
// separate process would.
func (e *env) ledger(owner string, mod ...func(*outbox.Config)) *outbox.Ledger {
	e.t.Helper()
	db, err := store.Open(context.Background(), store.Options{Path: e.path}, e.clk)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { db.Close() })
	cfg := outbox.Config{Owner: owner, Seed: 1}
	for _, m := range mod {
		m(&cfg)
	}
	l, err := outbox.New(db, nil, e.live, nil, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

// platform is an in-test Sender that records what a chat would show and
// fails on demand.
type platform struct {
	mu    sync.Mutex
	limit split.Limit
	sent  []outbox.Outgoing
	fail  []error // consumed one per send; nil entries succeed
}

func (p *platform) Limit() split.Limit { return p.limit }

func (p *platform) Send(ctx context.Context, m outbox.Outgoing) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.fail) > 0 {
		err := p.fail[0]
		p.fail = p.fail[1:]
		if err != nil {
			return "", err
		}
	}
	p.sent = append(p.sent, m)
	return fmt.Sprintf("pm-%d", len(p.sent)), nil
}

func (p *platform) texts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.sent {
		out = append(out, m.Text)
	}
	return out
}

func record(t *testing.T, l *outbox.Ledger, chat, text, key string) outbox.Message {
	t.Helper()
	m, _, err := l.Record(context.Background(), outbox.NewMessage{Platform: "p", ChatID: chat, Text: text, IdempotencyKey: key}, split.Limit{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func claimAll(t *testing.T, l *outbox.Ledger, n int) []outbox.Claim {
	t.Helper()
	cs, err := l.Claim(context.Background(), n, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func deliver(t *testing.T, l *outbox.Ledger, c outbox.Claim, p *platform) outbox.Outcome {
	t.Helper()
	oc, err := l.Deliver(context.Background(), c, p)
	if err != nil {
		t.Fatal(err)
	}
	return oc
}

func TestSchemaCheckListsEveryState(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a")
	var ddl string
	if err := l.DB().QueryRow(context.Background(), `SELECT sql FROM sqlite_master WHERE name = 'obligations'`).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`state IN \(([^)]*)\)`).FindStringSubmatch(ddl)
	if m == nil {
		t.Fatalf("no state CHECK in %s", ddl)
	}
	var got []string
	for _, s := range strings.Split(m[1], ",") {
		got = append(got, strings.Trim(strings.TrimSpace(s), "'"))
	}
	var want []string
	for _, s := range outbox.AllStates() {
		want = append(want, string(s))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("CHECK lists %v, AllStates %v", got, want)
	}
}

func TestRecordIsIdempotentAndRefusesAChangedPayload(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a")
	ctx := context.Background()
	first, created, err := l.Record(ctx, outbox.NewMessage{Platform: "p", ChatID: "c", Text: "hi", IdempotencyKey: "k1"}, split.Limit{})
	if err != nil || !created {
		t.Fatalf("first Record = %v, created=%v", err, created)
	}
	again, created, err := l.Record(ctx, outbox.NewMessage{Platform: "p", ChatID: "c", Text: "hi", IdempotencyKey: "k1"}, split.Limit{})
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("repeat Record = id %d created=%v err=%v; want id %d, not created", again.ID, created, err, first.ID)
	}
	_, _, err = l.Record(ctx, outbox.NewMessage{Platform: "p", ChatID: "c", Text: "bye", IdempotencyKey: "k1"}, split.Limit{})
	if !errors.Is(err, outbox.ErrConflict) {
		t.Fatalf("Record with a changed text = %v, want ErrConflict", err)
	}
	counts, _ := l.Counts(ctx)
	if counts[outbox.StatePending] != 1 {
		t.Fatalf("obligations = %v, want exactly one pending", counts)
	}
}

func TestRecordRefusesBadInputAndChangesNothing(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a")
	tests := []struct {
		name string
		m    outbox.NewMessage
		want string
	}{
		{"empty text", outbox.NewMessage{Platform: "p", ChatID: "c", Text: "  \n"}, "text is empty"},
		{"empty chat", outbox.NewMessage{Platform: "p", Text: "x"}, "chat_id is empty"},
		{"no platform", outbox.NewMessage{ChatID: "c", Text: "x"}, "platform is empty"},
		{"invalid utf-8", outbox.NewMessage{Platform: "p", ChatID: "c", Text: "\xff"}, "valid UTF-8"},
		{"huge key", outbox.NewMessage{Platform: "p", ChatID: "c", Text: "x", IdempotencyKey: strings.Repeat("k", 300)}, "idempotency_key is longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := l.Record(context.Background(), tt.m, split.Limit{})
			if !errors.Is(err, outbox.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Record = %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	counts, _ := l.Counts(context.Background())
	if len(counts) != 0 {
		t.Fatalf("bad input left rows: %v", counts)
	}
}

func TestALongTextBecomesOrderedPartsWithRoomForTheMarker(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a")
	text := strings.Repeat("word ", 1000) // 5000 characters
	limit := split.Limit{Max: 2000, Unit: split.UTF16}
	m, _, err := l.Record(context.Background(), outbox.NewMessage{Platform: "p", ChatID: "c", Text: text}, limit)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Parts) < 3 {
		t.Fatalf("%d parts, want at least 3", len(m.Parts))
	}
	keys := map[string]bool{}
	for i, p := range m.Parts {
		if p.Part != i || p.Parts != len(m.Parts) {
			t.Fatalf("part %d numbered %d/%d", i, p.Part, p.Parts)
		}
		if n := split.Length(outbox.Marker+p.Text, split.UTF16); n > 2000 {
			t.Fatalf("part %d with the marker is %d units, over the 2000 limit", i, n)
		}
		if keys[p.DeliveryKey] || len(p.DeliveryKey) > 25 {
			t.Fatalf("delivery key %q repeated or longer than Discord's 25", p.DeliveryKey)
		}
		keys[p.DeliveryKey] = true
	}
}

func TestOnlyTheHeadOfAChatIsClaimedAndChatsRunInParallel(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a")
	p := &platform{}
	a1 := record(t, l, "A", "a1", "")
	record(t, l, "A", "a2", "")
	b1 := record(t, l, "B", "b1", "")
	cs := claimAll(t, l, 10)
	var got []int64
	for _, c := range cs {
		got = append(got, c.MessageID)
	}
	if !slices.Equal(got, []int64{a1.ID, b1.ID}) {
		t.Fatalf("claimed messages %v, want the heads %v", got, []int64{a1.ID, b1.ID})
	}
	if more := claimAll(t, l, 10); len(more) != 0 {
		t.Fatalf("claimed %d more while each chat had one in flight", len(more))
	}
	for _, c := range cs {
		if c.Redelivery {
			t.Fatalf("first claim of a pending row marked as redelivery")
		}
		deliver(t, l, c, p)
	}
	next := claimAll(t, l, 10)
	if len(next) != 1 || next[0].Text != "a2" {
		t.Fatalf("after the heads settled, claimed %+v, want a2", next)
	}
}

func TestConcurrentClaimersTakeEachRowExactlyOnce(t *testing.T) {
	e := newEnv(t)
	seed := e.ledger("seed")
	for i := 0; i < 60; i++ {
		record(t, seed, fmt.Sprintf("chat-%d", i), "x", "")
	}
	var mu sync.Mutex
	seen := map[int64]string{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		l := e.ledger(fmt.Sprintf("owner-%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := l.Claim(context.Background(), 7, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					if prev, dup := seen[c.ID]; dup {
						t.Errorf("obligation %d claimed by %s and %s", c.ID, prev, c.Owner)
					}
					seen[c.ID] = c.Owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != 60 {
		t.Fatalf("%d rows claimed, want 60", len(seen))
	}
}

func TestAnAmbiguousFailureMarksTheNextCopy(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a", func(c *outbox.Config) { c.BackoffBase = time.Second })
	p := &platform{fail: []error{&outbox.SendError{Class: outbox.ClassAmbiguous, Err: errors.New("read timeout")}}}
	record(t, l, "c", "hello", "")
	c := claimAll(t, l, 1)[0]
	if oc := deliver(t, l, c, p); oc.State != outbox.StateFailed {
		t.Fatalf("state after an ambiguous failure = %s", oc.State)
	}
	if cs := claimAll(t, l, 1); len(cs) != 0 {
		t.Fatal("claimed a failed row before its backoff ended")
	}
	e.clk.Advance(time.Second)
	c = claimAll(t, l, 1)[0]
	if !c.Redelivery || c.Attempts != 2 || c.Ambiguous != 1 {
		t.Fatalf("retry claim: redelivery=%v attempts=%d ambiguous=%d", c.Redelivery, c.Attempts, c.Ambiguous)
	}
	deliver(t, l, c, p)
	if got := p.texts(); !slices.Equal(got, []string{outbox.Marker + "hello"}) {
		t.Fatalf("chat shows %q", got)
	}
	if !p.sent[0].Redelivery {
		t.Fatal("the adapter was not told the copy is a redelivery")
	}
}

func TestFailuresEndInTheRightState(t *testing.T) {
	perm := &outbox.SendError{Class: outbox.ClassPermanent, Err: errors.New("chat not found")}
	retry := &outbox.SendError{Class: outbox.ClassRetryable, Err: errors.New("connection refused")}
	tests := []struct {
		name      string
		fail      []error
		budget    int
		wantState outbox.State
		wantErr   string
	}{
		{"a permanent error abandons at once", []error{perm}, 5, outbox.StateAbandoned, "permanent platform error"},
		{"the last attempt of the budget abandons", []error{retry, retry}, 2, outbox.StateAbandoned, "attempt budget of 2 exhausted"},
		{"a retryable error leaves it failed", []error{retry}, 5, outbox.StateFailed, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			l := e.ledger("a", func(c *outbox.Config) { c.MaxAttempts = tt.budget })
			p := &platform{fail: tt.fail}
			m := record(t, l, "c", "x", "")
			for range tt.fail {
				cs := claimAll(t, l, 1)
				if len(cs) == 0 {
					break
				}
				deliver(t, l, cs[0], p)
				e.clk.Advance(time.Hour)
			}
			got, err := l.Get(context.Background(), m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.wantState || !strings.Contains(got.Error, tt.wantErr) {
				t.Fatalf("state %s error %q; want %s containing %q", got.State, got.Error, tt.wantState, tt.wantErr)
			}
		})
	}
}

func TestARateLimitHoldsTheChatForEveryProcess(t *testing.T) {
	e := newEnv(t)
	a := e.ledger("a")
	b := e.ledger("b")
	p := &platform{fail: []error{&outbox.SendError{Class: outbox.ClassRateLimited, RetryAfter: 30 * time.Second, Err: errors.New("429")}}}
	record(t, a, "c", "x", "")
	deliver(t, a, claimAll(t, a, 1)[0], p)
	e.clk.Advance(29 * time.Second)
	if cs := claimAll(t, b, 1); len(cs) != 0 {
		t.Fatal("another process claimed a chat inside its Retry-After")
	}
	e.clk.Advance(time.Second)
	if cs := claimAll(t, b, 1); len(cs) != 1 {
		t.Fatal("the chat stayed held after its Retry-After")
	}
}

func TestAZombieCannotSettleOverTheNewOwner(t *testing.T) {
	e := newEnv(t)
	a := e.ledger("a")
	b := e.ledger("b")
	p := &platform{}
	m := record(t, a, "c", "x", "")
	zombie := claimAll(t, a, 1)[0]
	e.clk.Advance(a.Config().Lease) // a stalls past its lease (still alive)
	taken := claimAll(t, b, 1)
	if len(taken) != 1 || !taken[0].Reclaimed || !taken[0].Redelivery {
		t.Fatalf("reclaim after lease expiry = %+v", taken)
	}
	deliver(t, b, taken[0], p)
	if _, err := a.Deliver(context.Background(), zombie, p); !errors.Is(err, outbox.ErrLeaseExpired) {
		t.Fatalf("zombie Deliver = %v, want ErrLeaseExpired", err)
	}
	if got := p.texts(); !slices.Equal(got, []string{outbox.Marker + "x"}) {
		t.Fatalf("chat shows %q: the zombie must not send", got)
	}
	got, _ := a.Get(context.Background(), m.ID)
	if got.State != outbox.StateDelivered || got.Parts[0].Owner != "" {
		t.Fatalf("row after zombie = %+v", got.Parts[0])
	}
}

func TestAStaleFenceIsRefused(t *testing.T) {
	e := newEnv(t)
	a := e.ledger("a")
	b := e.ledger("b")
	p := &platform{}
	record(t, a, "c", "x", "")
	old := claimAll(t, a, 1)[0]
	e.live.kill("a")
	newer := claimAll(t, b, 1)
	if len(newer) != 1 {
		t.Fatal("a dead owner's row was not reclaimed at once")
	}
	// The old claim's send already happened; only its settle arrives late.
	_, err := a.Deliver(context.Background(), old, p)
	if !errors.Is(err, outbox.ErrStaleFence) {
		t.Fatalf("late settle = %v, want ErrStaleFence", err)
	}
	deliver(t, b, newer[0], p)
}

func TestADeadOwnersRowIsRedeliveredMarkedByTheBootSweep(t *testing.T) {
	e := newEnv(t)
	a := e.ledger("a")
	p := &platform{}
	m := record(t, a, "c", "x", "")
	record(t, a, "other", "fresh", "")
	claimAll(t, a, 1) // a claims the first row, then dies before sending
	e.live.kill("a")
	b := e.ledger("b")
	rep, err := b.BootSweep(context.Background(), func(string) (outbox.Sender, bool) { return p, true }, 4)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Claimed != 1 || rep.Delivered != 1 {
		t.Fatalf("boot sweep report %+v; want the one orphan, not the pending row", rep)
	}
	if got := p.texts(); !slices.Equal(got, []string{outbox.Marker + "x"}) {
		t.Fatalf("chat shows %q", got)
	}
	got, _ := b.Get(context.Background(), m.ID)
	if got.State != outbox.StateDelivered || got.Parts[0].Ambiguous != 1 {
		t.Fatalf("recovered row = %+v", got.Parts[0])
	}
}

func TestTerminalRowsNeverChange(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a")
	record(t, l, "c", "x", "")
	deliver(t, l, claimAll(t, l, 1)[0], &platform{})
	_, err := l.DB().Exec(context.Background(), `UPDATE obligations SET state = 'pending'`)
	if err == nil || !strings.Contains(err.Error(), "obligation is terminal") {
		t.Fatalf("update of a delivered row = %v, want the trigger's refusal", err)
	}
}

func TestAgeLimitAndRetention(t *testing.T) {
	e := newEnv(t)
	l := e.ledger("a", func(c *outbox.Config) { c.MaxAge = time.Hour; c.Retention = 2 * time.Hour })
	ctx := context.Background()
	done := record(t, l, "c1", "delivered", "")
	deliver(t, l, claimAll(t, l, 1)[0], &platform{})
	stuck := record(t, l, "unknown", "never sent", "")
	e.clk.Advance(time.Hour + time.Second)
	if n, err := l.AbandonExpired(ctx); err != nil || n != 1 {
		t.Fatalf("AbandonExpired = %d, %v; want 1", n, err)
	}
	got, _ := l.Get(ctx, stuck.ID)
	if got.State != outbox.StateAbandoned || !strings.Contains(got.Error, "age limit") {
		t.Fatalf("stuck message = %s %q", got.State, got.Error)
	}
	if n, _ := l.Prune(ctx); n != 0 {
		t.Fatalf("pruned %d inside the retention", n)
	}
	e.clk.Advance(2*time.Hour + time.Second)
	if n, err := l.Prune(ctx); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	if _, err := l.Get(ctx, done.ID); !errors.Is(err, outbox.ErrNotFound) {
		t.Fatalf("pruned message still readable: %v", err)
	}
}

func TestARetryAfterAProvenMissIsNotMarked(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"a 429", &outbox.SendError{Class: outbox.ClassRateLimited, RetryAfter: time.Second, Err: errors.New("429")}},
		{"a refused connection", &outbox.SendError{Class: outbox.ClassRetryable, Err: errors.New("connection refused")}},
	}
	for _, tt := range tests {
		t.Run("after "+tt.name, func(t *testing.T) {
			e := newEnv(t)
			l := e.ledger("a")
			p := &platform{fail: []error{tt.err}}
			record(t, l, "c", "only once", "")
			deliver(t, l, claimAll(t, l, 1)[0], p)
			e.clk.Advance(time.Hour)
			c := claimAll(t, l, 1)[0]
			if c.Redelivery {
				t.Fatal("the retry is marked although no earlier copy can have landed")
			}
			deliver(t, l, c, p)
			if got := p.texts(); !slices.Equal(got, []string{"only once"}) {
				t.Fatalf("chat shows %q", got)
			}
		})
	}
}
