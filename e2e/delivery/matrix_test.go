package delivery_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"herald/e2e/harness"
	"herald/fakeplatform"
)

// matrixConcurrency bounds the cells running at once. A cell is two or
// three child processes that mostly wait (on send timeouts, backoffs and
// fsyncs), so six fit two CPU cores.
//
// The cells are concurrent t.Run calls from a bounded pool rather than
// t.Parallel subtests: t.Parallel would cap them at -parallel, which
// defaults to GOMAXPROCS (2 on the machines this must fit), and the matrix
// would take twice as long for no gain.
const matrixConcurrency = 6

// matrixSecret is the webhook receiver's Standard Webhooks secret (the
// reference libraries' test secret).
const matrixSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// matrixReceiver is the name of the webhook receiver herald delivers to.
const matrixReceiver = "herald"

// matrixPlatform is one column of the matrix: a platform herald delivers to
// and what it promises.
type matrixPlatform struct {
	name string
	// keyHonoured: the platform deduplicates on the idempotency key, so
	// every obligation shows exactly once.
	keyHonoured bool
	// limit is the platform's text limit, in UTF-16 code units (bytes when
	// bytes is set).
	limit int
	bytes bool
}

func (p matrixPlatform) length(s string) int {
	if p.bytes {
		return len(s)
	}
	return fakeplatform.UTF16Len(s)
}

// profile is the fake's profile of the platform's sends (journal and faults).
func (p matrixPlatform) profile() string {
	if p.name == "webhook" {
		return fakeplatform.ProfileWebhook
	}
	return p.name
}

var matrixPlatforms = []matrixPlatform{
	{name: "telegram", limit: 4096},
	{name: "discord", keyHonoured: true, limit: 2000},
	{name: "webhook", keyHonoured: true, limit: 16384, bytes: true},
}

// matrixPoints are the delivery fault points (SPEC §7). The boot ones are
// reached by first leaving orphans with a kill at outbox.sent.
var matrixPoints = []string{"outbox.recorded", "outbox.claimed", "outbox.sent", "outbox.settled", "boot.claimed", "boot.sent"}

// matrixKinds are the platform faults: the ambiguous ones (a send that may
// have landed) and those that prove it did not.
var matrixKinds = []fakeplatform.FaultKind{
	fakeplatform.FaultTimeoutBeforeAccept, fakeplatform.FaultAckLost, fakeplatform.FaultRateLimit,
	fakeplatform.FaultServerError, fakeplatform.FaultReset,
}

const (
	matrixMessages = 12
	matrixChats    = 3
)

// matrixLong are the indexes of the messages longer than the platform's
// limit: one per chat.
var matrixLong = map[int]bool{1: true, 5: true, 9: true}

// TestDeliveryMatrix crosses every delivery fault point with every platform
// and every platform fault kind. In each cell herald delivers 12 messages
// (three of them longer than the platform's limit) over 3 chats while the
// fake fails a few sends; herald is SIGKILLed at the fault point (for the
// boot points: first at outbox.sent, to leave orphans, then again inside
// the boot sweep's own redelivery, and booted once more), restarted, and
// the ledger and the journal must agree with every delivery invariant.
// A cell fails, with the seed, if its fault point or its platform faults
// never fired. -short runs one fault kind per point and platform.
func TestDeliveryMatrix(t *testing.T) {
	master := seed(t)
	bins := harness.Build(t)
	start := time.Now()
	sem := make(chan struct{}, matrixConcurrency)
	var wg sync.WaitGroup
	row := 0
	for _, plat := range matrixPlatforms {
		for _, point := range matrixPoints {
			row++
			for k, kind := range matrixKinds {
				if testing.Short() && k != row%len(matrixKinds) {
					continue
				}
				c := matrixCell{plat: plat, point: point, kind: kind, master: master}
				c.name = plat.name + "/" + point + "/" + string(kind)
				c.seed = cellSeed(master, c.name)
				wg.Add(1)
				go func() {
					defer wg.Done()
					sem <- struct{}{}
					defer func() { <-sem }()
					t.Run(c.name, func(t *testing.T) { c.run(t, bins) })
				}()
			}
		}
	}
	wg.Wait()
	t.Logf("matrix done in %s", time.Since(start).Round(time.Millisecond))
}

