package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"herald/internal/clock"
	"herald/internal/split"
	"herald/outbox"
)

// FakeProfile is one platform the fake imitates: its path segment, its
// length limit in UTF-16 code units (as the real platform counts, see
// PLATFORMS.md) and whether it honours the idempotency key.
type FakeProfile struct {
	// Name is the profile's path segment and its profile= value.
	Name string
	// MaxTextUnits is the longest text, in UTF-16 code units.
	MaxTextUnits int
	// HonoursKey reports whether a repeated idempotency key returns the
	// existing message (Discord's nonce with enforce_nonce).
	HonoursKey bool
}

// FakeProfiles returns the profiles of the fake platform (fakeplatform's
// README), in a stable order. A test keeps them equal to fakeplatform's.
func FakeProfiles() []FakeProfile {
	return []FakeProfile{
		{Name: "telegram", MaxTextUnits: 4096},
		{Name: "discord", MaxTextUnits: 2000, HonoursKey: true},
		{Name: "slack", MaxTextUnits: 3900},
	}
}

// Fake is the fake: platform, a client of the stand-in chat platform
// (herald/fakeplatform). A send is
//
//	POST {base}/{profile}/chats/{chat_id}/messages
//	{"text":"…","idempotency_key":"…","redelivery":false}
//
// answered 200 {"ok":true,"message_id":"…"}, or an error
// {"ok":false,"error_code":N,"description":"…"} with "retry_after" (float
// seconds) and a Retry-After header on a 429. The discord profile answers a
// repeated idempotency key with the existing message, so a retried send
// shows one copy there.
type Fake struct {
	base    string // scheme://host[/prefix], no trailing slash
	profile FakeProfile
	client  *http.Client
	clock   clock.Clock
}

// NewFake returns a Fake for rawURL, the part after "fake:":
// http://127.0.0.1:PORT?profile=telegram|discord|slack. A path on the URL
// is kept as a prefix of every request path.
func NewFake(rawURL string, opts Options) (*Fake, error) {
	u, err := parseURL("fake", rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("fake URL scheme %q: want http or https", u.Scheme)
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("fake URL query: %v", err)
	}
	names := make([]string, 0, 3)
	for _, p := range FakeProfiles() {
		names = append(names, p.Name)
	}
	want := strings.Join(names, "|")
	for k := range q {
		if k != "profile" {
			return nil, fmt.Errorf("fake URL has unknown parameter %q (want profile=%s)", k, want)
		}
	}
	switch vs := q["profile"]; {
	case len(vs) == 0 || vs[0] == "":
		return nil, fmt.Errorf("fake URL has no profile (want ?profile=%s)", want)
	case len(vs) > 1:
		return nil, fmt.Errorf("fake URL has %d profiles (want one of %s)", len(vs), want)
	}
	name := q.Get("profile")
	var profile FakeProfile
	for _, p := range FakeProfiles() {
		if p.Name == name {
			profile = p
		}
	}
	if profile.Name == "" {
		return nil, fmt.Errorf("fake URL has unknown profile %q (want %s)", name, want)
	}
	u.RawQuery = ""
	return &Fake{
		base:    strings.TrimSuffix(u.String(), "/"),
		profile: profile,
		client:  newHTTPClient(),
		clock:   clockOrReal(opts.Clock),
	}, nil
}

// fakeSend is the body of a send to the fake.
type fakeSend struct {
	Text           string `json:"text"`
	IdempotencyKey string `json:"idempotency_key"`
	Redelivery     bool   `json:"redelivery"`
}

// fakeReply is the fake's answer to an accepted send.
type fakeReply struct {
	OK        bool            `json:"ok"`
	MessageID json.RawMessage `json:"message_id"`
}

// Send posts m to its chat and returns the fake's message id. A 200 whose
// body cannot be read or names no message id is ambiguous: the message
// landed, but without its id the ledger cannot record the delivery, and a
// retry is marked (or, on discord, answered with the same message).
func (f *Fake) Send(ctx context.Context, m outbox.Outgoing) (string, error) {
	where := fmt.Sprintf("send to fake/%s chat %q", f.profile.Name, m.ChatID)
	if m.ChatID == "" {
		return "", sendErr(outbox.ClassPermanent, where, "not sent: empty chat id")
	}
	body, err := jsonBody(fakeSend{Text: m.Text, IdempotencyKey: m.DeliveryKey, Redelivery: m.Redelivery})
	if err != nil {
		return "", sendErr(outbox.ClassPermanent, where, "encode request: %w", err)
	}
	target := f.base + "/" + f.profile.Name + "/chats/" + url.PathEscape(m.ChatID) + "/messages"
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "herald")

	ex, err := post(ctx, f.client, where, target, h, body)
	if err != nil {
		return "", err
	}
	if !success(ex.status) {
		return "", failure(where, ex, f.clock.Now(), "")
	}
	if ex.bodyErr != nil {
		return "", sendErr(outbox.ClassAmbiguous, where, "status %d, then the response was torn: %w", ex.status, ex.bodyErr)
	}
	var reply fakeReply
	if err := json.Unmarshal(ex.body, &reply); err != nil {
		return "", sendErr(outbox.ClassAmbiguous, where, "status %d with an unreadable body %q: %v", ex.status, clip(string(ex.body)), err)
	}
	id := messageID(reply.MessageID)
	if !reply.OK || id == "" {
		return "", sendErr(outbox.ClassAmbiguous, where, "status %d without ok and a message id: %q", ex.status, clip(string(ex.body)))
	}
	return id, nil
}

// Limit is the profile's limit in UTF-16 code units.
func (f *Fake) Limit() split.Limit {
	return split.Limit{Max: f.profile.MaxTextUnits, Unit: split.UTF16}
}

// Profile returns the profile this Fake sends to.
func (f *Fake) Profile() FakeProfile { return f.profile }

// CloseIdleConnections closes the pooled connections that are idle.
func (f *Fake) CloseIdleConnections() { f.client.CloseIdleConnections() }
