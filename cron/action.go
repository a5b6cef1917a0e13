package cron

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"
	"unicode/utf8"

	"herald/internal/clock"
)

// ActionKind is what a job does when one of its occurrences fires.
type ActionKind string

const (
	// ActionMessage renders Action.Text, a Go text/template, with the
	// occurrence's RunInfo; the rendered text is the output, which the
	// scheduler delivers to the job's chat through the outbox.
	ActionMessage ActionKind = "message"
	// ActionExec runs Action.Command as a child process in its own process
	// group, with a minimal environment; stdout and stderr, interleaved as
	// written, are the output.
	ActionExec ActionKind = "exec"
	// ActionHTTP sends one HTTP request; the response body is the output and a
	// 2xx status is success.
	ActionHTTP ActionKind = "http"
)

// AllActionKinds lists every ActionKind, for validation and CHECK constraints.
func AllActionKinds() []ActionKind { return []ActionKind{ActionMessage, ActionExec, ActionHTTP} }

const (
	// DefaultMaxOutputBytes is the output cap, in bytes, of an action whose
	// MaxOutputBytes is 0 (64 KiB).
	DefaultMaxOutputBytes = 64 << 10
	// MaxOutputBytesLimit is the largest MaxOutputBytes Validate accepts, in
	// bytes (16 MiB): output is held in memory and stored with the execution.
	MaxOutputBytesLimit = 16 << 20
	// RunExecWaitDelay bounds, in real (wall) time, how long Run keeps
	// reading an exec action's output once its process group is dead: a
	// process that left the group (setsid) and still holds the pipe open is
	// then cut off. It is a bound on the outside world, not a schedule, so it
	// runs on clock.Real even when the job's clock is virtual (as
	// clock.PollReal does).
	RunExecWaitDelay = 2 * time.Second
)

// Run causes: Result.Cause is one of these, "exit status N" or "signal: NAME"
// (exec), or "http N" (http, a non-2xx status).
const (
	// RunCauseOK is the cause of a successful run.
	RunCauseOK = "ok"
	// RunCauseDeadline is the cause of a run cut off because its context's
	// deadline (the run budget) passed.
	RunCauseDeadline = "deadline"
	// RunCauseCancelled is the cause of a run cut off because its context was
	// cancelled (shutdown, a user's cancel).
	RunCauseCancelled = "cancelled"
	// RunCauseError is the cause of any other failure: an invalid action, a
	// template that failed to execute, a command that could not start, an
	// HTTP transport error.
	RunCauseError = "error"
)

// ErrBadAction is wrapped by every error Action.Validate returns. The message
// says what is wrong, e.g. `bad action: exec: command is empty`.
var ErrBadAction = errors.New("bad action")

// Action is a job's action, stored as JSON in the jobs table; the field names
// are the API's JSON too. Only the fields of its Kind may be set (Validate).
type Action struct {
	// Kind selects the action and which fields below apply.
	Kind ActionKind `json:"kind"`

	// Text (message) is a Go text/template rendered with the occurrence's
	// RunInfo, e.g. `Brief for {{.Local.Format "Mon 2 Jan 15:04"}} ({{.Zone}})`.
	Text string `json:"text,omitempty"`

	// Command (exec) is the argv, run without a shell unless the user writes
	// ["sh", "-c", "..."]. A Command[0] without a slash is looked up in the
	// child's PATH at run time; with a slash but relative, it is relative to
	// Dir.
	Command []string `json:"command,omitempty"`
	// Dir (exec) is the absolute working directory; empty means herald's.
	Dir string `json:"dir,omitempty"`
	// Env (exec) are extra "KEY=VALUE" variables for the child, applied over
	// PATH and HOME; HERALD_* names are reserved.
	Env []string `json:"env,omitempty"`

	// Method (http) is the request method, GET when empty.
	Method string `json:"method,omitempty"`
	// URL (http) is the absolute http or https URL to request.
	URL string `json:"url,omitempty"`
	// Headers (http) are request headers, name to value.
	Headers map[string]string `json:"headers,omitempty"`
	// Body (http) is the request body.
	Body string `json:"body,omitempty"`

	// MaxOutputBytes caps the captured output, in bytes; 0 means
	// DefaultMaxOutputBytes. Output beyond it is dropped (an exec child's
	// pipe is still drained) and Result.Truncated is set.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
}