// cellSeed derives a cell's randomness from the run's seed and its name, so
// one HERALD_SEED reproduces every cell, alone or with the others.
func cellSeed(master uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return master ^ h.Sum64()
}

// matrixCell is one cell of the matrix.
type matrixCell struct {
	name   string
	plat   matrixPlatform
	point  string
	kind   fakeplatform.FaultKind
	master uint64
	seed   uint64
}

func (c matrixCell) boot() bool { return strings.HasPrefix(c.point, "boot.") }

func (c matrixCell) reproduce() string {
	return fmt.Sprintf("seed %d (cell seed %d); reproduce with HERALD_SEED=%d go test -count=1 -run 'TestDeliveryMatrix/%s' ./e2e/delivery/",
		c.master, c.seed, c.master, c.name)
}

func (c matrixCell) run(t *testing.T, bins harness.Binaries) {
	// fail ends the cell with the violated invariant, the seed and how to
	// reproduce it; failures inside shared helpers (settle,
	// checkQuietRestart, the harness) get the seed from the cleanup.
	reported := false
	fail := func(format string, args ...any) {
		t.Helper()
		reported = true
		t.Fatalf("%s\n%s", fmt.Sprintf(format, args...), c.reproduce())
	}
	t.Cleanup(func() {
		if t.Failed() && !reported {
			t.Log(c.reproduce())
		}
	})
	r := rand.New(rand.NewPCG(c.seed, 7))
	dir := t.TempDir()
	fake := harness.StartWebhookFake(t, bins, dir, matrixSecret)
	spec := "chat=" + fake.PlatformURL(c.plat.name)
	if c.plat.name == "webhook" {
		spec = "chat=" + fake.WebhookPlatformURL(matrixReceiver, matrixSecret)
	}
	env := append(fastEnv(spec), fmt.Sprintf("HERALD_SEED=%d", c.seed))
	h := harness.NewHerald(bins, filepath.Join(dir, "home"), env...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	msgs, chats := c.messages(r)
	armed := 0
	arm := func(chat string, count int) {
		t.Helper()
		f := fakeplatform.Fault{Op: fakeplatform.OpSend, Profile: c.plat.profile(), ChatID: chat, Kind: c.kind, Count: count, RetryAfter: 0.2}
		if err := fake.Arm(ctx, f); err != nil {
			fail("arm %s: %v", c.kind, err)
		}
		armed += count
	}
	// Two faulted sends in one chat while the first process runs…
	arm(chats[r.IntN(len(chats))], 2)

	hit := 2 + r.IntN(5)
	first := c.point
	if c.boot() {
		first = "outbox.sent" // leave rows attempting for a dead owner
	}
	n := h.Start(t, fmt.Sprintf("HERALD_FAULTS=%s@%d=kill", first, hit))
	p := &poster{}
	p.set(n)
	posted := make(chan struct{})
	go func() { postAll(ctx, t, p, msgs); close(posted) }()
	// A failing cell ends the posters before it returns: they report
	// through t, which must not outlive the cell.
	defer func() { cancel(); <-posted }()
	if err := killedAt(ctx, n, first); err != nil {
		fail("first kill: %v", err)
	}
	// The owners whose claims a kill left behind: a later process must
	// reclaim them (an attempt recorded "lost" under their owner id).
	var orphaners []string
	if first == "outbox.claimed" || first == "outbox.sent" {
		orphaners = append(orphaners, ownerOf(t, n))
	}
	// …and one more on whichever send comes next: the boot sweep's
	// redelivery, or the restarted process's first send.
	arm("", 1)

	if c.boot() {
		// The boot sweep finds the orphans and dies inside its own
		// redelivery (boot.claimed: claimed, unsent; boot.sent: sent,
		// unsettled); the next boot must claim them again and finish.
		b := h.StartNoWait(t, "HERALD_FAULTS="+c.point+"=kill")
		if err := killedAt(ctx, b, c.point); err != nil {
			fail("kill inside the boot sweep: %v", err)
		}
		orphaners = append(orphaners, ownerOf(t, b))
	}
	final := h.Start(t)
	claimed, err := final.BootClaimed(ctx)
	if err != nil {
		fail("boot sweep after the kill: %v", err)
	}
	if len(orphaners) > 0 && claimed == 0 {
		fail("the boot after a SIGKILL at %s claimed nothing: the orphaned claims were not redelivered by a boot", c.point)
	}
	p.set(final)
	select {
	case <-posted:
	case <-ctx.Done():
		fail("posting the messages: %v", ctx.Err())
	}
	if t.Failed() {
		fail("posting the messages failed")
	}

	rows := settle(t, h.Home, time.Minute)
	final.Stop(t)
	entries, err := fake.Entries()
	if err != nil {
		fail("read journal: %v", err)
	}
	stats, err := fake.Counters(ctx)
	if err != nil {
		fail("fake stats: %v", err)
	}
	attempts, err := readAttempts(ctx, h.Home)
	if err != nil {
		fail("read attempts: %v", err)
	}
	bad := c.check(rows, entries, stats, armed)
	for _, owner := range orphaners {
		if !reclaimed(attempts, owner) {
			bad = append(bad, fmt.Sprintf("no claim of owner %s (SIGKILLed at %s) was reclaimed: its orphan was never redelivered", owner, c.point))
		}
	}
	if len(bad) > 0 {
		fail("after a SIGKILL at %s (hit %d) with %s faults: %d violations:\n%s",
			c.point, hit, c.kind, len(bad), harness.Report(bad))
	}
	if left, err := fake.Armed(ctx); err != nil || len(left) > 0 {
		fail("armed platform faults never fired: %+v (%v)", left, err)
	}
	kills := fmt.Sprintf("%s@%d", first, hit)
	if c.boot() {
		kills += " then " + c.point + " in the boot sweep"
	}
	t.Logf("killed at %s; %d obligations, %d copies, %d deduplicated, %d %s fired, last boot claimed %d",
		kills, len(rows), len(entries), stats.Deduplicated, stats.FaultsFired[c.kind], c.kind, claimed)
	checkQuietRestart(t, h, fake)
}

var ownerLine = regexp.MustCompile(`msg="boot sweep starting" owner=(\S+)`)

// ownerOf returns the owner id of a herald process, from its boot log.
func ownerOf(t *testing.T, n *harness.Node) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := n.WaitLine(ctx, ownerLine)
	if err != nil {
		t.Fatal(err)
	}
	return m[1]
}

