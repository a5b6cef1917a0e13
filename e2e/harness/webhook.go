package harness

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/internal/clock"
)

// fakeStartTimeout bounds the wait for a fake's listening line.
const fakeStartTimeout = 30 * time.Second

// StartFakeWith runs `fakeplatform serve` journaling to dir/journal.jsonl,
// like StartFake, with extra serve flags (e.g. --webhook-secret).
func StartFakeWith(tb testing.TB, bins Binaries, dir string, flags []string, env ...string) *Fake {
	tb.Helper()
	journal := filepath.Join(dir, "journal.jsonl")
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--journal", journal}, flags...)
	p := Start(tb, "fakeplatform", dir, bins.FakePlatform, env, args...)
	ctx, cancel := clock.WithTimeout(context.Background(), clock.Real{}, fakeStartTimeout)
	defer cancel()
	m, err := p.WaitLine(ctx, fakeReady)
	if err != nil {
		tb.Fatal(err)
	}
	return &Fake{Proc: p, URL: m[1], Journal: journal}
}

// StartWebhookFake runs a fake whose webhook receiver verifies signatures
// with secret (a "whsec_…" Standard Webhooks secret).
func StartWebhookFake(tb testing.TB, bins Binaries, dir, secret string, env ...string) *Fake {
	tb.Helper()
	return StartFakeWith(tb, bins, dir, []string{"--webhook-secret", secret}, env...)
}

// WebhookPlatformURL is the herald platform URL that delivers to this
// fake's webhook receiver called receiver, signing with secret.
func (f *Fake) WebhookPlatformURL(receiver, secret string) string {
	return "webhook:" + f.URL + "/webhook/" + url.PathEscape(receiver) + "?secret=" + url.QueryEscape(secret)
}

// Arm arms a fault given as the fake's own type, so that every field the
// control API takes — the profile too ("webhook" for the receiver) — can be
// set.
func (f *Fake) Arm(ctx context.Context, fault fakeplatform.Fault) error {
	status, err := JSON(ctx, http.MethodPost, f.URL+"/control/faults", fault, nil)
	if err == nil && status != http.StatusCreated {
		err = fmt.Errorf("arm fault %+v: status %d", fault, status)
	}
	return err
}

// ArmedFault is a fault still armed on the fake, as GET /control/faults
// lists it.
type ArmedFault struct {
	ID        int64  `json:"id"`
	Op        string `json:"op"`
	ChatID    string `json:"chat_id"`
	Profile   string `json:"profile"`
	Kind      string `json:"kind"`
	Count     int    `json:"count"`
	Remaining int    `json:"remaining"`
}

// Armed returns the faults still armed, oldest first.
func (f *Fake) Armed(ctx context.Context) ([]ArmedFault, error) {
	var out struct {
		Faults []ArmedFault `json:"faults"`
	}
	status, err := JSON(ctx, http.MethodGet, f.URL+"/control/faults", nil, &out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("list faults: status %d", status)
	}
	return out.Faults, err
}

// Counters returns the fake's counters, typed (Stats gives them as a map).
func (f *Fake) Counters(ctx context.Context) (fakeplatform.Stats, error) {
	var out fakeplatform.Stats
	status, err := JSON(ctx, http.MethodGet, f.URL+"/control/stats", nil, &out)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("stats: status %d", status)
	}
	return out, err
}