// RunInfo is what an action knows about the occurrence it runs for. The
// message template sees it as its dot; exec and http actions pass it on as
// HERALD_* environment variables and X-Herald-* headers.
type RunInfo struct {
	// JobID is the job's id (jobs.id).
	JobID int64
	// Job is the job's name.
	Job string
	// Slot is the occurrence, in UTC; for a manual run, the instant it was
	// requested.
	Slot time.Time
	// Local is Slot in the job's zone.
	Local time.Time
	// Zone is the name of the job's zone, e.g. "Europe/Berlin".
	Zone string
	// Manual is true for a run requested by hand (POST /v1/jobs/{id}/run).
	Manual bool
	// ExecutionID is the id of the execution record of this run.
	ExecutionID int64
	// Started, when set, is called with an exec action's process group id
	// as soon as the command has started, so the caller can record it and
	// reap the group if this process dies mid-run.
	Started func(pgid int) `json:"-"`
}

// Result is how a run ended.
type Result struct {
	// Output is the captured output — message: the rendered text; exec:
	// stdout and stderr interleaved as written; http: the response body —
	// as valid UTF-8 (invalid bytes become U+FFFD), at most the action's
	// output cap in bytes. It is kept on failure too.
	Output string
	// Truncated is set when output beyond the cap was dropped.
	Truncated bool
	// Err is nil on success. Otherwise it says why; when ctx cut the run off,
	// errors.Is(Err, context.DeadlineExceeded) or errors.Is(Err,
	// context.Canceled) holds.
	Err error
	// Cause is a short, machine-friendly cause for the execution record:
	// "ok", "exit status 3", "signal: killed", "http 503", "deadline",
	// "cancelled" or "error" (see the RunCause constants).
	Cause string
}

// Validate reports whether a is an action Run can carry out. The error wraps
// ErrBadAction and says exactly what is wrong: an unknown kind, a field of
// another kind, a negative or too large max_output_bytes; message: empty
// text, a template that does not parse or that fails on a sample RunInfo
// (e.g. an unknown field); exec: an empty command or command[0], a NUL byte
// in an argument, a relative dir, an env entry that is not KEY=VALUE or sets
// a HERALD_ variable; http: a URL that is not absolute http(s) with a host, a
// method other than GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, an
// invalid header name or value. Whether Command[0] exists is left to Run.
func (a Action) Validate() error {
	if err := a.validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadAction, err)
	}
	return nil
}

func (a Action) validate() error {
	switch a.Kind {
	case ActionMessage, ActionExec, ActionHTTP:
	case "":
		return errors.New("kind is empty (want message, exec or http)")
	default:
		return fmt.Errorf("unknown kind %q (want message, exec or http)", a.Kind)
	}
	if a.MaxOutputBytes < 0 {
		return fmt.Errorf("max_output_bytes %d is negative", a.MaxOutputBytes)
	}
	if a.MaxOutputBytes > MaxOutputBytesLimit {
		return fmt.Errorf("max_output_bytes %d exceeds the limit of %d", a.MaxOutputBytes, MaxOutputBytesLimit)
	}
	fields := []struct {
		name string
		set  bool
		kind ActionKind
	}{
		{"text", a.Text != "", ActionMessage},
		{"command", a.Command != nil, ActionExec},
		{"dir", a.Dir != "", ActionExec},
		{"env", a.Env != nil, ActionExec},
		{"method", a.Method != "", ActionHTTP},
		{"url", a.URL != "", ActionHTTP},
		{"headers", a.Headers != nil, ActionHTTP},
		{"body", a.Body != "", ActionHTTP},
	}
	for _, f := range fields {
		if f.set && f.kind != a.Kind {
			return fmt.Errorf("%s: field %q is only for %s actions", a.Kind, f.name, f.kind)
		}
	}
	var err error
	switch a.Kind {
	case ActionMessage:
		err = a.validateMessage()
	case ActionExec:
		err = a.validateExec()
	case ActionHTTP:
		err = a.validateHTTP()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", a.Kind, err)
	}
	return nil
}

func (a Action) validateMessage() error {
	if strings.TrimSpace(a.Text) == "" {
		return errors.New("text is empty")
	}
	tmpl, err := actionParseTemplate(a.Text)
	if err != nil {
		return fmt.Errorf("text: %w", err)
	}
	// Execute on a sample occurrence to catch unknown fields and methods,
	// which text/template only finds at execution. The sample is not
	// manual, so a branch taken only on manual runs is checked at run time.
	slot := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sample := RunInfo{JobID: 1, Job: "sample", Slot: slot, Local: slot, Zone: "UTC", ExecutionID: 1}
	w := &actionOutput{max: DefaultMaxOutputBytes, stopAtCap: true, ctx: context.Background()}
	if err := tmpl.Execute(w, sample); err != nil && !errors.Is(err, errActionOutputFull) {
		return fmt.Errorf("text: %w", err)
	}
	return nil
}

