package fakeplatform_test

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"herald/fakeplatform"
)

// TestIdempotencyKeyPerProfile checks that discord answers a repeated key
// within the window with the existing message and journals nothing, and that
// telegram and slack ignore keys.
func TestIdempotencyKeyPerProfile(t *testing.T) {
	tests := []struct {
		name    string
		profile string
		window  time.Duration // 0: the default
		advance time.Duration // between the two sends
		wantDup bool
	}{
		{"discord deduplicates a repeat at once", "discord", 0, 0, true},
		{"discord deduplicates a repeat just inside the default window", "discord", 0, 10*time.Minute - time.Nanosecond, true},
		{"discord sends again once the default window has passed", "discord", 0, 10 * time.Minute, false},
		{"discord honours a configured window", "discord", time.Minute, 59 * time.Second, true},
		{"discord sends again after a configured window", "discord", time.Minute, 61 * time.Second, false},
		{"telegram ignores the key", "telegram", 0, 0, false},
		{"slack ignores the key", "slack", 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fakeplatform.Config{DedupWindow: tt.window})
			first := e.sendKey(tt.profile, "c1", "hello", "key-1")
			wantStatus(t, first, http.StatusOK, "")
			e.clock.Advance(tt.advance)
			second := e.sendKey(tt.profile, "c1", "hello", "key-1")
			wantStatus(t, second, http.StatusOK, "")
			sameID := first.body["message_id"] == second.body["message_id"]
			if sameID != tt.wantDup || (second.body["deduplicated"] == true) != tt.wantDup {
				t.Fatalf("answers %s and %s; want deduplicated=%v", first.raw, second.raw, tt.wantDup)
			}
			wantEntries, wantShown := 2, 2
			if tt.wantDup {
				wantEntries, wantShown = 1, 1
			}
			if n := len(e.entries()); n != wantEntries {
				t.Fatalf("journal holds %d entries, want %d", n, wantEntries)
			}
			if n := len(e.list(tt.profile, "c1")); n != wantShown {
				t.Fatalf("chat shows %d messages, want %d", n, wantShown)
			}
			if dups := e.srv.Stats().Deduplicated; (dups == 1) != tt.wantDup {
				t.Fatalf("stats deduplicated = %d", dups)
			}
		})
	}
}

// TestDiscordKeyScope checks that a discord key is remembered per chat, and
// that a key sent again after its window is remembered afresh.
func TestDiscordKeyScope(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	a := e.sendKey("discord", "c1", "x", "k")
	b := e.sendKey("discord", "c2", "x", "k")
	if a.body["message_id"] == b.body["message_id"] {
		t.Fatalf("the same key in two chats was deduplicated: %s %s", a.raw, b.raw)
	}
	e.clock.Advance(11 * time.Minute)
	c := e.sendKey("discord", "c1", "x", "k") // window passed: a new message
	e.clock.Advance(9 * time.Minute)
	d := e.sendKey("discord", "c1", "x", "k") // inside the new message's window
	if c.body["message_id"] == a.body["message_id"] || d.body["message_id"] != c.body["message_id"] {
		t.Fatalf("answers %s, %s, %s: want a new id after the window, then that id again", a.raw, c.raw, d.raw)
	}
}

// TestLengthLimitsInUTF16Units checks each profile's limit, counted in
// UTF-16 code units, for sends and edits.
func TestLengthLimitsInUTF16Units(t *testing.T) {
	const emoji = "😀" // U+1F600: one rune, two UTF-16 units
	tests := []struct {
		profile string
		limit   int
	}{
		{"telegram", 4096},
		{"discord", 2000},
		{"slack", 3900},
	}
	for _, tt := range tests {
		cases := []struct {
			name string
			text string
			ok   bool
		}{
			{"ASCII at the limit is accepted", strings.Repeat("a", tt.limit), true},
			{"ASCII one over the limit is too long", strings.Repeat("a", tt.limit+1), false},
			{"emoji filling the limit are accepted", strings.Repeat(emoji, tt.limit/2), true},
			{"one more unit after the emoji is too long", strings.Repeat(emoji, tt.limit/2) + "a", false},
			{"fewer runes than the limit but more units is too long", strings.Repeat(emoji, tt.limit/2+1), false},
			{"BMP non-ASCII counts one unit each", strings.Repeat("é", tt.limit), true},
		}
		for _, c := range cases {
			t.Run(tt.profile+": "+c.name, func(t *testing.T) {
				e := newEnv(t, fakeplatform.Config{})
				r := e.send(tt.profile, "c1", c.text)
				base := e.send(tt.profile, "c1", "short")
				wantStatus(t, base, http.StatusOK, "")
				ed := e.edit(tt.profile, "c1", base.body["message_id"].(string), c.text)
				for _, got := range []reply{r, ed} {
					if c.ok {
						wantStatus(t, got, http.StatusOK, "")
					} else {
						wantStatus(t, got, http.StatusBadRequest, "Bad Request: message is too long")
					}
				}
			})
		}
	}
}

