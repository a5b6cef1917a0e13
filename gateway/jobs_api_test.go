package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/internal/clock"
)

// status sends a request and returns only the status and the raw body, for
// answers that may have none (204).
func (f *fixture) status(t *testing.T, method, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustCreateJob posts a job and fails the test unless it was created.
func (f *fixture) mustCreateJob(t *testing.T, body string) map[string]any {
	t.Helper()
	status, job := f.do(t, "POST", "/v1/jobs", body)
	if status != http.StatusCreated {
		t.Fatalf("POST /v1/jobs %s = %d %v", body, status, job)
	}
	return job
}

// startRun runs the gateway (boot sweep, worker, scheduler, its own
// listener on HERALD_ADDR — give 127.0.0.1:0) until the test ends, and waits
// until the scheduler takes manual runs.
func (f *fixture) startRun(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.g.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run after cancel = %v", err)
		}
	})
	waitFor(t, "the gateway to be ready", func() bool {
		code, _ := f.status(t, "GET", "/readyz")
		return code == http.StatusOK
	})
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clock.PollReal(ctx, 10*time.Millisecond, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func errMessage(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	m, _ := e["message"].(string)
	return m
}

func jobsOf(t *testing.T, f *fixture) []map[string]any {
	t.Helper()
	status, list := f.do(t, "GET", "/v1/jobs", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/jobs = %d %v", status, list)
	}
	var out []map[string]any
	for _, j := range list["jobs"].([]any) {
		out = append(out, j.(map[string]any))
	}
	return out
}

func TestAJobCanBeCreatedListedReadPatchedPausedResumedAndDeleted(t *testing.T) {
	f := newFixture(t, map[string]string{})
	// Asia/Shanghai has kept +08:00 without DST since 1991, so the local
	// readings below hold whatever day the test runs.
	job := f.mustCreateJob(t, `{"name":"nightly","spec":"30 2 * * *","zone":"Asia/Shanghai","action":{"kind":"exec","command":["true"]}}`)
	id := job["id"].(float64)
	if id < 1 {
		t.Fatalf("created job has id %v", job["id"])
	}

	t.Run("the new job carries its definition and the server's defaults", func(t *testing.T) {
		want := map[string]any{
			"name": "nightly", "spec": "30 2 * * *", "zone": "Asia/Shanghai", "effective_zone": "Asia/Shanghai",
			"catchup": "latest", "catchup_cap": float64(10), "budget": "1h0m0s", "grace": "2h0m0s",
			"paused": false, "rerun_interrupted": false, "missed": float64(0), "platform": "", "chat_id": "",
		}
		for k, v := range want {
			if job[k] != v {
				t.Errorf("%s = %#v, want %#v", k, job[k], v)
			}
		}
		local, _ := job["next_run_local"].(string)
		if !strings.HasSuffix(local, "T02:30:00+08:00") {
			t.Errorf("next_run_local = %q, want 02:30 at +08:00", local)
		}
		at, err := time.Parse(time.RFC3339Nano, job["next_run_at"].(string))
		if l, err2 := time.Parse(time.RFC3339, local); err != nil || err2 != nil || !at.Equal(l) {
			t.Errorf("next_run_at %v and next_run_local %q are not one instant", job["next_run_at"], local)
		}
	})

	t.Run("it is listed, and found by id and by name", func(t *testing.T) {
		jobs := jobsOf(t, f)
		if len(jobs) != 1 || jobs[0]["id"] != id {
			t.Fatalf("GET /v1/jobs = %v", jobs)
		}
		for _, ref := range []string{"1", "nightly"} {
			status, got := f.do(t, "GET", "/v1/jobs/"+ref, "")
			if status != http.StatusOK || got["id"] != id || got["name"] != "nightly" {
				t.Fatalf("GET /v1/jobs/%s = %d %v", ref, status, got)
			}
		}
	})

	t.Run("a patch changes only the fields it names and moves the next run", func(t *testing.T) {
		status, got := f.do(t, "PATCH", "/v1/jobs/nightly", `{"spec":"0 9 * * *","budget":"5m"}`)
		if status != http.StatusOK {
			t.Fatalf("PATCH = %d %v", status, got)
		}
		if got["spec"] != "0 9 * * *" || got["budget"] != "5m0s" || got["zone"] != "Asia/Shanghai" || got["catchup"] != "latest" {
			t.Fatalf("patched job = %v", got)
		}
		if local, _ := got["next_run_local"].(string); !strings.HasSuffix(local, "T09:00:00+08:00") {
			t.Fatalf("next_run_local after the patch = %q, want 09:00 at +08:00", local)
		}
	})

	t.Run("pause and resume flip paused and keep a next run", func(t *testing.T) {
		for _, paused := range []bool{true, false} {
			body := `{"paused":false}`
			if paused {
				body = `{"paused":true}`
			}
			status, got := f.do(t, "PATCH", "/v1/jobs/1", body)
			if status != http.StatusOK || got["paused"] != paused || got["next_run_at"] == nil {
				t.Fatalf("PATCH %s = %d %v", body, status, got)
			}
			if _, again := f.do(t, "GET", "/v1/jobs/nightly", ""); again["paused"] != paused {
				t.Fatalf("GET after PATCH %s: paused = %v", body, again["paused"])
			}
		}
	})

	t.Run("a delete removes it from every read and frees its name", func(t *testing.T) {
		if status, body := f.status(t, "DELETE", "/v1/jobs/nightly"); status != http.StatusNoContent || body != "" {
			t.Fatalf("DELETE = %d %q, want 204 and no body", status, body)
		}
		for _, path := range []string{"/v1/jobs/nightly", "/v1/jobs/1"} {
			if status, got := f.do(t, "GET", path, ""); status != http.StatusNotFound || errCode(got) != "not_found" {
				t.Fatalf("GET %s after delete = %d %v", path, status, got)
			}
		}
		if status, got := f.do(t, "DELETE", "/v1/jobs/1", ""); status != http.StatusNotFound {
			t.Fatalf("second DELETE = %d %v", status, got)
		}
		if jobs := jobsOf(t, f); len(jobs) != 0 {
			t.Fatalf("jobs after delete = %v", jobs)
		}
		again := f.mustCreateJob(t, `{"name":"nightly","spec":"@daily","action":{"kind":"exec","command":["true"]}}`)
		if again["id"] == id {
			t.Fatalf("a new job reused id %v", id)
		}
	})
}

func TestJobRequestsTheServerRefusesGetExactCodesAndMessages(t *testing.T) {
	f := newFixture(t, map[string]string{"HERALD_TZ": "UTC"})
	f.mustCreateJob(t, `{"name":"taken","spec":"@hourly","action":{"kind":"exec","command":["true"]}}`)
	const exec = `"action":{"kind":"exec","command":["true"]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
		message                  string // exact, or a prefix when it ends in "…"
	}{
		{"a bad spec", "POST", "/v1/jobs", `{"name":"a","spec":"61 * * * *",` + exec + `}`,
			400, "bad_spec", `spec: bad spec "61 * * * *": minute field: 61 out of range 0-59`},
		{"an interval that is not a duration", "POST", "/v1/jobs", `{"name":"a","spec":"every fortnight",` + exec + `}`,
			400, "bad_spec", `spec: bad spec "every fortnight": interval: "fortnight" is not a duration (want e.g. 90m, 2h or 1h30m)`},
		{"an unknown zone", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","zone":"Mars/Olympus",` + exec + `}`,
			400, "unknown_zone", `zone: unknown zone "Mars/Olympus": want an IANA name such as "Europe/Berlin"`},
		{"a one-shot in the past", "POST", "/v1/jobs", `{"name":"a","spec":"at 2020-01-01T09:00","zone":"UTC",` + exec + `}`,
			400, "invalid_job", `invalid job: spec "at 2020-01-01T09:00": the one-shot at 2020-01-01T09:00:00Z is in the past (now …`},
		{"a zero budget", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","budget":"0s",` + exec + `}`,
			400, "invalid_job", `invalid job: budget 0s: the run budget must be positive`},
		{"a negative budget", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","budget":"-5m",` + exec + `}`,
			400, "invalid_job", `invalid job: budget -5m0s: the run budget must be positive`},
		{"an exec action without a command", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","action":{"kind":"exec"}}`,
			400, "bad_action", `action: bad action: exec: command is empty`},
		{"an action of an unknown kind", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","action":{"kind":"telegram"}}`,
			400, "bad_action", `action: bad action: unknown kind "telegram" (want message, exec or http)`},
		{"no action at all", "POST", "/v1/jobs", `{"name":"a","spec":"@daily"}`,
			400, "bad_action", `action: bad action: kind is empty (want message, exec or http)`},
		{"a message action with nowhere to deliver", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","action":{"kind":"message","text":"hi"}}`,
			400, "invalid_job", `invalid job: a message action needs a platform and chat_id to deliver to`},
		{"an unconfigured platform", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","platform":"pigeon","chat_id":"c",` + exec + `}`,
			400, "invalid_job", `invalid job: platform "pigeon" is not configured`},
		{"an unknown catch-up policy", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","catchup":"sometimes",` + exec + `}`,
			400, "invalid_job", `invalid job: catchup "sometimes": want latest, skip or all`},
		{"a name with a leading dash", "POST", "/v1/jobs", `{"name":"-a","spec":"@daily",` + exec + `}`,
			400, "invalid_job", `invalid job: name "-a": want 1-128 characters of letters, digits, '.', '_' or '-', starting with a letter or digit`},
		{"an unknown JSON field", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","colour":"red",` + exec + `}`,
			400, "malformed_json", `request body is not a valid object: json: unknown field "colour"`},
		{"a duration that is not one", "POST", "/v1/jobs", `{"name":"a","spec":"@daily","budget":"soon",` + exec + `}`,
			400, "malformed_json", `request body is not a valid object: duration "soon": want Go duration text such as "90s" or "2h"`},
		{"a name in use", "POST", "/v1/jobs", `{"name":"taken","spec":"@daily",` + exec + `}`,
			409, "conflict", `conflict: a job named "taken" already exists`},
		{"a patch to a bad spec", "PATCH", "/v1/jobs/taken", `{"spec":"@fortnightly"}`,
			400, "bad_spec", `spec: bad spec "@fortnightly": unknown descriptor "@fortnightly" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every DURATION)`},
		{"a patch with an unknown field", "PATCH", "/v1/jobs/taken", `{"pause":true}`,
			400, "malformed_json", `request body is not a valid object: json: unknown field "pause"`},
		{"an unknown job by name", "GET", "/v1/jobs/nope", ``, 404, "not_found", `job "nope": not found`},
		{"an unknown job by id", "GET", "/v1/jobs/999", ``, 404, "not_found", `job 999: not found`},
		{"a patch of an unknown job", "PATCH", "/v1/jobs/nope", `{"paused":true}`, 404, "not_found", `job "nope": not found`},
		{"a delete of an unknown job", "DELETE", "/v1/jobs/nope", ``, 404, "not_found", `job "nope": not found`},
		{"a run of an unknown job", "POST", "/v1/jobs/nope/run", ``, 404, "not_found", `job "nope": not found`},
		{"the executions of an unknown job", "GET", "/v1/jobs/nope/executions", ``, 404, "not_found", `job "nope": not found`},
		{"the preview of an unknown job", "GET", "/v1/jobs/nope/preview", ``, 404, "not_found", `job "nope": not found`},
		{"a preview count of zero", "GET", "/v1/jobs/taken/preview?count=0", ``, 400, "invalid_query", `count "0": want 1..1000`},
		{"a preview count over the cap", "GET", "/v1/jobs/taken/preview?count=1001", ``, 400, "invalid_query", `count "1001": want 1..1000`},
		{"an executions limit of zero", "GET", "/v1/jobs/taken/executions?limit=0", ``, 400, "invalid_query", `limit "0": want 1..1000`},
		{"a settled probe at no instant", "GET", "/v1/debug/settled?at=soon", ``, 400, "invalid_query", `at "soon" is not an RFC 3339 instant`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do(t, tt.method, tt.path, tt.body)
			msg := errMessage(body)
			okMsg := msg == tt.message
			if prefix, ok := strings.CutSuffix(tt.message, "…"); ok {
				okMsg = strings.HasPrefix(msg, prefix)
			}
			if status != tt.status || errCode(body) != tt.code || !okMsg {
				t.Fatalf("%s %s %s\n got  %d %s %q\n want %d %s %q", tt.method, tt.path, tt.body, status, errCode(body), msg, tt.status, tt.code, tt.message)
			}
		})
	}
	jobs := jobsOf(t, f)
	if len(jobs) != 1 || jobs[0]["name"] != "taken" || jobs[0]["spec"] != "@hourly" {
		t.Fatalf("refused requests changed the jobs: %v", jobs)
	}
}

