package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestWebhookFlags checks the receiver's flags: a bad secret or tolerance
// is a usage error (exit 2, one line that never quotes the secret), and good
// ones reach the Main.
func TestWebhookFlags(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "j")
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"a secret that is not base64", []string{"--webhook-secret", "whsec_%%%secret%%%"}, "--webhook-secret: webhook secret is not valid base64"},
		{"a secret without a key", []string{"--webhook-secret", "whsec_"}, "holds no key"},
		{"a zero tolerance", []string{"--webhook-tolerance", "0s"}, "--webhook-tolerance must be positive"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"serve", "--journal", journal}, tt.args...)
			code := run(context.Background(), args, &stdout, &stderr, func(string) string { return "" })
			msg := stderr.String()
			if code != 2 || strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and one line containing %q", code, msg, tt.want)
			}
			if strings.Contains(msg, "secret%%%") {
				t.Fatalf("the error quotes the secret: %q", msg)
			}
		})
	}

	m := NewMain(nil, nil, func(string) string { return "" })
	err := m.ParseFlags([]string{"serve", "--journal", journal, "--webhook-secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "--webhook-tolerance", "90s"})
	if err != nil || m.WebhookSecret != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" || m.WebhookTolerance.String() != "1m30s" {
		t.Fatalf("ParseFlags = %v; secret %q, tolerance %v", err, m.WebhookSecret, m.WebhookTolerance)
	}
}