func (a Action) validateExec() error {
	if len(a.Command) == 0 {
		return errors.New("command is empty")
	}
	if a.Command[0] == "" {
		return errors.New("command[0] is empty")
	}
	for i, arg := range a.Command {
		if strings.IndexByte(arg, 0) >= 0 {
			return fmt.Errorf("command[%d] contains a NUL byte", i)
		}
	}
	if a.Dir != "" && !filepath.IsAbs(a.Dir) {
		return fmt.Errorf("dir %q is not absolute", a.Dir)
	}
	for i, kv := range a.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("env[%d] %q is not KEY=VALUE", i, kv)
		}
		if strings.HasPrefix(k, "HERALD_") {
			return fmt.Errorf("env[%d] %q sets a reserved HERALD_ variable", i, kv)
		}
	}
	return nil
}

// actionMethods are the methods an http action may use.
var actionMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut,
	http.MethodPatch, http.MethodDelete, http.MethodOptions,
}

func (a Action) validateHTTP() error {
	if a.URL == "" {
		return errors.New("url is empty")
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("url %q: scheme must be http or https", a.URL)
	}
	if u.Host == "" {
		return fmt.Errorf("url %q has no host", a.URL)
	}
	if a.Method != "" && !actionContains(actionMethods, a.Method) {
		return fmt.Errorf("method %q is not one of %s", a.Method, strings.Join(actionMethods, ", "))
	}
	for name, value := range a.Headers {
		if !actionIsToken(name) {
			return fmt.Errorf("header name %q is not a valid token", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return fmt.Errorf("header %q: value contains CR, LF or NUL", name)
		}
	}
	return nil
}

func actionContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// actionIsToken reports whether s is an RFC 9110 token (a header name).
func actionIsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func actionParseTemplate(text string) (*template.Template, error) {
	return template.New("text").Option("missingkey=error").Parse(text)
}

// maxOutput returns the output cap in bytes.
func (a Action) maxOutput() int {
	if a.MaxOutputBytes > 0 {
		return a.MaxOutputBytes
	}
	return DefaultMaxOutputBytes
}

// Run executes the action for one occurrence, under ctx. ctx is the run
// budget: Run honours ctx.Done(), whichever clock set its deadline (a
// virtual-clock deadline from clock.WithTimeout included), and never reads
// ctx.Deadline(). clk is the run's clock; no action needs a timer of its own
// today (the budget is ctx's), so it is there for actions that will wait.
//
// An action that fails Validate is not run: it ends with Cause "error" and
// the validation error. When Run returns, nothing the run started still runs:
// an exec action's whole process group, background children included, has
// been sent SIGKILL — at once, with no grace period, so the bound holds on a
// virtual clock that stands still — and its leader reaped. Only a process
// that left the group (setsid) can escape; Run stops reading its output
// after RunExecWaitDelay.
func (a Action) Run(ctx context.Context, clk clock.Clock, info RunInfo) Result {
	if err := a.Validate(); err != nil {
		return Result{Err: err, Cause: RunCauseError}
	}
	if err := ctx.Err(); err != nil {
		return runCtxResult(fmt.Errorf("run %s action: %w", a.Kind, err), "", false)
	}
	switch a.Kind {
	case ActionMessage:
		return a.runMessage(ctx, info)
	case ActionExec:
		return a.runExec(ctx, info)
	default:
		return a.runHTTP(ctx, info)
	}
}

// runCtxResult is the Result of a run that ctx cut off; err wraps ctx.Err().
func runCtxResult(err error, out string, truncated bool) Result {
	cause := RunCauseCancelled
	if errors.Is(err, context.DeadlineExceeded) {
		cause = RunCauseDeadline
	}
	return Result{Output: out, Truncated: truncated, Err: err, Cause: cause}
}

func (a Action) runMessage(ctx context.Context, info RunInfo) Result {
	tmpl, err := actionParseTemplate(a.Text)
	if err != nil { // Validate parsed it already; kept for safety.
		return Result{Err: fmt.Errorf("parse message template: %w", err), Cause: RunCauseError}
	}
	w := &actionOutput{max: a.maxOutput(), stopAtCap: true, ctx: ctx}
	err = tmpl.Execute(w, info)
	out, truncated := w.result()
	switch {
	case err == nil, errors.Is(err, errActionOutputFull):
		return Result{Output: out, Truncated: truncated, Cause: RunCauseOK}
	case ctx.Err() != nil:
		return runCtxResult(fmt.Errorf("render message: %w", ctx.Err()), out, truncated)
	default:
		return Result{Output: out, Truncated: truncated, Err: fmt.Errorf("render message: %w", err), Cause: RunCauseError}
	}
}

// execEnv is the child's whole environment: PATH and HOME from herald's,
// then Action.Env (which may override them), then the HERALD_* variables.
func (a Action) execEnv(info RunInfo) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, a.Env...)
	return append(env,
		"HERALD_JOB="+info.Job,
		"HERALD_JOB_ID="+strconv.FormatInt(info.JobID, 10),
		"HERALD_SLOT="+info.Slot.UTC().Format(time.RFC3339Nano),
		"HERALD_EXECUTION_ID="+strconv.FormatInt(info.ExecutionID, 10),
		"HERALD_ZONE="+info.Zone,
		"HERALD_MANUAL="+strconv.FormatBool(info.Manual),
	)
}