func readAttempts(ctx context.Context, home string) ([]harness.Attempt, error) {
	l, err := harness.OpenLedger(home)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Attempts(ctx)
}

// reclaimed reports whether a claim of owner was taken over: an attempt
// recorded lost under its owner id.
func reclaimed(attempts []harness.Attempt, owner string) bool {
	for _, a := range attempts {
		if a.Outcome == "lost" && a.Owner == owner {
			return true
		}
	}
	return false
}

// check returns every violated invariant of a settled cell.
func (c matrixCell) check(rows []harness.Row, entries []fakeplatform.Entry, stats fakeplatform.Stats, armed int) []string {
	bad := harness.CheckDelivery(rows, entries, harness.DeliveryExpect{AllDelivered: true, KeyHonoured: c.plat.keyHonoured})
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	parts := map[int64]int{}
	for _, r := range rows {
		parts[r.MessageID] = r.Parts
	}
	split := 0
	for _, n := range parts {
		if n > 1 {
			split++
		}
	}
	if len(parts) != matrixMessages || split != len(matrixLong) {
		add("the ledger holds %d messages, %d of them split; want %d, %d split (the long ones)", len(parts), split, matrixMessages, len(matrixLong))
	}
	for _, e := range entries {
		if e.Profile != c.plat.profile() || (c.plat.name == "webhook") != (e.Receiver == matrixReceiver) {
			add("journal seq %d went to profile %q receiver %q", e.Seq, e.Profile, e.Receiver)
		}
		if l := c.plat.length(e.Text); l > c.plat.limit {
			add("journal seq %d is %d long, over the %s limit of %d", e.Seq, l, c.plat.name, c.plat.limit)
		}
	}

	// The platform faults fired, all of them and nothing else.
	for kind, n := range stats.FaultsFired {
		want := int64(0)
		if kind == c.kind {
			want = int64(armed)
		}
		if n != want {
			add("the fake fired %d %s faults, want %d (every armed one)", n, kind, want)
		}
	}
	// A lost ack lands the send: herald's retry must show as a marked
	// copy (no dedup) or be deduplicated (key honoured).
	if c.kind == fakeplatform.FaultAckLost {
		marked := 0
		for _, e := range entries {
			if e.Redelivery {
				marked++
			}
		}
		switch {
		case c.plat.keyHonoured && stats.Deduplicated < int64(armed):
			add("%d lost acks but only %d deduplicated retries", armed, stats.Deduplicated)
		case !c.plat.keyHonoured && marked < armed:
			add("%d lost acks but only %d marked copies", armed, marked)
		}
	}
	return bad
}