func TestPreviewListsTheNextOccurrencesInOrderWithLocalOffsets(t *testing.T) {
	f := newFixture(t, map[string]string{})
	f.mustCreateJob(t, `{"name":"ny","spec":"30 2 * * *","zone":"America/New_York","action":{"kind":"exec","command":["true"]}}`)
	f.mustCreateJob(t, `{"name":"tick","spec":"every 90m","zone":"Asia/Kolkata","anchor":"2026-01-01T00:15:00Z","action":{"kind":"exec","command":["true"]}}`)
	f.mustCreateJob(t, `{"name":"once","spec":"at 2999-12-31T23:59","zone":"Pacific/Chatham","action":{"kind":"exec","command":["true"]}}`)
	tests := []struct {
		name, path, zone string
		count            int
		step             time.Duration // exact spacing, when fixed
	}{
		{"a daily spec answers count occurrences", "/v1/jobs/ny/preview?count=7", "America/New_York", 7, 0},
		{"the count defaults to ten", "/v1/jobs/ny/preview", "America/New_York", 10, 0},
		{"an interval steps by its period", "/v1/jobs/tick/preview?count=5", "Asia/Kolkata", 5, 90 * time.Minute},
		{"a one-shot has one occurrence whatever the count", "/v1/jobs/once/preview?count=5", "Pacific/Chatham", 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := f.do(t, "GET", tt.path, "")
			if status != http.StatusOK || body["zone"] != tt.zone {
				t.Fatalf("GET %s = %d %v", tt.path, status, body)
			}
			occ := body["occurrences"].([]any)
			if len(occ) != tt.count {
				t.Fatalf("got %d occurrences, want %d: %v", len(occ), tt.count, occ)
			}
			loc, err := time.LoadLocation(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			var prev time.Time
			for i, o := range occ {
				m := o.(map[string]any)
				at, err := time.Parse(time.RFC3339Nano, m["at"].(string))
				if err != nil || at.Location() != time.UTC {
					t.Fatalf("occurrence %d: at %q is not a UTC instant", i, m["at"])
				}
				if want := at.In(loc).Format(time.RFC3339); m["local"] != want {
					t.Fatalf("occurrence %d: local %q, want %q (at in %s)", i, m["local"], want, tt.zone)
				}
				if i > 0 && !at.After(prev) {
					t.Fatalf("occurrence %d (%s) is not after %s", i, at, prev)
				}
				if i > 0 && tt.step > 0 && at.Sub(prev) != tt.step {
					t.Fatalf("occurrence %d is %s after the previous, want %s", i, at.Sub(prev), tt.step)
				}
				if tt.zone == "America/New_York" {
					l := at.In(loc)
					// 02:30, or 03:00 on a spring-forward day (SPEC §5).
					if !(l.Hour() == 2 && l.Minute() == 30) && !(l.Hour() == 3 && l.Minute() == 0) {
						t.Fatalf("occurrence %d reads %s in New York", i, m["local"])
					}
				}
				prev = at
			}
		})
	}
}

