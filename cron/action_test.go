package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald/internal/clock"
)

// actionTestInfo is the occurrence the tests run actions for: 07:30 in
// Berlin (CEST) on a Monday.
func actionTestInfo(t *testing.T) RunInfo {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	slot := time.Date(2026, 6, 1, 5, 30, 0, 0, time.UTC)
	return RunInfo{JobID: 42, Job: "morning-brief", Slot: slot, Local: slot.In(loc), Zone: "Europe/Berlin", ExecutionID: 7}
}

// actionTestClock is a virtual clock for runs whose budget is a plain
// context: the actions must not need it to advance.
func actionTestClock() *clock.Manual {
	return clock.NewManual(time.Date(2026, 6, 1, 5, 30, 0, 0, time.UTC))
}

func TestActionKindsAreAllListed(t *testing.T) {
	got := AllActionKinds()
	want := []ActionKind{ActionMessage, ActionExec, ActionHTTP}
	if !slices.Equal(got, want) {
		t.Fatalf("AllActionKinds() = %v, want %v", got, want)
	}
	for _, k := range got {
		if err := (Action{Kind: k}).Validate(); err != nil && strings.Contains(err.Error(), "unknown kind") {
			t.Errorf("Validate refuses listed kind %q: %v", k, err)
		}
	}
}

