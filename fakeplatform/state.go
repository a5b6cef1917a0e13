package fakeplatform

import (
	"fmt"
	"time"
)

// Message is one message of a chat as a user sees it, after edits.
type Message struct {
	// MessageID is the id the send returned.
	MessageID string `json:"message_id"`
	// Text is the current text (after the last edit).
	Text string `json:"text"`
	// IdempotencyKey is the key the send carried.
	IdempotencyKey string `json:"idempotency_key"`
	// Redelivery is the send's redelivery flag.
	Redelivery bool `json:"redelivery"`
	// SentAt is when the send was accepted.
	SentAt time.Time `json:"sent_at"`
	// EditedAt is when the last edit was accepted; nil if never edited.
	EditedAt *time.Time `json:"edited_at,omitempty"`
}

type message struct {
	id         string
	profile    string
	chatID     string
	text       string
	key        string
	redelivery bool
	sentAt     time.Time
	editedAt   time.Time
	deleted    bool
}

type chatKey struct{ profile, chatID string }

type dedupKey struct{ profile, chatID, key string }

// hookKey identifies a webhook delivery: receivers deduplicate on
// webhook-id, each receiver on its own.
type hookKey struct{ receiver, id string }

type dedupRecord struct {
	messageID string
	at        time.Time
}

// state is what the journal adds up to: chats, messages and the dedup index.
// A live operation and a replayed entry change it through the same apply.
type state struct {
	seq      int64
	messages map[string]*message    // by message id, deleted ones included
	chats    map[chatKey][]*message // in send order, deleted ones included
	dedup    map[dedupKey]dedupRecord
	hooks    map[hookKey]string // webhook-id → message id of its first delivery
}

func newState() state {
	return state{
		messages: map[string]*message{},
		chats:    map[chatKey][]*message{},
		dedup:    map[dedupKey]dedupRecord{},
		hooks:    map[hookKey]string{},
	}
}

// lookup returns the live message id of the given chat, or nil.
func (st *state) lookup(profile, chatID, id string) *message {
	m := st.messages[id]
	if m == nil || m.deleted || m.profile != profile || m.chatID != chatID {
		return nil
	}
	return m
}

// apply adds one journal entry to the state.
func (st *state) apply(e Entry) error {
	if e.Seq <= st.seq {
		return fmt.Errorf("entry seq %d after seq %d", e.Seq, st.seq)
	}
	switch e.Op {
	case OpSend:
		if _, dup := st.messages[e.MessageID]; dup {
			return fmt.Errorf("entry seq %d: message id %q sent twice", e.Seq, e.MessageID)
		}
		m := &message{
			id: e.MessageID, profile: e.Profile, chatID: e.ChatID, text: e.Text,
			key: e.IdempotencyKey, redelivery: e.Redelivery, sentAt: e.At,
		}
		st.messages[m.id] = m
		ck := chatKey{e.Profile, e.ChatID}
		st.chats[ck] = append(st.chats[ck], m)
		if p, ok := LookupProfile(e.Profile); ok && p.HonoursIdempotencyKey && e.IdempotencyKey != "" {
			st.dedup[dedupKey{e.Profile, e.ChatID, e.IdempotencyKey}] = dedupRecord{messageID: m.id, at: e.At}
		}
		if hk := (hookKey{e.Receiver, e.IdempotencyKey}); e.Profile == ProfileWebhook && hk.id != "" {
			if _, seen := st.hooks[hk]; !seen {
				st.hooks[hk] = m.id
			}
		}
	case OpEdit, OpDelete:
		m := st.lookup(e.Profile, e.ChatID, e.MessageID)
		if m == nil {
			return fmt.Errorf("entry seq %d: %s of unknown message %q in %s chat %q", e.Seq, e.Op, e.MessageID, e.Profile, e.ChatID)
		}
		if e.Op == OpEdit {
			m.text, m.editedAt = e.Text, e.At
		} else {
			m.deleted = true
		}
	default:
		return fmt.Errorf("entry seq %d: unknown op %q", e.Seq, e.Op)
	}
	st.seq = e.Seq
	return nil
}

// Messages returns the current messages of a chat as a user sees them —
// deleted ones left out, edited ones with their latest text — in the order
// they were sent. An unknown chat has no messages.
func (s *Server) Messages(profile, chatID string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Message{}
	for _, m := range s.st.chats[chatKey{profile, chatID}] {
		if m.deleted {
			continue
		}
		msg := Message{MessageID: m.id, Text: m.text, IdempotencyKey: m.key, Redelivery: m.redelivery, SentAt: m.sentAt}
		if !m.editedAt.IsZero() {
			t := m.editedAt
			msg.EditedAt = &t
		}
		out = append(out, msg)
	}
	return out
}
