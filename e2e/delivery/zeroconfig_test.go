package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"herald/e2e/harness"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestZeroConfigServe runs `herald serve` in an empty folder with no
// configuration but a port: a message to the console platform is printed
// once and reads back delivered; bad inputs get a 4xx JSON error and change
// nothing.
func TestZeroConfigServe(t *testing.T) {
	bins := harness.Build(t)
	dir := t.TempDir()
	addr := freeAddr(t)
	p := harness.StartIn(t, dir, "herald", dir, bins.Herald, []string{"HERALD_ADDR=" + addr}, "serve")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := p.WaitLine(ctx, harness.ReadyLine); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "herald-data", "herald.db")); err != nil {
		t.Fatalf("the default data directory was not created: %v", err)
	}
	base := "http://" + addr
	var created harness.MessageView
	status, err := harness.JSON(ctx, http.MethodPost, base+"/v1/messages",
		harness.Message{Platform: "console", ChatID: "me", Text: "hello 👋 zero config"}, &created)
	if err != nil || status != 202 {
		t.Fatalf("POST = %d %v", status, err)
	}
	var got harness.MessageView
	err = harness.Eventually(ctx, "the message delivered", func() error {
		if _, err := harness.JSON(ctx, http.MethodGet, fmt.Sprintf("%s/v1/messages/%d", base, created.ID), nil, &got); err != nil {
			return err
		}
		if got.State != "delivered" {
			return fmt.Errorf("state %s", got.State)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	printed := 0
	for _, l := range p.Lines() {
		if strings.Contains(l, "hello 👋 zero config") {
			printed++
		}
	}
	if printed != 1 {
		t.Fatalf("the console printed the message %d times, want once", printed)
	}

	bad := []struct{ name, body string }{
		{"malformed JSON", `{"platform":`},
		{"unknown platform", `{"platform":"pigeon","chat_id":"me","text":"x"}`},
		{"empty text", `{"platform":"console","chat_id":"me","text":""}`},
		{"body over the limit", `{"platform":"console","chat_id":"me","text":"` + strings.Repeat("x", 2<<20) + `"}`},
	}
	for _, b := range bad {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", strings.NewReader(b.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", b.name, err)
		}
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		decodeErr := jsonDecode(resp, &e)
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || decodeErr != nil || e.Error.Code == "" {
			t.Fatalf("%s: status %d, error %+v (%v); want a 4xx JSON error", b.name, resp.StatusCode, e, decodeErr)
		}
	}
	var list struct{ Messages []harness.MessageView }
	if _, err := harness.JSON(ctx, http.MethodGet, base+"/v1/messages", nil, &list); err != nil || len(list.Messages) != 1 {
		t.Fatalf("after bad inputs the ledger lists %d messages (%v), want 1", len(list.Messages), err)
	}
	if err := p.Signal(15); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil || p.ExitCode() != 0 {
		t.Fatalf("SIGTERM: exit %d %v", p.ExitCode(), err)
	}
	if !p.HasLine("drained") {
		t.Fatal("no drain logged on SIGTERM")
	}
}

func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
