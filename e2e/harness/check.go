package harness

import (
	"fmt"
	"sort"
	"strings"

	"herald/fakeplatform"
)

// DeliveryExpect says what the platform under test promises.
type DeliveryExpect struct {
	// KeyHonoured: the platform deduplicates by idempotency key (discord
	// profile, webhook receivers), so every obligation shows exactly once.
	KeyHonoured bool
	// AllDelivered: no obligation may end abandoned.
	AllDelivered bool
}

// Copies groups a journal's sends by idempotency key.
func Copies(entries []fakeplatform.Entry) map[string][]fakeplatform.Entry {
	out := map[string][]fakeplatform.Entry{}
	for _, e := range entries {
		if e.Op == fakeplatform.OpSend {
			out[e.IdempotencyKey] = append(out[e.IdempotencyKey], e)
		}
	}
	return out
}

// CheckDelivery returns every violation of the delivery invariants (SPEC §1,
// §4) between what herald's ledger says (rows) and what the chats show (the
// fake's journal), after the system has settled:
//
//   - every obligation is terminal (and delivered, when AllDelivered);
//   - every delivered obligation has at least one copy, and its platform
//     message id is one of them;
//   - at most one copy of an obligation is unmarked, and a copy carries the
//     marker exactly when it is flagged as a redelivery;
//   - an obligation with no ambiguous event (no may-have-landed failure, no
//     claim lost with its owner) has exactly one copy — and so does every
//     obligation on a platform that honours the key;
//   - in each chat, first copies appear in acceptance (ledger id) order;
//   - the journal holds no copy herald does not know of.
func CheckDelivery(rows []Row, entries []fakeplatform.Entry, exp DeliveryExpect) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	copies := Copies(entries)
	known := map[string]bool{}
	type first struct {
		id  int64
		seq int64
	}
	byChat := map[string][]first{}
	for _, r := range rows {
		known[r.DeliveryKey] = true
		label := fmt.Sprintf("obligation %d (message %d part %d/%d, chat %s)", r.ID, r.MessageID, r.Part+1, r.Parts, r.ChatID)
		if !r.Terminal() {
			add("%s is %s, not terminal", label, r.State)
		}
		if exp.AllDelivered && r.State != "delivered" {
			add("%s ended %s: %s", label, r.State, r.Error)
		}
		cs := copies[r.DeliveryKey]
		if r.State == "delivered" && len(cs) == 0 {
			add("%s is delivered but the chat shows no copy", label)
		}
		unmarked, backed := 0, r.State != "delivered"
		for _, c := range cs {
			if c.ChatID != r.ChatID {
				add("%s: a copy landed in chat %s", label, c.ChatID)
			}
			if !c.Redelivery {
				unmarked++
			}
			want := r.Text
			if c.Redelivery {
				want = Marker + r.Text
			}
			if c.Text != want {
				add("%s: copy seq %d (redelivery=%v) reads %.60q, want %.60q", label, c.Seq, c.Redelivery, c.Text, want)
			}
			if c.MessageID == r.PMID {
				backed = true
			}
		}
		if !backed {
			add("%s: platform message id %q is not among its %d copies", label, r.PMID, len(cs))
		}
		if unmarked > 1 {
			add("%s: %d unmarked copies", label, unmarked)
		}
		if (exp.KeyHonoured || r.Ambiguous == 0) && len(cs) > 1 {
			add("%s: %d copies, want exactly one (ambiguous events: %d, key honoured: %v)", label, len(cs), r.Ambiguous, exp.KeyHonoured)
		}
		if len(cs) > 0 {
			k := r.Platform + "/" + r.ChatID
			byChat[k] = append(byChat[k], first{r.ID, cs[0].Seq})
		}
	}
	for key := range copies {
		if !known[key] {
			add("the journal holds %d copies with key %q that no obligation has", len(copies[key]), key)
		}
	}
	chats := make([]string, 0, len(byChat))
	for k := range byChat {
		chats = append(chats, k)
	}
	sort.Strings(chats)
	for _, k := range chats {
		fs := byChat[k]
		sort.Slice(fs, func(i, j int) bool { return fs[i].id < fs[j].id })
		for i := 1; i < len(fs); i++ {
			if fs[i].seq < fs[i-1].seq {
				add("chat %s: obligation %d (accepted later) first appeared at seq %d, before obligation %d at seq %d",
					k, fs[i].id, fs[i].seq, fs[i-1].id, fs[i-1].seq)
			}
		}
	}
	return bad
}

// Report joins violations for a test failure, capped so a broken run stays
// readable.
func Report(bad []string) string {
	const max = 25
	if len(bad) > max {
		return strings.Join(bad[:max], "\n") + fmt.Sprintf("\n… and %d more", len(bad)-max)
	}
	return strings.Join(bad, "\n")
}