func TestManualRunsAnswerNotReadyUntilTheSchedulerRuns(t *testing.T) {
	f := newFixture(t, map[string]string{})
	f.mustCreateJob(t, `{"name":"j","spec":"@daily","action":{"kind":"exec","command":["true"]}}`)
	status, body := f.do(t, "POST", "/v1/jobs/j/run", "")
	if status != http.StatusServiceUnavailable || errCode(body) != "not_ready" || errMessage(body) != "run job 1: the scheduler is not running" {
		t.Fatalf("POST run before Run = %d %v", status, body)
	}
	status, body = f.do(t, "GET", "/v1/debug/settled", "")
	reasons, _ := body["reasons"].([]any)
	if status != http.StatusServiceUnavailable || body["settled"] != false || len(reasons) == 0 ||
		reasons[0] != "no tick yet" {
		t.Fatalf("settled before any tick = %d %v", status, body)
	}
	if _, list := f.do(t, "GET", "/v1/jobs/j/executions", ""); len(list["executions"].([]any)) != 0 {
		t.Fatalf("a refused run left an execution: %v", list)
	}
}

func TestManualRunsAreRecordedAndTheProbeSettles(t *testing.T) {
	f := newFixture(t, map[string]string{"HERALD_ADDR": "127.0.0.1:0", "HERALD_POLL_INTERVAL": "20ms"})
	f.startRun(t)
	// Far-off schedules: nothing fires by itself during the test.
	msg := f.mustCreateJob(t, `{"name":"greet","spec":"0 0 1 1 *","zone":"UTC","platform":"console","chat_id":"ops","paused":true,
		"action":{"kind":"message","text":"hello from {{.Job}}, manual={{.Manual}}"}}`)
	f.mustCreateJob(t, `{"name":"fail","spec":"0 0 1 1 *","zone":"UTC","action":{"kind":"exec","command":["sh","-c","echo out; exit 3"]}}`)

	// run starts a manual run; the scheduler may still be taking its first
	// steps, so a 503 not_ready is retried.
	run := func(t *testing.T, ref string) map[string]any {
		t.Helper()
		var body map[string]any
		waitFor(t, "a manual run to be accepted", func() bool {
			var status int
			status, body = f.do(t, "POST", "/v1/jobs/"+ref+"/run", "")
			return status == http.StatusAccepted
		})
		return body
	}
	// finished waits for execution id of job ref to end.
	finished := func(t *testing.T, ref string, id any) map[string]any {
		t.Helper()
		var e map[string]any
		waitFor(t, "the execution to end", func() bool {
			_, list := f.do(t, "GET", "/v1/jobs/"+ref+"/executions", "")
			for _, x := range list["executions"].([]any) {
				if m := x.(map[string]any); m["id"] == id {
					e = m
					return m["finished_at"] != nil
				}
			}
			return false
		})
		return e
	}

	t.Run("a manual run of a paused message job delivers its text and keeps the next run", func(t *testing.T) {
		e := run(t, "greet")
		if e["kind"] != "manual" || e["job_id"] != msg["id"] || e["late_ms"] != float64(0) {
			t.Fatalf("run answer = %v", e)
		}
		done := finished(t, "greet", e["id"])
		if done["state"] != "succeeded" || done["cause"] != "ok" || done["output"] != "hello from greet, manual=true" || done["message_id"] == nil {
			t.Fatalf("finished execution = %v", done)
		}
		waitFor(t, "the console to print the message", func() bool {
			return strings.Contains(f.console.String(), "hello from greet, manual=true")
		})
		if _, j := f.do(t, "GET", "/v1/jobs/greet", ""); j["next_run_at"] != msg["next_run_at"] || j["paused"] != true {
			t.Fatalf("a manual run moved the job: before %v, after %v", msg, j)
		}
	})

	t.Run("a failing command ends failed with its exit status and output", func(t *testing.T) {
		e := run(t, "fail")
		done := finished(t, "fail", e["id"])
		if done["state"] != "failed" || done["cause"] != "exit status 3" || done["output"] != "out\n" {
			t.Fatalf("finished execution = %v", done)
		}
	})

	t.Run("executions list newest first and honour the limit", func(t *testing.T) {
		second := run(t, "fail")
		finished(t, "fail", second["id"])
		_, list := f.do(t, "GET", "/v1/jobs/fail/executions", "")
		es := list["executions"].([]any)
		if len(es) != 2 || es[0].(map[string]any)["id"] != second["id"] {
			t.Fatalf("executions = %v", es)
		}
		if _, one := f.do(t, "GET", "/v1/jobs/fail/executions?limit=1", ""); len(one["executions"].([]any)) != 1 {
			t.Fatalf("limit=1 answered %v", one)
		}
	})

	t.Run("the settled probe answers 200 once nothing is due or in flight", func(t *testing.T) {
		// A fixed instant: with a real clock the default (the request's own
		// now) is settled only if a tick happens to start after it.
		at := clock.Real{}.Now().UTC().Format(time.RFC3339Nano)
		var body map[string]any
		waitFor(t, "the probe to settle", func() bool {
			var status int
			status, body = f.do(t, "GET", "/v1/debug/settled?at="+at, "")
			return status == http.StatusOK
		})
		if body["settled"] != true || len(body["reasons"].([]any)) != 0 {
			t.Fatalf("settled answer = %v", body)
		}
		future := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
		status, body := f.do(t, "GET", "/v1/debug/settled?at="+future, "")
		reasons, _ := body["reasons"].([]any)
		if status != http.StatusServiceUnavailable || len(reasons) == 0 || !strings.HasPrefix(reasons[0].(string), "clock at ") {
			t.Fatalf("settled at %s = %d %v", future, status, body)
		}
	})
}

func TestJobsNeedTheTokenWhenOneIsSet(t *testing.T) {
	f := newFixture(t, map[string]string{"HERALD_TOKEN": "s3cret"})
	if status, body := f.do(t, "GET", "/v1/jobs", ""); status != http.StatusUnauthorized || errCode(body) != "unauthorized" {
		t.Fatalf("GET /v1/jobs without the token = %d %v", status, body)
	}
	if status, body := f.do(t, "GET", "/v1/jobs", "", "Authorization", "Bearer s3cret"); status != http.StatusOK {
		t.Fatalf("GET /v1/jobs with the token = %d %v", status, body)
	}
}