func TestActionJSONFieldNames(t *testing.T) {
	a := Action{Kind: ActionHTTP, Method: "POST", URL: "https://example.com/h", Headers: map[string]string{"X-A": "1"}, Body: "b", MaxOutputBytes: 10}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"http","method":"POST","url":"https://example.com/h","headers":{"X-A":"1"},"body":"b","max_output_bytes":10}`
	if string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
	b, _ = json.Marshal(Action{Kind: ActionExec, Command: []string{"true"}, Dir: "/tmp", Env: []string{"A=1"}})
	if want := `{"kind":"exec","command":["true"],"dir":"/tmp","env":["A=1"]}`; string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
}

func TestActionValidate(t *testing.T) {
	tests := []struct {
		name   string
		action Action
		want   string // "" for valid
	}{
		{"a message with a template is valid", Action{Kind: ActionMessage, Text: `Brief for {{.Local.Format "Mon 2 Jan 15:04"}} ({{.Zone}})`}, ""},
		{"an exec with a bare command name is valid", Action{Kind: ActionExec, Command: []string{"no-such-command-is-checked-at-run-time"}}, ""},
		{"an exec with dir and env is valid", Action{Kind: ActionExec, Command: []string{"/bin/true"}, Dir: "/tmp", Env: []string{"A=1", "EMPTY="}}, ""},
		{"an http GET is valid", Action{Kind: ActionHTTP, URL: "https://example.com/x?y=1"}, ""},
		{"an http POST with headers is valid", Action{Kind: ActionHTTP, Method: "POST", URL: "http://127.0.0.1:9/x", Headers: map[string]string{"Content-Type": "application/json"}, Body: "{}", MaxOutputBytes: 100}, ""},

		{"an empty kind is refused", Action{}, "bad action: kind is empty (want message, exec or http)"},
		{"an unknown kind is refused", Action{Kind: "email"}, `bad action: unknown kind "email" (want message, exec or http)`},
		{"a negative output cap is refused", Action{Kind: ActionMessage, Text: "x", MaxOutputBytes: -1}, "bad action: max_output_bytes -1 is negative"},
		{"a huge output cap is refused", Action{Kind: ActionMessage, Text: "x", MaxOutputBytes: 1 << 30}, "bad action: max_output_bytes 1073741824 exceeds the limit of 16777216"},
		{"a field of another kind is refused", Action{Kind: ActionMessage, Text: "x", Command: []string{"true"}}, `bad action: message: field "command" is only for exec actions`},
		{"a url on an exec is refused", Action{Kind: ActionExec, Command: []string{"true"}, URL: "http://x"}, `bad action: exec: field "url" is only for http actions`},
		{"text on an http is refused", Action{Kind: ActionHTTP, URL: "http://x", Text: "hi"}, `bad action: http: field "text" is only for message actions`},

		{"an empty message is refused", Action{Kind: ActionMessage, Text: " \n"}, "bad action: message: text is empty"},
		{"a template that does not parse is refused", Action{Kind: ActionMessage, Text: "Hi {{.Job"}, `bad action: message: text: template: text:1: unclosed action`},
		{"a template with an unknown field is refused", Action{Kind: ActionMessage, Text: "Hi {{.Nope}}"}, `bad action: message: text: template: text:1:5: executing "text" at <.Nope>: can't evaluate field Nope in type cron.RunInfo`},

		{"an empty command is refused", Action{Kind: ActionExec}, "bad action: exec: command is empty"},
		{"an empty argv[0] is refused", Action{Kind: ActionExec, Command: []string{"", "x"}}, "bad action: exec: command[0] is empty"},
		{"a NUL in an argument is refused", Action{Kind: ActionExec, Command: []string{"echo", "a\x00b"}}, "bad action: exec: command[1] contains a NUL byte"},
		{"a relative dir is refused", Action{Kind: ActionExec, Command: []string{"true"}, Dir: "work"}, `bad action: exec: dir "work" is not absolute`},
		{"an env entry without = is refused", Action{Kind: ActionExec, Command: []string{"true"}, Env: []string{"FOO"}}, `bad action: exec: env[0] "FOO" is not KEY=VALUE`},
		{"an env entry without a key is refused", Action{Kind: ActionExec, Command: []string{"true"}, Env: []string{"A=1", "=x"}}, `bad action: exec: env[1] "=x" is not KEY=VALUE`},
		{"a HERALD_ variable is refused", Action{Kind: ActionExec, Command: []string{"true"}, Env: []string{"HERALD_JOB=x"}}, `bad action: exec: env[0] "HERALD_JOB=x" sets a reserved HERALD_ variable`},

		{"an empty url is refused", Action{Kind: ActionHTTP}, "bad action: http: url is empty"},
		{"a url that does not parse is refused", Action{Kind: ActionHTTP, URL: "http://x/%zz"}, `bad action: http: url: parse "http://x/%zz": invalid URL escape "%zz"`},
		{"a non-http scheme is refused", Action{Kind: ActionHTTP, URL: "ftp://example.com/f"}, `bad action: http: url "ftp://example.com/f": scheme must be http or https`},
		{"a relative url is refused", Action{Kind: ActionHTTP, URL: "/hook"}, `bad action: http: url "/hook": scheme must be http or https`},
		{"a url without a host is refused", Action{Kind: ActionHTTP, URL: "http:///x"}, `bad action: http: url "http:///x" has no host`},
		{"an unknown method is refused", Action{Kind: ActionHTTP, Method: "FETCH", URL: "http://x"}, `bad action: http: method "FETCH" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`},
		{"a lowercase method is refused", Action{Kind: ActionHTTP, Method: "get", URL: "http://x"}, `bad action: http: method "get" is not one of GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS`},
		{"a bad header name is refused", Action{Kind: ActionHTTP, URL: "http://x", Headers: map[string]string{"Bad Name": "v"}}, `bad action: http: header name "Bad Name" is not a valid token`},
		{"a header value with a newline is refused", Action{Kind: ActionHTTP, URL: "http://x", Headers: map[string]string{"X-A": "v\r\nX-B: w"}}, `bad action: http: header "X-A": value contains CR, LF or NUL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.action.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.want)
			}
			if !errors.Is(err, ErrBadAction) {
				t.Errorf("Validate() = %v, does not wrap ErrBadAction", err)
			}
			if err.Error() != tt.want {
				t.Errorf("Validate() = %q\nwant          %q", err, tt.want)
			}
		})
	}
}

func TestActionMessage(t *testing.T) {
	info := actionTestInfo(t)
	manual := info
	manual.Manual = true
	tests := []struct {
		name          string
		action        Action
		info          RunInfo
		wantOutput    string
		wantTruncated bool
		wantCause     string
	}{
		{"renders the local time and zone",
			Action{Kind: ActionMessage, Text: `Brief for {{.Local.Format "Mon 2 Jan 15:04 MST"}} ({{.Zone}})`}, info,
			"Brief for Mon 1 Jun 07:30 CEST (Europe/Berlin)", false, "ok"},
		{"renders the job, ids and UTC slot",
			Action{Kind: ActionMessage, Text: `{{.Job}} #{{.JobID}}/{{.ExecutionID}} at {{.Slot.Format "2006-01-02T15:04:05Z07:00"}}`}, info,
			"morning-brief #42/7 at 2026-06-01T05:30:00Z", false, "ok"},
		{"says whether a run is manual",
			Action{Kind: ActionMessage, Text: `{{if .Manual}}manual{{else}}scheduled{{end}}`}, manual,
			"manual", false, "ok"},
		{"says whether a run is scheduled",
			Action{Kind: ActionMessage, Text: `{{if .Manual}}manual{{else}}scheduled{{end}}`}, info,
			"scheduled", false, "ok"},
		{"truncates at the cap and stops rendering",
			Action{Kind: ActionMessage, Text: `{{range 100000000}}abc{{end}}`, MaxOutputBytes: 10}, info,
			"abcabcabca", true, "ok"},
		{"never cuts a rune in two",
			Action{Kind: ActionMessage, Text: "aé€", MaxOutputBytes: 5}, info,
			"aé", true, "ok"},
		{"fails on a template error found only at run time",
			Action{Kind: ActionMessage, Text: `partial {{if .Manual}}{{.Slot.Nope}}{{end}}`}, manual,
			"partial ", false, "error"},
		{"fails on an invalid action without running it",
			Action{Kind: ActionMessage, Text: `{{.Job`}, info,
			"", false, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.action.Run(context.Background(), actionTestClock(), tt.info)
			if res.Output != tt.wantOutput || res.Truncated != tt.wantTruncated || res.Cause != tt.wantCause {
				t.Fatalf("Run() = output %q truncated %v cause %q (err %v), want %q %v %q",
					res.Output, res.Truncated, res.Cause, res.Err, tt.wantOutput, tt.wantTruncated, tt.wantCause)
			}
			if (res.Err == nil) != (tt.wantCause == "ok") {
				t.Errorf("Run().Err = %v with cause %q", res.Err, res.Cause)
			}
		})
	}
}

func TestActionMessageCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := Action{Kind: ActionMessage, Text: "hi"}.Run(ctx, actionTestClock(), actionTestInfo(t))
	if res.Cause != "cancelled" || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("Run() on a cancelled ctx = cause %q err %v, want cancelled", res.Cause, res.Err)
	}
}

func TestActionExec(t *testing.T) {
	dir := t.TempDir()
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		action        Action
		wantOutput    string // exact unless check is set
		check         func(t *testing.T, output string)
		wantTruncated bool
		wantCause     string
	}{
		{name: "a zero exit is success", action: Action{Kind: ActionExec, Command: []string{"echo", "hello", "world"}},
			wantOutput: "hello world\n", wantCause: "ok"},
		{name: "a non-zero exit is its status", action: Action{Kind: ActionExec, Command: []string{"sh", "-c", "echo partial; exit 3"}},
			wantOutput: "partial\n", wantCause: "exit status 3"},
		{name: "exit 1 is its status", action: Action{Kind: ActionExec, Command: []string{"false"}},
			wantCause: "exit status 1"},
		{name: "a signal is its name", action: Action{Kind: ActionExec, Command: []string{"sh", "-c", "kill -9 $$"}},
			wantCause: "signal: killed"},
		{name: "a command not in PATH is an error", action: Action{Kind: ActionExec, Command: []string{"herald-no-such-command"}},
			wantCause: "error"},
		{name: "a missing absolute command is an error", action: Action{Kind: ActionExec, Command: []string{"/nonexistent/cmd"}},
			wantCause: "error"},
		{name: "stdout and stderr are interleaved as written",
			action:     Action{Kind: ActionExec, Command: []string{"sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2"}},
			wantOutput: "out1\nerr1\nout2\nerr2\n", wantCause: "ok"},
		{name: "it runs in dir", action: Action{Kind: ActionExec, Command: []string{"pwd", "-P"}, Dir: dir},
			wantOutput: realDir + "\n", wantCause: "ok"},
		{name: "invalid UTF-8 is replaced", action: Action{Kind: ActionExec, Command: []string{"printf", `a\377b`}},
			wantOutput: "a\uFFFDb", wantCause: "ok"},
		{name: "output past the cap is dropped and drained",
			action: Action{Kind: ActionExec, Command: []string{"sh", "-c", "head -c 20000000 /dev/zero | tr '\\0' x; echo done >&2"}, MaxOutputBytes: 1000},
			check: func(t *testing.T, out string) {
				if out != strings.Repeat("x", 1000) {
					t.Errorf("output = %d bytes %.20q…, want 1000 x", len(out), out)
				}
			},
			wantTruncated: true, wantCause: "ok"},
		{name: "the cap never cuts a rune in two",
			action:     Action{Kind: ActionExec, Command: []string{"printf", "aé€"}, MaxOutputBytes: 5},
			wantOutput: "aé", wantTruncated: true, wantCause: "ok"},
		{name: "env is minimal and explicit",
			action: Action{Kind: ActionExec, Command: []string{"env"}, Env: []string{"GREETING=hi there", "HOME=/custom/home"}},
			check: func(t *testing.T, out string) {
				got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				slices.Sort(got)
				want := []string{
					"GREETING=hi there",
					"HERALD_EXECUTION_ID=7",
					"HERALD_JOB=morning-brief",
					"HERALD_JOB_ID=42",
					"HERALD_MANUAL=false",
					"HERALD_SLOT=2026-06-01T05:30:00Z",
					"HERALD_ZONE=Europe/Berlin",
					"HOME=/custom/home",
					"PATH=" + os.Getenv("PATH"),
				}
				if !slices.Equal(got, want) {
					t.Errorf("env =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			},
			wantCause: "ok"},
		{name: "a PATH in env is where the command is looked up",
			action:    Action{Kind: ActionExec, Command: []string{"echo", "x"}, Env: []string{"PATH=" + dir}},
			wantCause: "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.action.Run(context.Background(), actionTestClock(), actionTestInfo(t))
			if tt.check != nil {
				tt.check(t, res.Output)
			} else if res.Output != tt.wantOutput {
				t.Errorf("output = %q, want %q", res.Output, tt.wantOutput)
			}
			if res.Truncated != tt.wantTruncated || res.Cause != tt.wantCause {
				t.Errorf("truncated %v cause %q (err %v), want %v %q", res.Truncated, res.Cause, res.Err, tt.wantTruncated, tt.wantCause)
			}
			if (res.Err == nil) != (tt.wantCause == "ok") {
				t.Errorf("Err = %v with cause %q", res.Err, res.Cause)
			}
		})
	}
}

// actionWaitPID waits (with a deadline, polling) for a child to publish its
// pid in path — written to a temporary file and renamed, so it is whole.
func actionWaitPID(t *testing.T, path string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pid int
	err := clock.PollReal(ctx, 5*time.Millisecond, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	if err != nil {
		t.Fatalf("no pid in %s: %v", path, err)
	}
	return pid
}

// actionProcessGone reports whether pid no longer runs: it does not exist
// (ESRCH) or is a zombie waiting for a reaper (a container's init may never
// reap it, and kill(pid, 0) succeeds on a zombie).
func actionProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: comm may hold spaces, so read after the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state == 'Z' || state == 'X'
}

// actionMustBeGone fails unless pid is gone. SIGKILL has been sent when Run
// returns; the kernel may need a moment to finish the exit, so the check
// polls briefly with a deadline.
func actionMustBeGone(t *testing.T, what string, pid int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := clock.PollReal(ctx, time.Millisecond, func() bool { return actionProcessGone(pid) }); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("%s (pid %d) still runs after Run returned", what, pid)
	}
}

