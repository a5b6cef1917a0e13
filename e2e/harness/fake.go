package harness

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"herald/fakeplatform"
)

var fakeReady = regexp.MustCompile(`^fakeplatform: listening on (http://\S+)`)

// Fake is a running fakeplatform child.
type Fake struct {
	*Proc
	URL     string
	Journal string
}

// StartFake runs `fakeplatform serve` journaling to dir/journal.jsonl.
func StartFake(tb testing.TB, bins Binaries, dir string, env ...string) *Fake {
	tb.Helper()
	journal := filepath.Join(dir, "journal.jsonl")
	p := Start(tb, "fakeplatform", dir, bins.FakePlatform, env, "serve", "--addr", "127.0.0.1:0", "--journal", journal)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := p.WaitLine(ctx, fakeReady)
	if err != nil {
		tb.Fatal(err)
	}
	return &Fake{Proc: p, URL: m[1], Journal: journal}
}

// PlatformURL is the herald platform URL for a profile of this fake.
func (f *Fake) PlatformURL(profile string) string {
	return "fake:" + f.URL + "?profile=" + profile
}

// Fault is a fault to program (fakeplatform control API).
type Fault struct {
	Op         string  `json:"op,omitempty"`
	ChatID     string  `json:"chat_id,omitempty"`
	Kind       string  `json:"kind"`
	Count      int     `json:"count,omitempty"`
	RetryAfter float64 `json:"retry_after,omitempty"`
	Hold       string  `json:"hold,omitempty"`
}

// AddFault arms a fault.
func (f *Fake) AddFault(ctx context.Context, fault Fault) error {
	status, err := JSON(ctx, http.MethodPost, f.URL+"/control/faults", fault, nil)
	if err == nil && status != http.StatusCreated {
		err = fmt.Errorf("add fault %+v: status %d", fault, status)
	}
	return err
}

// Stats returns the fake's counters.
func (f *Fake) Stats(ctx context.Context) (map[string]any, error) {
	var out map[string]any
	_, err := JSON(ctx, http.MethodGet, f.URL+"/control/stats", nil, &out)
	return out, err
}

// Entries reads the journal.
func (f *Fake) Entries() ([]fakeplatform.Entry, error) { return fakeplatform.ReadJournal(f.Journal) }
