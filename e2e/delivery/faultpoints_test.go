package delivery_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"herald/e2e/harness"
)

// postAll posts msgs through p (retrying through kills) and returns when all
// are accepted or ctx ends.
func postAll(ctx context.Context, t *testing.T, p *poster, msgs []harness.Message) {
	t.Helper()
	byChat := map[string][]harness.Message{}
	for _, m := range msgs {
		byChat[m.ChatID] = append(byChat[m.ChatID], m)
	}
	var wg sync.WaitGroup
	for _, ms := range byChat {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range ms {
				if err := p.post(ctx, m); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func messages(prefix string, n, chats int) []harness.Message {
	var out []harness.Message
	for i := 0; i < n; i++ {
		out = append(out, harness.Message{Platform: "chat", ChatID: fmt.Sprintf("%s-c%d", prefix, i%chats),
			Text: fmt.Sprintf("%s message %d ✉️", prefix, i), IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i)})
	}
	return out
}

// waitKilledAt waits for n to die of SIGKILL at the named fault point.
func waitKilledAt(t *testing.T, n *harness.Node, point string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := n.WaitLine(ctx, regexp.MustCompile(`^faultpoint: `+regexp.QuoteMeta(point)+` hit \d+: kill`)); err != nil {
		t.Fatalf("the armed fault point %s never fired: %v", point, err)
	}
	if err := n.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !n.ExitedBySignal(syscall.SIGKILL) {
		t.Fatalf("%s exited %v, want SIGKILL at %s", n.Name, n.ExitErr(), point)
	}
}

// TestKillAtEachDeliveryFaultPoint SIGKILLs herald inside each crash window
// of the delivery protocol, restarts it, and checks the invariants.
func TestKillAtEachDeliveryFaultPoint(t *testing.T) {
	bins := harness.Build(t)
	for _, profile := range []string{"telegram", "discord"} {
		for _, point := range []string{"outbox.recorded", "outbox.claimed", "outbox.sent", "outbox.settled", "boot.claimed", "boot.sent"} {
			t.Run(profile+"/"+point, func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				fake := harness.StartFake(t, bins, dir)
				h := harness.NewHerald(bins, filepath.Join(dir, "home"), fastEnv("chat="+fake.PlatformURL(profile))...)
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				p := &poster{}
				msgs := messages("m", 24, 4)

				first := point
				if point == "boot.claimed" || point == "boot.sent" {
					first = "outbox.sent" // leave rows attempting for a dead owner
				}
				n := h.Start(t, "HERALD_FAULTS="+first+"@5=kill")
				p.set(n)
				done := make(chan struct{})
				go func() { postAll(ctx, t, p, msgs); close(done) }()
				waitKilledAt(t, n, first)

				if first != point {
					// The boot sweep finds the orphans and dies inside its own
					// redelivery; the next boot must finish the job.
					b := h.StartNoWait(t, "HERALD_FAULTS="+point+"=kill")
					waitKilledAt(t, b, point)
				}
				p.set(h.Start(t))
				<-done
				rows := settle(t, h.Home, 2*time.Minute)
				p.node.Stop(t)
				entries, err := fake.Entries()
				if err != nil {
					t.Fatal(err)
				}
				exp := harness.DeliveryExpect{AllDelivered: true, KeyHonoured: profile == "discord"}
				if bad := harness.CheckDelivery(rows, entries, exp); len(bad) > 0 {
					t.Fatalf("after a SIGKILL at %s: %d violations:\n%s", point, len(bad), harness.Report(bad))
				}
				if len(rows) != len(msgs) {
					t.Fatalf("%d obligations for %d messages", len(rows), len(msgs))
				}
				checkQuietRestart(t, h, fake)
			})
		}
	}
}

// TestConcurrentRebootersClaimEachRowOnce leaves 12 rows attempting for a
// dead owner, then boots three processes at once on the same data
// directory: each row must be claimed by exactly one of them.
func TestConcurrentRebootersClaimEachRowOnce(t *testing.T) {
	bins := harness.Build(t)
	dir := t.TempDir()
	fake := harness.StartFake(t, bins, dir)
	env := fastEnv("chat=" + fake.PlatformURL("telegram"))
	env = append(env, "HERALD_SEND_TIMEOUT=20s", "HERALD_LEASE=60s")
	h := harness.NewHerald(bins, filepath.Join(dir, "home"), env...)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := fake.AddFault(ctx, harness.Fault{Op: "send", Kind: "timeout_before_accept", Count: 12}); err != nil {
		t.Fatal(err)
	}
	n := h.Start(t)
	for _, m := range messages("r", 12, 12) {
		if _, status, err := n.Post(ctx, m); err != nil || status != 202 {
			t.Fatalf("post: %d %v", status, err)
		}
	}
	l, err := harness.OpenLedger(h.Home)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = harness.Eventually(ctx, "12 sends held by the platform", func() error {
		st, err := fake.Stats(ctx)
		if err != nil {
			return err
		}
		if held, _ := st["held"].(float64); held != 12 {
			return fmt.Errorf("%v held", held)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n.Kill()

	nodes := make([]*harness.Node, 3)
	for i := range nodes {
		nodes[i] = h.StartNoWait(t)
	}
	total := 0
	for _, b := range nodes {
		if err := b.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		c, err := b.BootClaimed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total += c
	}
	rows := settle(t, h.Home, time.Minute)
	for _, b := range nodes {
		b.Stop(t)
	}
	t.Logf("boot sweeps claimed %d rows; %d obligations settled", total, len(rows))
	if total != 12 {
		t.Fatalf("the three boot sweeps claimed %d rows in all, want 12", total)
	}
	attempts, err := l.Attempts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[int64]int{}
	for _, a := range attempts {
		if a.Outcome == "lost" {
			lost[a.ObligationID]++
		}
	}
	for _, r := range rows {
		if lost[r.ID] != 1 || r.FencingToken != 2 || r.Attempts != 2 {
			t.Errorf("obligation %d: %d reclaims, fencing token %d, attempts %d; want one reclaim, token 2, 2 attempts",
				r.ID, lost[r.ID], r.FencingToken, r.Attempts)
		}
	}
	entries, err := fake.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if bad := harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true}); len(bad) > 0 {
		t.Fatalf("%d violations:\n%s", len(bad), harness.Report(bad))
	}
	if len(entries) != 12 {
		t.Fatalf("the chats show %d copies, want 12 (one marked redelivery each)", len(entries))
	}
}

// TestAStalledOwnerIsReclaimedOnlyAfterItsLease SIGSTOPs an owner that
// holds a claim: another process must wait out the lease (the stopped owner
// still holds its lock), then redeliver; when the stalled owner resumes it
// must neither send nor settle over the new owner.
func TestAStalledOwnerIsReclaimedOnlyAfterItsLease(t *testing.T) {
	bins := harness.Build(t)
	dir := t.TempDir()
	fake := harness.StartFake(t, bins, dir)
	h := harness.NewHerald(bins, filepath.Join(dir, "home"), fastEnv("chat="+fake.PlatformURL("telegram"))...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gate := filepath.Join(dir, "gate")
	a := h.Start(t, "HERALD_FAULTS=outbox.claimed=pause:"+gate)
	if _, status, err := a.Post(ctx, harness.Message{Platform: "chat", ChatID: "c", Text: "only once", IdempotencyKey: "k"}); err != nil || status != 202 {
		t.Fatalf("post: %d %v", status, err)
	}
	if _, err := a.WaitLine(ctx, regexp.MustCompile(`^faultpoint: outbox.claimed hit 1: pause`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stoppedAt := time.Now()
	b := h.Start(t)
	rows := settle(t, h.Home, time.Minute)
	if waited := time.Since(stoppedAt); waited < 3*time.Second {
		t.Fatalf("the row was reclaimed %s after the owner stalled, before its 4s lease", waited)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitLine(ctx, regexp.MustCompile(`lease expired before send`)); err != nil {
		t.Fatal(err)
	}
	a.Stop(t)
	b.Stop(t)
	entries, err := fake.Entries()
	if err != nil {
		t.Fatal(err)
	}
	if bad := harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true}); len(bad) > 0 {
		t.Fatalf("%d violations:\n%s", len(bad), harness.Report(bad))
	}
	if len(entries) != 1 || !entries[0].Redelivery {
		t.Fatalf("the chat shows %d copies (%+v), want the new owner's one marked copy", len(entries), entries)
	}
	final, _ := harness.OpenLedger(h.Home)
	defer final.Close()
	after, err := final.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after[0].State != "delivered" || after[0].FencingToken != 2 {
		t.Fatalf("row after the zombie resumed: %+v", after[0])
	}
}
