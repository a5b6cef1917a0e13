package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/gateway"
	"herald/gateway/platform"
	"herald/internal/clock"
)

// syncBuffer is a console that tests can read while the worker writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type fixture struct {
	g       *gateway.Gateway
	srv     *httptest.Server
	console *syncBuffer
	token   string
}

func newFixture(t *testing.T, env map[string]string) *fixture {
	t.Helper()
	env["HERALD_HOME"] = t.TempDir()
	cfg, err := gateway.LoadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	console := &syncBuffer{}
	reg := platform.Default(platform.Options{Clock: clock.Real{}, Console: console})
	g, err := gateway.Open(context.Background(), cfg, gateway.Deps{Clock: clock.Real{}, Platforms: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	return &fixture{g: g, srv: srv, console: console, token: env["HERALD_TOKEN"]}
}

func (f *fixture) do(t *testing.T, method, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s answered non-JSON %q", method, path, b)
	}
	return resp.StatusCode, out
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func TestBadInputsGetAJSONErrorAndChangeNothing(t *testing.T) {
	f := newFixture(t, map[string]string{"HERALD_MAX_BODY_BYTES": "4096", "HERALD_MAX_TEXT_BYTES": "1024"})
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed JSON", `{"platform":`, 400, "malformed_json"},
		{"an unknown field", `{"platform":"console","chat_id":"c","text":"x","colour":"red"}`, 400, "malformed_json"},
		{"two objects", `{"platform":"console","chat_id":"c","text":"x"}{}`, 400, "malformed_json"},
		{"an unknown platform", `{"platform":"carrier-pigeon","chat_id":"c","text":"x"}`, 400, "unknown_platform"},
		{"no platform", `{"chat_id":"c","text":"x"}`, 400, "invalid_message"},
		{"empty text", `{"platform":"console","chat_id":"c","text":""}`, 400, "invalid_message"},
		{"no chat", `{"platform":"console","text":"x"}`, 400, "invalid_message"},
		{"a text over the limit", `{"platform":"console","chat_id":"c","text":"` + strings.Repeat("x", 2000) + `"}`, 413, "text_too_long"},
		{"a body over the limit", `{"platform":"console","chat_id":"c","text":"` + strings.Repeat("x", 5000) + `"}`, 413, "body_too_large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do(t, "POST", "/v1/messages", tt.body)
			if status != tt.status || errCode(body) != tt.code {
				t.Fatalf("got %d %v, want %d %s", status, body, tt.status, tt.code)
			}
		})
	}
	_, list := f.do(t, "GET", "/v1/messages", "")
	if ms := list["messages"].([]any); len(ms) != 0 {
		t.Fatalf("bad inputs recorded %d messages", len(ms))
	}
	for _, path := range []string{"/v1/messages/0", "/v1/messages/abc", "/v1/messages/99"} {
		if status, body := f.do(t, "GET", path, ""); status != 400 && status != 404 || errCode(body) == "" {
			t.Fatalf("GET %s = %d %v", path, status, body)
		}
	}
}

func TestTheSameKeyNeverMakesASecondMessage(t *testing.T) {
	f := newFixture(t, map[string]string{})
	body := `{"platform":"console","chat_id":"c","text":"hi","idempotency_key":"order-42"}`
	status, first := f.do(t, "POST", "/v1/messages", body)
	if status != 202 || first["state"] != "pending" {
		t.Fatalf("first POST = %d %v", status, first)
	}
	status, again := f.do(t, "POST", "/v1/messages", body)
	if status != 200 || again["id"] != first["id"] {
		t.Fatalf("repeat POST = %d %v, want 200 with id %v", status, again, first["id"])
	}
	status, conflict := f.do(t, "POST", "/v1/messages", `{"platform":"console","chat_id":"c","text":"changed","idempotency_key":"order-42"}`)
	if status != 409 || errCode(conflict) != "idempotency_conflict" {
		t.Fatalf("changed payload = %d %v, want 409", status, conflict)
	}
	status, hdr := f.do(t, "POST", "/v1/messages", `{"platform":"console","chat_id":"c","text":"hi"}`, "Idempotency-Key", "order-42")
	if status != 200 || hdr["id"] != first["id"] {
		t.Fatalf("key in header = %d %v", status, hdr)
	}
}

func TestATokenIsRequiredWhenSet(t *testing.T) {
	f := newFixture(t, map[string]string{"HERALD_TOKEN": "s3cret"})
	body := `{"platform":"console","chat_id":"c","text":"x"}`
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}} {
		if status, out := f.do(t, "POST", "/v1/messages", body, hdr...); status != 401 || errCode(out) != "unauthorized" {
			t.Fatalf("POST with %v = %d %v, want 401", hdr, status, out)
		}
	}
	if status, _ := f.do(t, "POST", "/v1/messages", body, "Authorization", "Bearer s3cret"); status != 202 {
		t.Fatalf("POST with the token = %d", status)
	}
	if status, _ := f.do(t, "GET", "/healthz", ""); status != 200 {
		t.Fatalf("healthz needs no token, got %d", status)
	}
}

func TestAnOpenAddressNeedsAToken(t *testing.T) {
	env := map[string]string{"HERALD_ADDR": "0.0.0.0:8645"}
	_, err := gateway.LoadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "set HERALD_TOKEN") {
		t.Fatalf("LoadConfig on 0.0.0.0 without a token = %v", err)
	}
}

func TestConfigPrecedenceIsFlagsThenEnvThenFile(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/herald.json"
	if err := writeFile(file, `{"home":"from-file","addr":"127.0.0.1:1","platforms":{"hook":"webhook:https://example.com/h?secret=x"},"lease":"90s"}`); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HERALD_CONFIG": file, "HERALD_ADDR": "127.0.0.1:2"}
	cfg, err := gateway.LoadConfig([]string{"--home", "from-flag"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Home != "from-flag" || cfg.Addr != "127.0.0.1:2" || time.Duration(cfg.Lease) != 90*time.Second {
		t.Fatalf("config = home %q addr %q lease %v", cfg.Home, cfg.Addr, time.Duration(cfg.Lease))
	}
	if got := strings.Join(cfg.PlatformNames(), ","); got != "console,hook" {
		t.Fatalf("platforms = %s", got)
	}
	if err := writeFile(file, `{"hme":"typo"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.LoadConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "hme") {
		t.Fatalf("a config file typo = %v, want an error naming it", err)
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
