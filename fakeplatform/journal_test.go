package fakeplatform_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/internal/clock"
)

// fillJournal runs a session against a fresh fake writing journal and
// closes it: sends in several chats and profiles, an edit, a delete and a
// discord send with a key.
func fillJournal(t *testing.T, journal string, m *clock.Manual) map[string][]fakeplatform.Message {
	t.Helper()
	e := newEnv(t, fakeplatform.Config{JournalPath: journal, Clock: m})
	wantStatus(t, e.send("telegram", "c1", "t1"), 200, "")
	wantStatus(t, e.send("telegram", "c1", "t2"), 200, "")
	wantStatus(t, e.sendKey("discord", "c1", "d1", "key-d1"), 200, "")
	wantStatus(t, e.send("slack", "c9", "s1"), 200, "")
	wantStatus(t, e.edit("telegram", "c1", "1", "t1, edited"), 200, "")
	wantStatus(t, e.del("telegram", "c1", "2"), 200, "")
	chats := map[string][]fakeplatform.Message{
		"telegram/c1": e.list("telegram", "c1"),
		"discord/c1":  e.list("discord", "c1"),
		"slack/c9":    e.list("slack", "c9"),
	}
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	return chats
}

// TestReplayAfterRestart restarts the fake on the journal of a first run,
// with and without a torn last line, and checks that chats, seq, message ids
// and the dedup index come back and the torn bytes are gone.
func TestReplayAfterRestart(t *testing.T) {
	tests := []struct {
		name string
		torn string // appended to the journal before the restart
	}{
		{"a clean journal", ""},
		{"a line cut off mid-write", `{"seq":7,"op":"send","chat_id":"c1","mess`},
		{"a whole entry whose newline never landed", `{"seq":7,"op":"send","chat_id":"c1","message_id":"7","text":"ghost","idempotency_key":"","redelivery":false,"at":"2026-03-08T06:00:00.000000000Z","profile":"telegram"}`},
		{"a garbage last line with a newline", "{\"seq\":7,\x00\x00\n"},
		{"zeros left by a crash", "\x00\x00\x00\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "journal.jsonl")
			m := clock.NewManual(t0)
			before := fillJournal(t, journal, m)
			clean, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			if tt.torn != "" {
				f, err := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.WriteString(tt.torn); err != nil {
					t.Fatal(err)
				}
				f.Close()
				// ReadJournal tolerates the torn line without changing the file.
				es, err := fakeplatform.ReadJournal(journal)
				if err != nil || len(es) != 6 {
					t.Fatalf("ReadJournal with a torn line = %d entries, %v; want 6", len(es), err)
				}
			}

			m.Advance(time.Minute)
			e := newEnv(t, fakeplatform.Config{JournalPath: journal, Clock: m})
			after, err := os.ReadFile(journal)
			if err != nil {
				t.Fatal(err)
			}
			if string(after) != string(clean) {
				t.Fatalf("journal after restart =\n%q\nwant the whole lines only:\n%q", after, clean)
			}
			for chat, want := range before {
				p, c, _ := strings.Cut(chat, "/")
				if got := e.list(p, c); !reflect.DeepEqual(got, want) {
					t.Errorf("%s after restart = %+v, want %+v", chat, got, want)
				}
			}
			if st := e.srv.Stats(); st.JournalSeq != 6 {
				t.Fatalf("journal seq after restart = %d, want 6", st.JournalSeq)
			}
			// The dedup index survived: the key is still inside its window.
			dup := e.sendKey("discord", "c1", "d1", "key-d1")
			if dup.body["message_id"] != "3" || dup.body["deduplicated"] != true {
				t.Fatalf("repeat of a replayed key = %s, want message 3 deduplicated", dup.raw)
			}
			// Edits and deletes of replayed messages work; new ids go on from seq.
			wantStatus(t, e.edit("telegram", "c1", "1", "t1, edited twice"), 200, "")
			wantStatus(t, e.edit("telegram", "c1", "2", "deleted before"), 404, "")
			next := e.send("telegram", "c1", "t3")
			if next.body["message_id"] != "8" {
				t.Fatalf("first send after restart = %s, want message_id 8", next.raw)
			}
			es := e.entries()
			if len(es) != 8 || es[6].Seq != 7 || es[7].Seq != 8 || !es[7].At.Equal(t0.Add(time.Minute)) {
				t.Fatalf("journal after restart = %+v", es)
			}
		})
	}
}

// TestCorruptJournalIsRefused checks that damage before the last line (not
// a crash mid-write) stops the fake from starting.
func TestCorruptJournalIsRefused(t *testing.T) {
	line := func(seq, id string) string {
		return `{"seq":` + seq + `,"op":"send","chat_id":"c1","message_id":"` + id + `","text":"x","idempotency_key":"","redelivery":false,"at":"2026-03-08T06:00:00.000000000Z","profile":"telegram"}` + "\n"
	}
	tests := []struct {
		name    string
		content string
	}{
		{"a garbage middle line", line("1", "1") + "garbage\n" + line("3", "3")},
		{"a seq going backwards", line("2", "2") + line("1", "1")},
		{"an edit of a message never sent", line("1", "1") + `{"seq":2,"op":"edit","chat_id":"c1","message_id":"9","text":"y","at":"2026-03-08T06:00:00Z","profile":"telegram"}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			journal := filepath.Join(t.TempDir(), "journal.jsonl")
			if err := os.WriteFile(journal, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := fakeplatform.New(fakeplatform.Config{JournalPath: journal}); err == nil {
				t.Fatal("New accepted a corrupt journal")
			}
		})
	}
	t.Run("ReadJournal reports corruption as ErrCorruptJournal", func(t *testing.T) {
		journal := filepath.Join(t.TempDir(), "journal.jsonl")
		if err := os.WriteFile(journal, []byte(line("1", "1")+"garbage\n"+line("2", "2")), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := fakeplatform.ReadJournal(journal); !errors.Is(err, fakeplatform.ErrCorruptJournal) {
			t.Fatalf("ReadJournal = %v, want ErrCorruptJournal", err)
		}
	})
	t.Run("ReadJournal of a missing file is os.ErrNotExist", func(t *testing.T) {
		if _, err := fakeplatform.ReadJournal(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("ReadJournal = %v, want os.ErrNotExist", err)
		}
	})
}

// TestNewValidatesConfig checks New's config errors.
func TestNewValidatesConfig(t *testing.T) {
	if _, err := fakeplatform.New(fakeplatform.Config{}); err == nil {
		t.Fatal("New without a journal path succeeded")
	}
	j := filepath.Join(t.TempDir(), "j")
	if _, err := fakeplatform.New(fakeplatform.Config{JournalPath: j, DedupWindow: -time.Second}); err == nil {
		t.Fatal("New with a negative dedup window succeeded")
	}
	if _, err := fakeplatform.New(fakeplatform.Config{JournalPath: filepath.Join(t.TempDir(), "no", "dir", "j")}); err == nil {
		t.Fatal("New with a journal in a missing directory succeeded")
	}
}

// TestSendAnswersExactly pins the bytes of a send's answer: 200 (not 201)
// and the JSON the adapter parses.
func TestSendAnswersExactly(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	r := e.send("telegram", "c1", "x")
	if r.status != http.StatusOK || r.raw != `{"ok":true,"message_id":"1"}` || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("send answered %d %s (%s)", r.status, r.raw, r.header.Get("Content-Type"))
	}
}