// TestActionExecKillsTheWholeGroup runs a job whose leader starts a
// background grandchild, ends the run in each way a run ends, and checks that
// neither leader nor grandchild survives Run.
func TestActionExecKillsTheWholeGroup(t *testing.T) {
	// The leader prints a line, starts `sleep 1000 &` (holding the output
	// pipe), publishes both pids, then runs tail.
	script := func(tail string) string {
		return `echo started; sleep 1000 & echo $! > gc.tmp && mv gc.tmp gc.pid; echo $$ > leader.tmp && mv leader.tmp leader.pid; ` + tail
	}
	tests := []struct {
		name      string
		tail      string
		budget    func(t *testing.T, clk *clock.Manual) (context.Context, context.CancelFunc)
		end       func(clk *clock.Manual, cancel context.CancelFunc) // run once both pids are published
		wantCause string
		wantErr   error
	}{
		{
			name: "a cancelled run kills leader and grandchild",
			tail: "sleep 1000",
			budget: func(t *testing.T, clk *clock.Manual) (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			},
			end:       func(_ *clock.Manual, cancel context.CancelFunc) { cancel() },
			wantCause: "cancelled", wantErr: context.Canceled,
		},
		{
			name: "a run past its virtual-clock budget is killed as deadline",
			tail: "sleep 1000",
			budget: func(t *testing.T, clk *clock.Manual) (context.Context, context.CancelFunc) {
				return clock.WithTimeout(context.Background(), clk, time.Hour)
			},
			end:       func(clk *clock.Manual, _ context.CancelFunc) { clk.Advance(time.Hour) },
			wantCause: "deadline", wantErr: context.DeadlineExceeded,
		},
		{
			name: "a cancelled run printing without end is killed and its pipe drained",
			tail: "exec yes",
			budget: func(t *testing.T, clk *clock.Manual) (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			},
			end:       func(_ *clock.Manual, cancel context.CancelFunc) { cancel() },
			wantCause: "cancelled", wantErr: context.Canceled,
		},
		{
			name: "a leader that exits leaves no background child behind",
			tail: "exit 0",
			budget: func(t *testing.T, clk *clock.Manual) (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			},
			end:       func(*clock.Manual, context.CancelFunc) {},
			wantCause: "ok",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			clk := actionTestClock()
			ctx, cancel := tt.budget(t, clk)
			defer cancel()
			a := Action{Kind: ActionExec, Command: []string{"sh", "-c", script(tt.tail)}, Dir: dir, MaxOutputBytes: 4096}
			done := make(chan Result, 1)
			go func() { done <- a.Run(ctx, clk, actionTestInfo(t)) }()

			gc := actionWaitPID(t, filepath.Join(dir, "gc.pid"))
			leader := actionWaitPID(t, filepath.Join(dir, "leader.pid"))
			t.Cleanup(func() { // never leave a sleeper behind, whatever failed
				_ = syscall.Kill(-leader, syscall.SIGKILL)
				_ = syscall.Kill(gc, syscall.SIGKILL)
			})
			tt.end(clk, cancel)

			var res Result
			select {
			case res = <-done:
			case <-func() <-chan struct{} {
				c, stop := context.WithTimeout(context.Background(), 10*time.Second)
				t.Cleanup(stop)
				return c.Done()
			}():
				t.Fatal("Run did not return within 10s")
			}
			if res.Cause != tt.wantCause {
				t.Errorf("cause %q (err %v), want %q", res.Cause, res.Err, tt.wantCause)
			}
			if tt.wantErr != nil && !errors.Is(res.Err, tt.wantErr) {
				t.Errorf("err %v, want it to wrap %v", res.Err, tt.wantErr)
			}
			if tt.wantErr == nil && res.Err != nil {
				t.Errorf("err %v, want nil", res.Err)
			}
			if !strings.HasPrefix(res.Output, "started\n") {
				t.Errorf("output %.40q…, want it to start with the child's first line", res.Output)
			}
			if len(res.Output) > 4096 {
				t.Errorf("output is %d bytes, over the 4096 cap", len(res.Output))
			}
			actionMustBeGone(t, "leader", leader)
			actionMustBeGone(t, "background grandchild", gc)
		})
	}
}

func TestActionHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			io.WriteString(w, "fine")
		case "/fail":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "down for maintenance")
		case "/echo":
			body, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s ct=%s job=%s id=%s slot=%s exec=%s body=%s",
				r.Method, r.Host, r.Header.Get("Content-Type"), r.Header.Get("X-Herald-Job"),
				r.Header.Get("X-Herald-Job-Id"), r.Header.Get("X-Herald-Slot"), r.Header.Get("X-Herald-Execution-Id"), body)
		case "/big":
			chunk := []byte(strings.Repeat("y", 1<<16))
			for range 1 << 10 { // 64 MiB, far past the cap
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		case "/bytes":
			w.Write([]byte("ok\xff"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	tests := []struct {
		name          string
		action        Action
		wantOutput    string
		wantTruncated bool
		wantCause     string
	}{
		{"a 200 is success with the body", Action{Kind: ActionHTTP, URL: srv.URL + "/ok"}, "fine", false, "ok"},
		{"a 503 is its status with the body", Action{Kind: ActionHTTP, URL: srv.URL + "/fail"}, "down for maintenance", false, "http 503"},
		{"a 404 is its status", Action{Kind: ActionHTTP, URL: srv.URL + "/nope"}, "404 page not found\n", false, "http 404"},
		{"method, headers, body and run info are sent",
			Action{Kind: ActionHTTP, Method: "POST", URL: srv.URL + "/echo", Headers: map[string]string{"Content-Type": "text/plain", "Host": "hooks.example"}, Body: "payload"},
			"POST hooks.example ct=text/plain job=morning-brief id=42 slot=2026-06-01T05:30:00Z exec=7 body=payload", false, "ok"},
		{"a body past the cap is cut", Action{Kind: ActionHTTP, URL: srv.URL + "/big", MaxOutputBytes: 100}, strings.Repeat("y", 100), true, "ok"},
		{"invalid UTF-8 is replaced", Action{Kind: ActionHTTP, URL: srv.URL + "/bytes"}, "ok\uFFFD", false, "ok"},
		{"a transport error is an error", Action{Kind: ActionHTTP, URL: closedURL + "/ok"}, "", false, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.action.Run(context.Background(), actionTestClock(), actionTestInfo(t))
			if res.Output != tt.wantOutput || res.Truncated != tt.wantTruncated || res.Cause != tt.wantCause {
				t.Fatalf("Run() = output %.60q truncated %v cause %q (err %v), want %.60q %v %q",
					res.Output, res.Truncated, res.Cause, res.Err, tt.wantOutput, tt.wantTruncated, tt.wantCause)
			}
			if (res.Err == nil) != (tt.wantCause == "ok") {
				t.Errorf("Err = %v with cause %q", res.Err, res.Cause)
			}
		})
	}
}

func TestActionHTTPEndedByContext(t *testing.T) {
	entered := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-r.Context().Done() // hang until the client goes away
	}))
	defer srv.Close()
	tests := []struct {
		name      string
		budget    func(clk *clock.Manual) (context.Context, context.CancelFunc)
		end       func(clk *clock.Manual, cancel context.CancelFunc)
		wantCause string
		wantErr   error
	}{
		{"a cancelled request is cancelled",
			func(*clock.Manual) (context.Context, context.CancelFunc) {
				return context.WithCancel(context.Background())
			},
			func(_ *clock.Manual, cancel context.CancelFunc) { cancel() },
			"cancelled", context.Canceled},
		{"a request past its virtual-clock budget is deadline",
			func(clk *clock.Manual) (context.Context, context.CancelFunc) {
				return clock.WithTimeout(context.Background(), clk, time.Minute)
			},
			func(clk *clock.Manual, _ context.CancelFunc) { clk.Advance(time.Minute) },
			"deadline", context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := actionTestClock()
			ctx, cancel := tt.budget(clk)
			defer cancel()
			done := make(chan Result, 1)
			go func() {
				done <- Action{Kind: ActionHTTP, URL: srv.URL}.Run(ctx, clk, actionTestInfo(t))
			}()
			<-entered
			tt.end(clk, cancel)
			res := <-done
			if res.Cause != tt.wantCause || !errors.Is(res.Err, tt.wantErr) {
				t.Fatalf("Run() = cause %q err %v, want %q wrapping %v", res.Cause, res.Err, tt.wantCause, tt.wantErr)
			}
		})
	}
}
