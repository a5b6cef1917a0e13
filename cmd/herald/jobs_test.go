package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"herald/gateway"
	"herald/gateway/platform"
	"herald/internal/clock"
)

// mustServeGateway opens a gateway on a fresh data directory, serves its API
// over httptest and, when running, runs it (scheduler and worker included)
// until the test ends. env configures the gateway; it returns the API's URL.
func mustServeGateway(t *testing.T, env map[string]string, running bool) string {
	t.Helper()
	env["HERALD_HOME"] = t.TempDir()
	env["HERALD_ADDR"] = "127.0.0.1:0" // Run's own listener; the tests use httptest's
	cfg, err := gateway.LoadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	reg := platform.Default(platform.Options{Clock: clock.Real{}, Console: io.Discard})
	g, err := gateway.Open(context.Background(), cfg, gateway.Deps{Clock: clock.Real{}, Platforms: reg, Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(srv.Close)
	if running {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("gateway Run = %v", err)
			}
		})
	}
	return srv.URL
}

// mustDecode decodes a command's JSON output.
func mustDecode(t *testing.T, out string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, out)
	}
	return v
}

// tableRows splits a table into its header's fields and its data lines.
func tableRows(t *testing.T, out string) ([]string, []string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) == 0 || out == "" {
		t.Fatalf("no table in %q", out)
	}
	return strings.Fields(lines[0]), lines[1:]
}

// waitForRunnable retries `herald jobs run REF` until the scheduler, just
// started, takes manual runs (the API answers 503 not_ready before).
func waitForRunnable(t *testing.T, env map[string]string, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last string
	err := clock.PollReal(ctx, 10*time.Millisecond, func() bool {
		code, _, errOut := runHerald(t, env, "jobs", "run", ref)
		last = errOut
		return code == 0
	})
	if err != nil {
		t.Fatalf("the scheduler never took a manual run: %v (last: %s)", err, last)
	}
}

