package platform

import (
	"net/http"
	"testing"
	"time"

	"herald/internal/clock"
)

// TestSignMatchesTheStandardWebhooksVector checks sign against the test
// vector of the Standard Webhooks reference libraries (libraries/go,
// TestWebhookSign): a second, independent source beside the receiver-side
// check in webhook_test.go.
func TestSignMatchesTheStandardWebhooksVector(t *testing.T) {
	w, err := NewWebhook("https://example.com/?secret=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Options{Clock: clock.NewManual(time.Unix(1614265330, 0))})
	if err != nil {
		t.Fatal(err)
	}
	got := w.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330", []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("sign = %q, want %q", got, want)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 8, 6, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"120", 2 * time.Minute, true},
		{" 3 ", 3 * time.Second, true},
		{"1.5", 1500 * time.Millisecond, true},
		{now.Add(45 * time.Second).Format(http.TimeFormat), 45 * time.Second, true},
		{"Sunday, 08-Mar-26 06:01:00 GMT", time.Minute, true}, // RFC 850, obsolete but allowed
		{"Sun Mar  8 06:02:00 2026", 2 * time.Minute, true},   // asctime
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"-5", 0, false},
		{"NaN", 0, false},
		{"1e3", 0, false},
		{"0x10", 0, false},
		{"1.2.3", 0, false},
		{"soon", 0, false},
		{"9999999999999999999999", MaxRetryAfter, true},
		{now.Add(100 * 24 * time.Hour).Format(http.TimeFormat), MaxRetryAfter, true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}
