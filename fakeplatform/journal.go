package fakeplatform

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Op is the kind of an operation a user would see: a new message, an edit or
// a deletion. Every accepted operation is one journal line.
type Op string

const (
	// OpSend creates a message (POST /{profile}/chats/{chat_id}/messages).
	OpSend Op = "send"
	// OpEdit replaces a message's text (PATCH …/messages/{message_id}).
	OpEdit Op = "edit"
	// OpDelete removes a message (DELETE …/messages/{message_id}).
	OpDelete Op = "delete"
)

// AllOps returns every operation, in a stable order.
func AllOps() []Op { return []Op{OpSend, OpEdit, OpDelete} }

func (o Op) valid() bool {
	for _, x := range AllOps() {
		if o == x {
			return true
		}
	}
	return false
}

// journalTimeFormat is RFC 3339 in UTC with all nine fractional digits, so
// journal timestamps have one width and sort as text.
const journalTimeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// Entry is one line of the journal: one operation the fake accepted, in the
// order it accepted them. Test suites read journals with ReadJournal.
type Entry struct {
	// Seq increases by one per accepted operation across the whole journal,
	// starting at 1.
	Seq int64 `json:"seq"`
	// Op is send, edit or delete.
	Op Op `json:"op"`
	// ChatID is the chat of the operation, as given in the request path.
	ChatID string `json:"chat_id"`
	// MessageID is the id of the message created (send) or changed (edit,
	// delete). A send's message id is its Seq in decimal.
	MessageID string `json:"message_id"`
	// Text is the message text after the operation; empty for a delete.
	Text string `json:"text"`
	// IdempotencyKey is the key the request carried (journalled whether or
	// not the profile honours it; a webhook delivery's webhook-id); empty
	// for edits and deletes.
	IdempotencyKey string `json:"idempotency_key"`
	// Redelivery is the request's redelivery flag (sends only).
	Redelivery bool `json:"redelivery"`
	// At is the fake's clock when it accepted the operation, in UTC.
	At time.Time `json:"at"`
	// Profile is the platform profile of the request path, or "webhook"
	// for a delivery to the webhook receiver.
	Profile string `json:"profile"`
	// Receiver is the receiver name of a webhook delivery
	// (POST /webhook/{receiver}); empty, and left out of the line, for
	// every other operation.
	Receiver string `json:"receiver,omitempty"`
}

// entryWire is Entry as written: "at" with nine fractional digits.
type entryWire struct {
	Seq            int64  `json:"seq"`
	Op             Op     `json:"op"`
	ChatID         string `json:"chat_id"`
	MessageID      string `json:"message_id"`
	Text           string `json:"text"`
	IdempotencyKey string `json:"idempotency_key"`
	Redelivery     bool   `json:"redelivery"`
	At             string `json:"at"`
	Profile        string `json:"profile"`
	Receiver       string `json:"receiver,omitempty"`
}

// MarshalJSON writes e as one journal object, "at" in RFC 3339 UTC with
// nanoseconds.
func (e Entry) MarshalJSON() ([]byte, error) {
	return json.Marshal(entryWire{
		Seq: e.Seq, Op: e.Op, ChatID: e.ChatID, MessageID: e.MessageID, Text: e.Text,
		IdempotencyKey: e.IdempotencyKey, Redelivery: e.Redelivery,
		At: e.At.UTC().Format(journalTimeFormat), Profile: e.Profile, Receiver: e.Receiver,
	})
}

// ErrCorruptJournal is returned when a journal line other than the last is
// not a valid entry, or sequence numbers do not increase. A torn last line
// is not corruption: it is what a crash in the middle of a write leaves.
var ErrCorruptJournal = errors.New("corrupt journal")

// ReadJournal reads every whole entry of the journal at path, in order. A
// torn last line (no trailing newline, or not valid JSON) is ignored, so a
// journal can be read while a server is appending to it or after a crash.
func ReadJournal(path string) ([]Entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read journal: %w", err)
	}
	entries, _, err := parseJournal(data)
	if err != nil {
		return nil, fmt.Errorf("read journal %s: %w", path, err)
	}
	return entries, nil
}

// parseJournal decodes data and returns the entries and the length of the
// whole-line prefix they came from; bytes after it are a torn last line.
func parseJournal(data []byte) ([]Entry, int64, error) {
	var entries []Entry
	off := 0
	for line := 1; off < len(data); line++ {
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return entries, int64(off), nil // torn: the newline never landed
		}
		var e Entry
		err := json.Unmarshal(data[off:off+nl], &e)
		if err == nil && (e.Seq <= 0 || !e.Op.valid()) {
			err = fmt.Errorf("seq %d op %q", e.Seq, e.Op)
		}
		if err != nil {
			if off+nl+1 == len(data) {
				return entries, int64(off), nil // torn last line
			}
			return nil, 0, fmt.Errorf("%w: line %d: %v", ErrCorruptJournal, line, err)
		}
		if n := len(entries); n > 0 && e.Seq <= entries[n-1].Seq {
			return nil, 0, fmt.Errorf("%w: line %d: seq %d after seq %d", ErrCorruptJournal, line, e.Seq, entries[n-1].Seq)
		}
		entries = append(entries, e)
		off += nl + 1
	}
	return entries, int64(off), nil
}

// journal is the append-only file of accepted operations. Its methods are
// called with the Server's lock held.
type journal struct {
	path   string
	f      *os.File
	size   int64 // bytes of whole lines
	broken error // set after a failed fsync: nothing more is accepted
}

// openJournal opens (creating if needed) the journal at path and returns its
// entries. A torn last line is truncated away (and reported as torn bytes).
func openJournal(path string) (*journal, []Entry, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("open journal: %w", err)
	}
	j, entries, torn, err := loadJournal(path, f)
	if err != nil {
		f.Close()
		return nil, nil, 0, err
	}
	return j, entries, torn, nil
}

func loadJournal(path string, f *os.File) (*journal, []Entry, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("read journal: %w", err)
	}
	entries, good, err := parseJournal(data)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("replay journal %s: %w", path, err)
	}
	torn := int64(len(data)) - good
	if torn > 0 {
		if err := f.Truncate(good); err != nil {
			return nil, nil, 0, fmt.Errorf("truncate torn journal line: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, nil, 0, fmt.Errorf("sync journal: %w", err)
	}
	// Make the file's directory entry durable too, for a journal just created.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		serr := d.Sync()
		d.Close()
		if serr != nil {
			return nil, nil, 0, fmt.Errorf("sync journal directory: %w", serr)
		}
	}
	return &journal{path: path, f: f, size: good}, entries, torn, nil
}

// append writes e as one line and fsyncs it. On a failed write the partial
// line is cut off again; after a failed fsync the journal refuses every
// later append, since what reached the disk is no longer known.
func (j *journal) append(e Entry) error {
	if j.broken != nil {
		return fmt.Errorf("append journal entry %d: %w", e.Seq, j.broken)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode journal entry %d: %w", e.Seq, err)
	}
	b = append(b, '\n')
	if _, err := j.f.Write(b); err != nil {
		if terr := j.f.Truncate(j.size); terr != nil {
			j.broken = fmt.Errorf("journal holds a partial line: %w", terr)
		}
		return fmt.Errorf("append journal entry %d: %w", e.Seq, err)
	}
	if err := j.f.Sync(); err != nil {
		j.broken = fmt.Errorf("fsync failed: %w", err)
		return fmt.Errorf("sync journal entry %d: %w", e.Seq, err)
	}
	j.size += int64(len(b))
	return nil
}

func (j *journal) close() error {
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}