func TestTheJobsCommandsDriveARunningHerald(t *testing.T) {
	url := mustServeGateway(t, map[string]string{"HERALD_TZ": "UTC"}, true)
	env := map[string]string{"HERALD_ADDR": url}
	mustRun := func(t *testing.T, args ...string) string {
		t.Helper()
		code, out, errOut := runHerald(t, env, append([]string{"jobs"}, args...)...)
		if code != 0 || errOut != "" {
			t.Fatalf("herald jobs %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
		}
		return out
	}

	t.Run("add creates an exec job from --exec and verbatim --args", func(t *testing.T) {
		job := mustDecode(t, mustRun(t, "add", "--name", "backup", "--spec", "0 3 * * *", "--zone", "Asia/Shanghai",
			"--exec", "sh -c", "--arg", "echo backed up; exit 3", "--budget", "5m", "--catchup", "skip", "--catchup-cap", "3",
			"--grace", "90s", "--rerun-interrupted"))
		action := job["action"].(map[string]any)
		cmd, _ := json.Marshal(action["command"])
		if job["name"] != "backup" || job["zone"] != "Asia/Shanghai" || action["kind"] != "exec" ||
			string(cmd) != `["sh","-c","echo backed up; exit 3"]` || job["budget"] != "5m0s" || job["catchup"] != "skip" ||
			job["catchup_cap"] != float64(3) || job["grace"] != "1m30s" || job["rerun_interrupted"] != true {
			t.Fatalf("created job = %v", job)
		}
	})
	t.Run("add creates a message job that delivers to console by default", func(t *testing.T) {
		job := mustDecode(t, mustRun(t, "add", "--name", "brief", "--spec", "@daily", "--text", "brief from {{.Job}}", "--chat", "ops", "--paused"))
		if job["platform"] != "console" || job["chat_id"] != "ops" || job["paused"] != true || job["effective_zone"] != "UTC" {
			t.Fatalf("created job = %v", job)
		}
	})
	t.Run("add creates an http job with an anchored interval", func(t *testing.T) {
		job := mustDecode(t, mustRun(t, "add", "--name", "ping", "--spec", "every 90m", "--anchor", "2026-01-01T00:15:00+01:00",
			"--http-url", "http://127.0.0.1:9/ping", "--http-method", "POST", "--http-header", "X-Token: abc", "--http-body", "{}"))
		action := job["action"].(map[string]any)
		headers, _ := action["headers"].(map[string]any)
		if job["anchor"] != "2025-12-31T23:15:00Z" || action["kind"] != "http" || action["method"] != "POST" ||
			headers["X-Token"] != "abc" || action["body"] != "{}" {
			t.Fatalf("created job = %v", job)
		}
	})

	t.Run("ls prints one row per job with its next local run", func(t *testing.T) {
		header, rows := tableRows(t, mustRun(t, "ls"))
		if strings.Join(header, " ") != "ID NAME SPEC ZONE NEXT(local) PAUSED MISSED" || len(rows) != 3 {
			t.Fatalf("ls printed header %v and %d rows", header, len(rows))
		}
		f := strings.Fields(rows[0])
		if len(f) != 11 || f[0] != "1" || f[1] != "backup" || strings.Join(f[2:7], " ") != "0 3 * * *" ||
			f[7] != "Asia/Shanghai" || !strings.HasSuffix(f[8], "T03:00:00+08:00") || f[9] != "no" || f[10] != "0" {
			t.Fatalf("ls row for backup = %q", rows[0])
		}
		if f := strings.Fields(rows[1]); f[1] != "brief" || f[len(f)-2] != "yes" {
			t.Fatalf("ls row for brief = %q", rows[1])
		}
	})
	t.Run("ls --json prints the API's list", func(t *testing.T) {
		list := mustDecode(t, mustRun(t, "ls", "--json"))
		if jobs, _ := list["jobs"].([]any); len(jobs) != 3 {
			t.Fatalf("ls --json = %v", list)
		}
	})
	t.Run("show finds a job by name or by id, flags before or after", func(t *testing.T) {
		byName := mustRun(t, "show", "backup")
		byID := mustRun(t, "show", "1", "--addr", url)
		if byName != byID || mustDecode(t, byName)["name"] != "backup" {
			t.Fatalf("show backup and show 1 differ:\n%s\n%s", byName, byID)
		}
	})
	t.Run("pause and resume flip the PAUSED column", func(t *testing.T) {
		if out := mustRun(t, "pause", "backup"); out != "paused job 1 (backup)\n" {
			t.Fatalf("pause printed %q", out)
		}
		if _, rows := tableRows(t, mustRun(t, "ls")); !strings.Contains(rows[0], " yes ") {
			t.Fatalf("after pause: %q", rows[0])
		}
		out := mustRun(t, "resume", "1")
		if !strings.HasPrefix(out, "resumed job 1 (backup), next run ") || !strings.HasSuffix(out, "T03:00:00+08:00\n") {
			t.Fatalf("resume printed %q", out)
		}
	})

	t.Run("run --wait prints the finished execution", func(t *testing.T) {
		waitForRunnable(t, env, "brief")
		e := mustDecode(t, mustRun(t, "run", "brief", "--wait", "10s"))
		if e["kind"] != "manual" || e["state"] != "succeeded" || e["output"] != "brief from brief" {
			t.Fatalf("run --wait printed %v", e)
		}
	})
	t.Run("run --wait of a failing job prints it and exits 1", func(t *testing.T) {
		code, out, errOut := runHerald(t, env, "jobs", "run", "backup", "--wait", "10s")
		e := mustDecode(t, out)
		want := "herald: execution " + jsonNumber(e["id"]) + " of job backup ended failed: exit status 3\n"
		if code != 1 || e["state"] != "failed" || errOut != want {
			t.Fatalf("exit %d, stderr %q (want %q), execution %v", code, errOut, want, e)
		}
	})
	t.Run("history lists the runs newest first", func(t *testing.T) {
		header, rows := tableRows(t, mustRun(t, "history", "brief"))
		if strings.Join(header, " ") != "ID KIND SLOT STATE CAUSE LATE" || len(rows) != 2 {
			t.Fatalf("history printed header %v and rows %q", header, rows)
		}
		// The first run of brief (from waitForRunnable) may still be going;
		// the newest is the one run --wait saw succeed.
		if f := strings.Fields(rows[0]); len(f) != 6 || f[1] != "manual" || f[3] != "succeeded" || f[4] != "ok" || f[5] != "0s" {
			t.Fatalf("newest history row = %q", rows[0])
		}
		list := mustDecode(t, mustRun(t, "history", "brief", "--json", "--limit", "1"))
		if es, _ := list["executions"].([]any); len(es) != 1 {
			t.Fatalf("history --json --limit 1 = %v", list)
		}
	})
	t.Run("rm deletes a job, after which it is not found", func(t *testing.T) {
		if out := mustRun(t, "rm", "backup"); out != "deleted job backup\n" {
			t.Fatalf("rm printed %q", out)
		}
		code, out, errOut := runHerald(t, env, "jobs", "show", "backup")
		if code != 1 || out != "" || errOut != "herald: job \"backup\": not found\n" {
			t.Fatalf("show after rm: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestTheJobsCommandsFailWithOneLine(t *testing.T) {
	url := mustServeGateway(t, map[string]string{"HERALD_TZ": "UTC"}, false)
	env := map[string]string{"HERALD_ADDR": url}
	if code, _, errOut := runHerald(t, env, "jobs", "add", "--name", "taken", "--spec", "@daily", "--exec", "true"); code != 0 {
		t.Fatalf("add taken: exit %d, %s", code, errOut)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string // the whole stderr line
	}{
		{"a bad spec is the server's 400, a usage error", []string{"add", "--name", "a", "--spec", "61 * * * *", "--exec", "true"},
			2, `herald: spec: bad spec "61 * * * *": minute field: 61 out of range 0-59`},
		{"an unknown zone is the server's 400", []string{"add", "--name", "a", "--spec", "@daily", "--zone", "Mars/Olympus", "--exec", "true"},
			2, `herald: zone: unknown zone "Mars/Olympus": want an IANA name such as "Europe/Berlin"`},
		{"a name in use is a conflict, exit 1", []string{"add", "--name", "taken", "--spec", "@daily", "--exec", "true"},
			1, `herald: conflict: a job named "taken" already exists`},
		{"an unknown job is not found, exit 1", []string{"pause", "nope"}, 1, `herald: job "nope": not found`},
		{"a manual run before the scheduler runs is not ready", []string{"run", "taken"},
			1, `herald: run job 1: the scheduler is not running`},
		{"add without an action", []string{"add", "--name", "a", "--spec", "@daily"},
			2, `herald: usage: give an action: --text, --exec or --http-url`},
		{"add with two actions", []string{"add", "--name", "a", "--spec", "@daily", "--text", "hi", "--exec", "true"},
			2, `herald: usage: give one action, not --text and --exec`},
		{"add without a name", []string{"add", "--spec", "@daily", "--exec", "true"},
			2, `herald: usage: --name and --spec are required (want herald jobs add --name NAME --spec SPEC [--zone ZONE] (--text T | --exec CMD [--arg A ...] | --http-url U) [flags])`},
		{"add with a bad --anchor", []string{"add", "--name", "a", "--spec", "every 1h", "--anchor", "soon", "--exec", "true"},
			2, `herald: usage: --anchor "soon" is not an RFC 3339 instant (want e.g. 2026-03-08T02:30:00-05:00 or 2026-03-08T07:30:00Z)`},
		{"add with a bad duration", []string{"add", "--name", "a", "--spec", "@daily", "--exec", "true", "--budget", "soon"},
			2, `herald: usage: invalid value "soon" for flag -budget: parse error (see herald jobs add -h)`},
		{"show without a job", []string{"show"}, 2, "herald: usage: want `herald jobs show NAME|ID`"},
		{"show with two jobs", []string{"show", "a", "b"}, 2, "herald: usage: want `herald jobs show NAME|ID`"},
		{"no verb", []string{}, 2, "herald: usage: want `herald jobs add|ls|show|rm|pause|resume|run|history`"},
		{"an unknown verb", []string{"edit", "taken"}, 2, `herald: usage: unknown jobs command "edit" (want add|ls|show|rm|pause|resume|run|history)`},
		{"a history limit the server refuses", []string{"history", "taken", "--limit", "0"}, 2, `herald: limit "0": want 1..1000`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runHerald(t, env, append([]string{"jobs"}, tt.args...)...)
			if code != tt.code || out != "" || errOut != tt.want+"\n" {
				t.Fatalf("exit %d (want %d), stdout %q\n got stderr %q\nwant stderr %q", code, tt.code, out, errOut, tt.want+"\n")
			}
		})
	}
	code, out, _ := runHerald(t, env, "jobs", "ls")
	if _, rows := tableRows(t, out); code != 0 || len(rows) != 1 {
		t.Fatalf("refused commands changed the jobs: %q", out)
	}
}

func TestTheJobsCommandsSendTheToken(t *testing.T) {
	url := mustServeGateway(t, map[string]string{"HERALD_TOKEN": "s3cret"}, false)
	code, _, errOut := runHerald(t, map[string]string{"HERALD_ADDR": url}, "jobs", "ls")
	if code != 1 || errOut != "herald: missing or wrong bearer token (set HERALD_TOKEN)\n" {
		t.Fatalf("ls without the token: exit %d, stderr %q", code, errOut)
	}
	code, out, errOut := runHerald(t, map[string]string{"HERALD_TOKEN": "s3cret"}, "jobs", "ls", "--addr", url)
	if code != 0 || errOut != "" || out != "ID  NAME  SPEC  ZONE  NEXT(local)  PAUSED  MISSED\n" {
		t.Fatalf("ls with the token: exit %d, stderr %q, stdout %q", code, errOut, out)
	}
}

func TestTheJobsCommandsSayWhenHeraldIsUnreachable(t *testing.T) {
	srv := httptest.NewServer(nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // a port nothing listens on any more
	code, _, errOut := runHerald(t, map[string]string{"HERALD_ADDR": addr}, "jobs", "ls")
	if code != 1 || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "herald: call herald at http://"+addr+": ") ||
		!strings.HasSuffix(errOut, "(is `herald serve` running?)\n") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestBaseURLDialsWhatTheServerListensOn(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"127.0.0.1:8645", "http://127.0.0.1:8645"},
		{":8645", "http://127.0.0.1:8645"},
		{"0.0.0.0:8645", "http://127.0.0.1:8645"},
		{"[::]:8645", "http://127.0.0.1:8645"},
		{"[::1]:8645", "http://[::1]:8645"},
		{"http://herald.internal:80/", "http://herald.internal:80"},
	}
	for _, tt := range tests {
		if got := baseURL(tt.addr); got != tt.want {
			t.Errorf("baseURL(%q) = %q, want %q", tt.addr, got, tt.want)
		}
	}
}
