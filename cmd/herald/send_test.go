package main

import (
	"strings"
	"testing"
)

func TestSendPostsAMessageAndWaitsForItsEnd(t *testing.T) {
	url := mustServeGateway(t, map[string]string{}, true)
	env := map[string]string{"HERALD_ADDR": url}
	code, out, errOut := runHerald(t, env, "send", "--chat", "me", "--text", "hello", "--key", "k1", "--wait", "10s")
	if code != 0 || errOut != "" {
		t.Fatalf("send: exit %d, stderr %q", code, errOut)
	}
	if v := mustDecode(t, out); v["state"] != "delivered" || v["idempotency_key"] != "k1" {
		t.Fatalf("send printed %v, want the delivered message", v)
	}
	code, _, errOut = runHerald(t, env, "send", "--chat", "me", "--text", "changed", "--key", "k1")
	if code != 1 || !strings.Contains(errOut, "different platform, chat or text") {
		t.Fatalf("send with a reused key: exit %d, stderr %q; want the server's conflict message", code, errOut)
	}
	code, _, errOut = runHerald(t, env, "send", "--platform", "pigeon", "--chat", "me", "--text", "x")
	if code != 2 || !strings.Contains(errOut, `unknown platform "pigeon"`) {
		t.Fatalf("send to an unknown platform: exit %d, stderr %q; want exit 2 with the server's message", code, errOut)
	}
}