func TestUTF16Len(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{{"", 0}, {"abc", 3}, {"é", 1}, {"😀", 2}, {"a😀b", 4}, {"👍🏽", 4}, {"\xff", 1}}
	for _, tt := range tests {
		if got := fakeplatform.UTF16Len(tt.s); got != tt.want {
			t.Errorf("UTF16Len(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestEditsAndDeletes walks a chat through edits and deletes and checks
// every answer, the chat as GET shows it and the journal.
func TestEditsAndDeletes(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	id1 := e.send("telegram", "c1", "one").body["message_id"].(string)
	id2 := e.send("telegram", "c1", "two").body["message_id"].(string)
	other := e.send("telegram", "c2", "elsewhere").body["message_id"].(string)
	steps := []struct {
		name   string
		do     func() reply
		status int
		desc   string
	}{
		{"an edit changes the text", func() reply { e.clock.Advance(time.Second); return e.edit("telegram", "c1", id1, "one, edited") }, 200, ""},
		{"an identical edit is not modified", func() reply { return e.edit("telegram", "c1", id1, "one, edited") }, 400, "Bad Request: message is not modified"},
		{"an empty edit is rejected", func() reply { return e.edit("telegram", "c1", id1, "") }, 400, "Bad Request: message text is empty"},
		{"an edit of an unknown id is 404", func() reply { return e.edit("telegram", "c1", "999", "x") }, 404, "Not Found: message to edit not found"},
		{"an edit of a non-numeric id is 404", func() reply { return e.edit("telegram", "c1", "abc", "x") }, 404, "Not Found: message to edit not found"},
		{"an edit through another chat is 404", func() reply { return e.edit("telegram", "c1", other, "x") }, 404, "Not Found: message to edit not found"},
		{"an edit through another profile is 404", func() reply { return e.edit("slack", "c1", id1, "x") }, 404, "Not Found: message to edit not found"},
		{"a delete removes the message", func() reply { return e.del("telegram", "c1", id2) }, 200, ""},
		{"a second delete is 404", func() reply { return e.del("telegram", "c1", id2) }, 404, "Not Found: message to delete not found"},
		{"an edit of a deleted message is 404", func() reply { return e.edit("telegram", "c1", id2, "x") }, 404, "Not Found: message to edit not found"},
		{"a delete of an unknown id is 404", func() reply { return e.del("telegram", "c1", "12345") }, 404, "Not Found: message to delete not found"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			wantStatus(t, s.do(), s.status, s.desc)
		})
	}
	msgs := e.list("telegram", "c1")
	if len(msgs) != 1 || msgs[0].MessageID != id1 || msgs[0].Text != "one, edited" ||
		!msgs[0].SentAt.Equal(t0) || msgs[0].EditedAt == nil || !msgs[0].EditedAt.Equal(t0.Add(time.Second)) {
		t.Fatalf("chat c1 = %+v, want only message %s edited at t0+1s", msgs, id1)
	}
	var ops []string
	for _, en := range e.entries() {
		ops = append(ops, string(en.Op)+":"+en.MessageID)
	}
	want := []string{"send:1", "send:2", "send:3", "edit:1", "delete:2"}
	if strings.Join(ops, " ") != strings.Join(want, " ") {
		t.Fatalf("journal ops = %q, want %q", ops, want)
	}
	st := e.srv.Stats()
	if st.Accepted[fakeplatform.OpSend] != 3 || st.Accepted[fakeplatform.OpEdit] != 1 || st.Accepted[fakeplatform.OpDelete] != 1 {
		t.Fatalf("stats accepted = %v", st.Accepted)
	}
}

// TestRequestErrors checks the error JSON of malformed requests.
func TestRequestErrors(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	ctx := context.Background()
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		desc   string
	}{
		{"an empty text", http.MethodPost, "/telegram/chats/c1/messages", map[string]any{"text": ""}, 400, "Bad Request: message text is empty"},
		{"no text at all", http.MethodPost, "/discord/chats/c1/messages", map[string]any{"idempotency_key": "k"}, 400, "Bad Request: message text is empty"},
		{"an unknown profile", http.MethodPost, "/irc/chats/c1/messages", map[string]any{"text": "x"}, 404, `Not Found: unknown profile "irc"`},
		{"an unknown endpoint", http.MethodGet, "/telegram/nothing", nil, 404, "Not Found: no such endpoint"},
		{"a wrong method", http.MethodPut, "/telegram/chats/c1/messages", nil, 405, "Method Not Allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantStatus(t, e.do(ctx, tt.method, tt.path, tt.body), tt.status, tt.desc)
		})
	}
	t.Run("a body that is not JSON", func(t *testing.T) {
		resp, err := e.client.Post(e.url+"/telegram/chats/c1/messages", "application/json", strings.NewReader("{text"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status = %d, want 400", resp.StatusCode)
		}
	})
	if n := len(e.entries()); n != 0 {
		t.Fatalf("journal holds %d entries after rejected requests", n)
	}
}

// TestJournalLineIsDurableBeforeTheAnswer checks, for every operation, that
// its journal line is in the file — with the clock's time, nanoseconds and
// all — by the time the client has the answer.
func TestJournalLineIsDurableBeforeTheAnswer(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	at := regexp.MustCompile(`"at":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z)"`)
	ops := []func() reply{
		func() reply {
			return e.do(context.Background(), http.MethodPost, "/discord/chats/c1/messages",
				map[string]any{"text": "first", "idempotency_key": "k1", "redelivery": true})
		},
		func() reply { return e.send("slack", "c1", "second") },
		func() reply { return e.edit("discord", "c1", "1", "first, edited") },
		func() reply { return e.del("slack", "c1", "2") },
	}
	for i, op := range ops {
		e.clock.Advance(1500 * time.Microsecond)
		wantStatus(t, op(), http.StatusOK, "")
		raw, err := os.ReadFile(e.journal)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		if len(lines) != i+1 || !strings.HasSuffix(string(raw), "\n") {
			t.Fatalf("after answer %d the journal has %d lines: %q", i+1, len(lines), raw)
		}
		m := at.FindStringSubmatch(lines[i])
		wantAt := t0.Add(time.Duration(i+1) * 1500 * time.Microsecond)
		if m == nil || m[1] != wantAt.Format("2006-01-02T15:04:05.000000000Z") {
			t.Fatalf("line %q: want at %s with nanoseconds", lines[i], wantAt)
		}
	}
	got := e.entries()
	want := []fakeplatform.Entry{
		{Seq: 1, Op: "send", ChatID: "c1", MessageID: "1", Text: "first", IdempotencyKey: "k1", Redelivery: true, At: t0.Add(1500 * time.Microsecond), Profile: "discord"},
		{Seq: 2, Op: "send", ChatID: "c1", MessageID: "2", Text: "second", At: t0.Add(3000 * time.Microsecond), Profile: "slack"},
		{Seq: 3, Op: "edit", ChatID: "c1", MessageID: "1", Text: "first, edited", At: t0.Add(4500 * time.Microsecond), Profile: "discord"},
		{Seq: 4, Op: "delete", ChatID: "c1", MessageID: "2", At: t0.Add(6000 * time.Microsecond), Profile: "slack"},
	}
	if len(got) != len(want) {
		t.Fatalf("journal = %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v\nwant      %+v", i, got[i], want[i])
		}
	}
}

// TestMessageIDsAreUniqueAcrossTheFake checks that ids never repeat across
// profiles and chats, and are decimal.
func TestMessageIDsAreUniqueAcrossTheFake(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	seen := map[string]bool{}
	for _, p := range fakeplatform.AllProfiles() {
		for _, chat := range []string{"c1", "c2"} {
			id := e.send(p.Name, chat, "x").body["message_id"].(string)
			if _, err := strconv.ParseUint(id, 10, 64); err != nil || seen[id] {
				t.Fatalf("message id %q is not a fresh decimal id", id)
			}
			seen[id] = true
		}
	}
}

// TestChatIDsNeedingEscapes checks that a chat id with characters that need
// escaping in a path is stored as the client meant it.
func TestChatIDsNeedingEscapes(t *testing.T) {
	e := newEnv(t, fakeplatform.Config{})
	for _, chat := range []string{"-1001234567890", "a b", "a%2Fb"} {
		wantStatus(t, e.send("telegram", chat, "x"), http.StatusOK, "")
	}
	var chats []string
	for _, en := range e.entries() {
		chats = append(chats, en.ChatID)
	}
	if strings.Join(chats, "|") != "-1001234567890|a b|a/b" {
		t.Fatalf("journal chat ids = %q", chats)
	}
}
