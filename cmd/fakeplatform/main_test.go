package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald/fakeplatform"
	"herald/internal/clock"
)

// buildBinary compiles cmd/fakeplatform into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "fakeplatform")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

var listening = regexp.MustCompile(`^fakeplatform: listening on (http://127\.0\.0\.1:\d+)$`)

// TestBinaryServesJournalsAndShutsDownOnSIGTERM runs the built binary as a
// child process on a virtual clock: it parses the listening line, sends a
// message, parks a second one on a hold, sends SIGTERM and expects the held
// send to be answered, exit code 0 and both sends in the journal at the
// virtual time.
func TestBinaryServesJournalsAndShutsDownOnSIGTERM(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal.jsonl")
	clockFile := filepath.Join(dir, "clock")
	virtual := time.Date(2031, 1, 2, 3, 4, 5, 600000000, time.UTC)
	if err := clock.WriteFile(clockFile, virtual); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--journal", journal, "--dedup-window", "1m")
	cmd.Env = append(os.Environ(), clock.EnvFile+"="+clockFile)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // only if the test failed before SIGTERM
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var base string
	select {
	case l := <-lines:
		m := listening.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("first stdout line = %q, want the listening line", l)
		}
		base = m[1]
	case err := <-exited:
		t.Fatalf("fakeplatform exited before listening: %v\n%s", err, stderr.String())
	case <-time.After(10 * time.Second):
		t.Fatalf("no listening line within 10 s\n%s", stderr.String())
	}

	client := &http.Client{Timeout: 10 * time.Second}
	post := func(path, body string) (int, string, error) {
		resp, err := client.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b)), err
	}
	if code, body, err := post("/discord/chats/c1/messages", `{"text":"hello","idempotency_key":"k1"}`); err != nil || code != 200 || body != `{"ok":true,"message_id":"1"}` {
		t.Fatalf("send = %d %s %v", code, body, err)
	}
	if code, body, err := post("/control/faults", `{"kind":"hold_before_accept","op":"send"}`); err != nil || code != 201 {
		t.Fatalf("arm fault = %d %s %v", code, body, err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	held := make(chan answer, 1)
	go func() {
		code, body, err := post("/telegram/chats/c2/messages", `{"text":"held"}`)
		held <- answer{code, body, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = clock.PollReal(ctx, 2*time.Millisecond, func() bool {
		resp, err := client.Get(base + "/control/stats")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var st fakeplatform.Stats
		return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Held == 1
	})
	if err != nil {
		t.Fatalf("the second send was never held: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("fakeplatform exited with %v, want 0\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("fakeplatform did not exit within 10 s of SIGTERM\n%s", stderr.String())
	}
	if got := <-held; got.err != nil || got.code != 200 || got.body != `{"ok":true,"message_id":"2"}` {
		t.Fatalf("the held send got %+v, want it released and answered on shutdown", got)
	}
	es, err := fakeplatform.ReadJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Text != "hello" || es[0].Profile != "discord" || es[1].Text != "held" ||
		!es[0].At.Equal(virtual) || !es[1].At.Equal(virtual) {
		t.Fatalf("journal = %+v, want both sends at the virtual time %v", es, virtual)
	}
}

// TestBadCommandLines checks that every bad command line exits 2 with one
// line on stderr and nothing on stdout.
func TestBadCommandLines(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "j")
	tests := []struct {
		name string
		args []string
		want string // substring of the error line
	}{
		{"no command", nil, "missing command"},
		{"an unknown command", []string{"run"}, `unknown command "run"`},
		{"an unknown flag", []string{"serve", "--journal", journal, "--port", "1"}, "flag provided but not defined: -port"},
		{"no journal", []string{"serve"}, "--journal is required"},
		{"a bad duration", []string{"serve", "--journal", journal, "--dedup-window", "ten"}, `invalid value "ten"`},
		{"a zero dedup window", []string{"serve", "--journal", journal, "--dedup-window", "0s"}, "must be positive"},
		{"a stray argument", []string{"serve", "--journal", journal, "extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr, func(string) string { return "" })
			if code != 2 {
				t.Fatalf("exit code = %d, want 2", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "fakeplatform: ") || !strings.Contains(msg, tt.want) {
				t.Fatalf("stderr = %q, want one line containing %q", msg, tt.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// TestStartupFailures checks that a journal that cannot be opened or a
// clock file that cannot be read exits 1 with the reason.
func TestStartupFailures(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a journal in a missing directory", []string{"serve", "--journal", filepath.Join(dir, "no", "j")}, nil, "open journal"},
		{"a missing clock file", []string{"serve", "--journal", filepath.Join(dir, "j")}, map[string]string{clock.EnvFile: filepath.Join(dir, "no-clock")}, clock.EnvFile},
		{"an address that cannot be bound", []string{"serve", "--journal", filepath.Join(dir, "j2"), "--addr", "256.0.0.1:1"}, nil, "listen on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, &stdout, &stderr, func(k string) string { return tt.env[k] })
			if code != 1 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 1 and %q", code, stderr.String(), tt.want)
			}
		})
	}
}

// TestRunInProcess serves in-process until the context ends and checks the
// listening line and a clean exit.
func TestRunInProcess(t *testing.T) {
	journal := filepath.Join(t.TempDir(), "j")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--journal", journal}, pw, &stderr, func(string) string { return "" })
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	m := listening.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		t.Fatalf("listening line = %q", line)
	}
	resp, err := http.Post(m[1]+"/slack/chats/c/messages", "application/json", strings.NewReader(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	go io.Copy(io.Discard, pr)
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if es, err := fakeplatform.ReadJournal(journal); err != nil || len(es) != 1 {
		t.Fatalf("journal = %+v, %v", es, err)
	}
}
