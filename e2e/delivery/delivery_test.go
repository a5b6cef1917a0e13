// Package delivery_test is the messaging suite: the real herald and fake
// platform as child processes, SIGKILLed at random moments and at every
// delivery fault point, checked against the delivery invariants.
package delivery_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/e2e/harness"
)

// seed is the run's randomness; a failure prints it.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("HERALD_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HERALD_SEED=%q: %v", v, err)
		}
		s = n
	}
	t.Logf("seed %d (reproduce with HERALD_SEED=%d)", s, s)
	return s
}

// fastEnv makes retries and leases short enough for a test run.
func fastEnv(platformSpec string) []string {
	return []string{
		"HERALD_PLATFORMS=" + platformSpec,
		"HERALD_RETRY_BASE=20ms", "HERALD_RETRY_MAX=400ms",
		"HERALD_SEND_TIMEOUT=1500ms", "HERALD_LEASE=4s",
		"HERALD_POLL_INTERVAL=100ms", "HERALD_MAX_ATTEMPTS=60",
		"HERALD_CONCURRENCY=32", "HERALD_DRAIN_TIMEOUT=5s",
	}
}

// corpus returns message texts that stress splitting and encoding: emoji,
// CJK, right-to-left, combining marks, Markdown, code fences, and texts over
// 8,000 characters.
func corpus(r *rand.Rand, i int) string {
	pieces := []string{
		"Deploy finished ✅ 🚀 in 42s",
		"家族で旅行に行きました。東京タワーが見えます。",
		"مرحبا بالعالم — שלום עולם",
		"Zoë and Åsa said cafe\u0301 ñ — à bientôt",
		"👩‍👩‍👧‍👦 family, 🇯🇵 flag, 👍🏽 tone",
		"**bold** _italic_ `code` [link](https://example.com)",
		"```go\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n```",
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", i)
	n := 1 + r.IntN(3)
	if i%40 == 7 { // a long one: several parts under telegram's 4096
		n = 60 + r.IntN(40)
	}
	for k := 0; k < n; k++ {
		b.WriteString(pieces[r.IntN(len(pieces))])
		if k%5 == 4 {
			b.WriteString("\n\n")
		} else {
			b.WriteString("\n")
		}
	}
	if i%40 == 7 {
		b.WriteString("```\n" + strings.Repeat("log line with some words in it\n", 120) + "```\n")
	}
	return b.String()
}

// settle waits until herald has recorded `want` messages and every
// obligation is terminal.
func settle(t *testing.T, home string, timeout time.Duration) []harness.Row {
	t.Helper()
	l, err := harness.OpenLedger(home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = harness.Eventually(ctx, "every obligation terminal", func() error {
		open, total, err := l.Open(ctx)
		if err != nil {
			return err
		}
		if open > 0 {
			return fmt.Errorf("%d of %d obligations open", open, total)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.IntegrityCheck(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := l.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bad := harness.CheckTermination(nil, rows); len(bad) > 0 {
		t.Fatalf("termination: %d violations:\n%s", len(bad), harness.Report(bad))
	}
	return rows
}

// checkQuietRestart restarts herald on a settled home and checks that it
// claims and sends nothing.
func checkQuietRestart(t *testing.T, h *harness.Herald, fake *harness.Fake) {
	t.Helper()
	before, err := fake.Entries()
	if err != nil {
		t.Fatal(err)
	}
	n := h.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	claimed, err := n.BootClaimed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n.Stop(t)
	after, err := fake.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if claimed != 0 || len(after) != len(before) {
		t.Fatalf("a restart with nothing in flight claimed %d rows and sent %d copies", claimed, len(after)-len(before))
	}
}

// poster sends messages to whichever herald node is current, retrying with
// the same idempotency key through kills and restarts.
type poster struct {
	mu       sync.Mutex
	node     *harness.Node
	accepted atomic.Int64
}

func (p *poster) set(n *harness.Node) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.node = n
}

func (p *poster) post(ctx context.Context, m harness.Message) error {
	for {
		p.mu.Lock()
		n := p.node
		p.mu.Unlock()
		if n != nil && !n.Exited() {
			_, status, err := n.Post(ctx, m)
			if err == nil && (status == 202 || status == 200) {
				p.accepted.Add(1)
				return nil
			}
			if err == nil && status != 503 {
				return fmt.Errorf("POST %s: status %d", m.IdempotencyKey, status)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The node is down or restarting: wait for the driver to swap it.
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		<-waitCtx.Done()
		cancel()
	}
}

// runSoak posts total messages over chats to a fake profile while the
// driver injects platform faults and SIGKILLs herald kills times.
func runSoak(t *testing.T, profile string, total, chats, kills int, exp harness.DeliveryExpect) {
	s := seed(t)
	r := rand.New(rand.NewPCG(s, 1))
	bins := harness.Build(t)
	dir := t.TempDir()
	fake := harness.StartFake(t, bins, dir)
	h := harness.NewHerald(bins, filepath.Join(dir, "home"), fastEnv("chat="+fake.PlatformURL(profile))...)
	h.Env = append(h.Env, fmt.Sprintf("HERALD_SEED=%d", s))

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	p := &poster{}
	p.set(h.Start(t))

	texts := make([]string, total)
	for i := range texts {
		texts[i] = corpus(r, i)
	}
	// One poster per chat keeps each chat's acceptance order meaningful.
	var wg sync.WaitGroup
	errs := make(chan error, chats)
	for c := 0; c < chats; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < total; i += chats {
				m := harness.Message{Platform: "chat", ChatID: fmt.Sprintf("c%02d", c), Text: texts[i], IdempotencyKey: fmt.Sprintf("m%05d", i)}
				if err := p.post(ctx, m); err != nil {
					errs <- err
					return
				}
			}
		}()
	}

	kinds := []string{"timeout_before_accept", "ack_lost", "rate_limit", "server_error", "reset"}
	killAt := map[int64]bool{}
	for len(killAt) < kills {
		killAt[int64(total/10+r.IntN(total*7/10))] = true
	}
	killsDone := 0
	var nextFault int64
	err := harness.Eventually(ctx, "all messages accepted", func() error {
		acc := p.accepted.Load()
		if acc >= nextFault {
			nextFault = acc + int64(total/60)
			f := harness.Fault{Op: "send", Kind: kinds[r.IntN(len(kinds))], Count: 1 + r.IntN(3),
				ChatID: fmt.Sprintf("c%02d", r.IntN(chats)), RetryAfter: 0.2}
			if r.IntN(3) == 0 {
				f.ChatID = "" // any chat
			}
			if err := fake.AddFault(ctx, f); err != nil {
				return err
			}
		}
		for at := range killAt {
			if acc >= at {
				delete(killAt, at)
				p.mu.Lock()
				p.node.Kill()
				p.mu.Unlock()
				killsDone++
				t.Logf("SIGKILL %d after %d accepted", killsDone, acc)
				p.set(h.Start(t))
			}
		}
		if acc < int64(total) {
			return fmt.Errorf("%d of %d accepted", acc, total)
		}
		return nil
	})
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	if killsDone < kills {
		t.Fatalf("only %d of %d kills happened", killsDone, kills)
	}
	rows := settle(t, h.Home, 5*time.Minute)
	p.node.Stop(t)
	entries, err := fake.Entries()
	if err != nil {
		t.Fatal(err)
	}
	msgs := map[int64]bool{}
	for _, row := range rows {
		msgs[row.MessageID] = true
	}
	if len(msgs) != total {
		t.Fatalf("ledger holds %d messages, want %d", len(msgs), total)
	}
	if bad := harness.CheckDelivery(rows, entries, exp); len(bad) > 0 {
		t.Fatalf("seed %d: %d delivery invariant violations:\n%s", s, len(bad), harness.Report(bad))
	}
	stats, _ := fake.Stats(ctx)
	t.Logf("%d messages, %d obligations, %d copies in the journal; fake stats %v", total, len(rows), len(entries), stats)
	checkQuietRestart(t, h, fake)
}

// TestTelegramSoakWithFaultsAndKills is the real run: 2,000
// messages over 50 chats to a telegram-profile fake (no idempotency) with
// timeouts, lost acks, 429s, 500s and resets, while herald is SIGKILLed at
// random moments and restarted.
func TestTelegramSoakWithFaultsAndKills(t *testing.T) {
	total := 2000
	if testing.Short() {
		total = 300
	}
	runSoak(t, "telegram", total, 50, 3, harness.DeliveryExpect{AllDelivered: true})
}

// TestDiscordSoakIsExactlyOnce: with the key honoured, every obligation
// shows exactly once, whatever the faults and kills.
func TestDiscordSoakIsExactlyOnce(t *testing.T) {
	total := 1000
	if testing.Short() {
		total = 200
	}
	runSoak(t, "discord", total, 25, 3, harness.DeliveryExpect{AllDelivered: true, KeyHonoured: true})
}