// messages returns the cell's messages (three chats; one long message per
// chat, over the platform's limit) and its chats.
func (c matrixCell) messages(r *rand.Rand) ([]harness.Message, []string) {
	chats := make([]string, matrixChats)
	for i := range chats {
		chats[i] = fmt.Sprintf("c%d", i)
	}
	msgs := make([]harness.Message, matrixMessages)
	for i := range msgs {
		msgs[i] = harness.Message{Platform: "chat", ChatID: chats[i%matrixChats], Text: c.text(r, i), IdempotencyKey: fmt.Sprintf("m%02d", i)}
	}
	return msgs, chats
}

// matrixPieces stress encodings and splitting: emoji (two UTF-16 units,
// four bytes, ZWJ sequences, flags, skin tones), CJK (three bytes), RTL,
// combining marks, Markdown.
var matrixPieces = []string{
	"Deploy finished ✅ 🚀 in 42s",
	"家族で旅行に行きました。東京タワーが見えます。",
	"مرحبا بالعالم — שלום עולם",
	"Zoë and Åsa said cafe\u0301 ñ — à bientôt",
	"👩‍👩‍👧‍👦 family, 🇯🇵 flag, 👍🏽 tone",
	"**bold** _italic_ `code` [link](https://example.com)",
	"长城很长。한국어 문장도 있습니다。",
}

// text returns message i: a few pieces, or, for the long ones, pieces and a
// code fence until it is 1.25 to 2.25 times the platform's limit.
func (c matrixCell) text(r *rand.Rand, i int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d ", i)
	if !matrixLong[i] {
		for k, n := 0, 1+r.IntN(3); k < n; k++ {
			b.WriteString(matrixPieces[r.IntN(len(matrixPieces))] + "\n")
		}
		return b.String()
	}
	target := c.plat.limit + c.plat.limit/4 + r.IntN(c.plat.limit)
	for k := 0; c.plat.length(b.String()) < target; k++ {
		switch {
		case k%25 == 24:
			b.WriteString("```\n" + strings.Repeat("log line 日志 with some words 🪵\n", 8) + "```\n\n")
		case k%5 == 4:
			b.WriteString(matrixPieces[r.IntN(len(matrixPieces))] + "\n\n")
		default:
			b.WriteString(matrixPieces[r.IntN(len(matrixPieces))] + "\n")
		}
	}
	if !utf8.ValidString(b.String()) {
		panic("matrix text is not UTF-8")
	}
	return b.String()
}

// killedAt waits until n logs that the fault point fired and dies of
// SIGKILL; it fails if the point never fired.
func killedAt(ctx context.Context, n *harness.Node, point string) error {
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := n.WaitLine(wait, regexp.MustCompile(`^faultpoint: `+regexp.QuoteMeta(point)+` hit \d+: kill`)); err != nil {
		return fmt.Errorf("the armed fault point %s never fired: %w", point, err)
	}
	if err := n.Wait(wait); err != nil {
		return err
	}
	if !n.ExitedBySignal(syscall.SIGKILL) {
		return fmt.Errorf("%s exited %v, want SIGKILL at %s", n.Name, n.ExitErr(), point)
	}
	return nil
}