// actionLookPath finds file in the directories of pathList (a PATH value),
// skipping relative entries so a command never resolves against the working
// directory. A file containing a slash is returned as is.
func actionLookPath(file, pathList string) (string, error) {
	if strings.Contains(file, "/") {
		return file, nil
	}
	for _, dir := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("look up %q in PATH %q: %w", file, pathList, exec.ErrNotFound)
}

func (a Action) runExec(ctx context.Context, info RunInfo) Result {
	env := a.execEnv(info)
	pathList := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathList = v // the last one wins, as in the child
		}
	}
	name := a.Command[0]
	path, err := actionLookPath(name, pathList)
	if err != nil {
		return Result{Err: fmt.Errorf("exec %s: %w", name, err), Cause: RunCauseError}
	}
	out := &actionOutput{max: a.maxOutput()}
	// One pipe for stdout and stderr, interleaved as written, read by our own
	// goroutine: cmd.Wait then only reaps the leader, and we decide how long
	// to drain after the group is gone.
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{Err: fmt.Errorf("exec %s: output pipe: %w", name, err), Cause: RunCauseError}
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   a.Command,
		Dir:    a.Dir,
		Env:    env,
		Stdout: pw,
		Stderr: pw,
		// Its own process group, so that kill(-pgid) reaches every
		// process the job started (and, on Linux, killed with us).
		SysProcAttr: actionProcAttr(),
	}
	err = cmd.Start()
	pw.Close() // the child holds its own copy
	if err != nil {
		pr.Close()
		return Result{Err: fmt.Errorf("start %s: %w", name, err), Cause: RunCauseError}
	}
	pgid := cmd.Process.Pid
	if info.Started != nil {
		info.Started(pgid)
	}
	copied := make(chan struct{})
	go func() {
		// Never grows past the cap, and keeps reading past it so that a
		// child printing without end never blocks on a full pipe.
		_, _ = io.Copy(out, pr)
		close(copied)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var stopped error // ctx.Err() when ctx ended the run and we killed the group
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		stopped = ctx.Err()
		actionKillGroup(pgid)
		waitErr = <-exited
	}
	// Kill what the leader left behind (`sleep 1000 &`): nothing the run
	// started outlives it (SPEC §1). While such processes live the group id
	// stays reserved, so this reaches them and only them; an empty group
	// answers ESRCH.
	actionKillGroup(pgid)
	// The group is dead, so the pipe ends at once — unless a process that
	// left the group (setsid) still holds it: stop reading after
	// RunExecWaitDelay of real time.
	drain := clock.Real{}.NewTimer(RunExecWaitDelay)
	select {
	case <-copied:
	case <-drain.C():
	}
	drain.Stop()
	pr.Close() // unblocks the reader if it is still waiting
	<-copied

	output, truncated := out.result()
	res := Result{Output: output, Truncated: truncated}
	st := cmd.ProcessState
	if st == nil { // Wait failed without reaping; not expected after Start.
		res.Err, res.Cause = fmt.Errorf("wait %s: %w", name, waitErr), RunCauseError
		return res
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	switch {
	case stopped != nil && ws.Signaled():
		// Our kill ended the leader. (A leader that exited on its own just
		// as ctx ended keeps its own status below.)
		return runCtxResult(fmt.Errorf("exec %s: %w", name, stopped), output, truncated)
	case st.Success():
		res.Cause = RunCauseOK
	case ws.Signaled():
		res.Cause = "signal: " + ws.Signal().String()
		res.Err = fmt.Errorf("exec %s: %w", name, waitErr)
	default:
		res.Cause = "exit status " + strconv.Itoa(st.ExitCode())
		res.Err = fmt.Errorf("exec %s: %w", name, waitErr)
	}
	return res
}

// actionKillGroup sends SIGKILL to every process in group pgid. ESRCH (an
// empty group) is the normal case after a clean exit.
func actionKillGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

func (a Action) runHTTP(ctx context.Context, info RunInfo) Result {
	method := a.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if a.Body != "" {
		body = strings.NewReader(a.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, a.URL, body)
	if err != nil {
		return Result{Err: fmt.Errorf("build http request: %w", err), Cause: RunCauseError}
	}
	req.Header.Set("User-Agent", "herald")
	req.Header.Set("X-Herald-Job", info.Job)
	req.Header.Set("X-Herald-Job-Id", strconv.FormatInt(info.JobID, 10))
	req.Header.Set("X-Herald-Slot", info.Slot.UTC().Format(time.RFC3339Nano))
	req.Header.Set("X-Herald-Execution-Id", strconv.FormatInt(info.ExecutionID, 10))
	for k, v := range a.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	// No client timeout: ctx is the budget. Redirects follow Go's default.
	client := &http.Client{}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return runCtxResult(fmt.Errorf("http %s: %w", method, ctx.Err()), "", false)
		}
		return Result{Err: fmt.Errorf("http %s: %w", method, err), Cause: RunCauseError}
	}
	defer resp.Body.Close()
	// Read one byte past the cap to learn whether the body was longer, and
	// no more: unlike a pipe, nothing waits for the rest to be drained.
	out := &actionOutput{max: a.maxOutput()}
	_, readErr := io.Copy(out, io.LimitReader(resp.Body, int64(out.max)+1))
	output, truncated := out.result()
	switch {
	case readErr != nil && ctx.Err() != nil:
		return runCtxResult(fmt.Errorf("http %s: read body: %w", method, ctx.Err()), output, truncated)
	case readErr != nil:
		return Result{Output: output, Truncated: truncated, Err: fmt.Errorf("http %s: read body: %w", method, readErr), Cause: RunCauseError}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return Result{Output: output, Truncated: truncated,
			Err:   fmt.Errorf("http %s: status %s", method, resp.Status),
			Cause: "http " + strconv.Itoa(resp.StatusCode)}
	default:
		return Result{Output: output, Truncated: truncated, Cause: RunCauseOK}
	}
}

// errActionOutputFull stops a template once its output passed the cap.
var errActionOutputFull = errors.New("output cap reached")

// actionOutput is an io.Writer that keeps the first max bytes written and
// counts the rest as truncated: its memory never exceeds max. By default it
// accepts (and drops) everything past the cap, so a child process never
// blocks on a full pipe; with stopAtCap it fails instead
// (errActionOutputFull), and with ctx it fails once ctx is done — both stop
// a template early.
type actionOutput struct {
	max       int
	stopAtCap bool
	ctx       context.Context

	mu        sync.Mutex
	buf       []byte
	truncated bool
}

func (o *actionOutput) Write(p []byte) (int, error) {
	if o.ctx != nil {
		if err := o.ctx.Err(); err != nil {
			return 0, err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	n := len(p)
	if room := o.max - len(o.buf); n > room {
		o.buf = append(o.buf, p[:max(room, 0)]...)
		o.truncated = true
		if o.stopAtCap {
			return room, errActionOutputFull
		}
		return n, nil
	}
	o.buf = append(o.buf, p...)
	return n, nil
}

// result returns the kept output as valid UTF-8 of at most max bytes, and
// whether anything was dropped. A rune the cap cut in two is dropped whole.
func (o *actionOutput) result() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	b, truncated := o.buf, o.truncated
	if truncated {
		// Drop an incomplete rune at the cut, rather than turn it into U+FFFD.
		for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
			if utf8.RuneStart(b[i]) {
				if !utf8.FullRune(b[i:]) {
					b = b[:i]
				}
				break
			}
		}
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > o.max { // replacements can grow it
		i := o.max
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s, truncated = s[:i], true
	}
	return s, truncated
}
