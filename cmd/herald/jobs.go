package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"herald/cron"
	"herald/gateway"
	"herald/internal/clock"
)

// jobsVerbs is the synopsis of `herald jobs`.
const jobsVerbs = "add|ls|show|rm|pause|resume|run|history"

// jobsCmd is `herald jobs VERB`: a thin client of the jobs API of a running
// herald (address from --addr or HERALD_ADDR, bearer token from
// HERALD_TOKEN). A job is named by its name or its numeric id; the API takes
// either in the path. An error answer prints the server's message as the one
// error line: a 400 (the server refused the request as invalid — bad spec,
// zone, action, …) exits 2 like any usage error, anything else (not found,
// conflict, unreachable, not ready) exits 1.
func jobsCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: want `herald jobs %s`", errUsage, jobsVerbs)
	}
	verb, args := args[0], args[1:]
	switch verb {
	case "add":
		return jobsAdd(ctx, args, getenv, stdout)
	case "ls":
		return jobsList(ctx, args, getenv, stdout)
	case "show", "rm", "pause", "resume":
		return jobsOne(ctx, verb, args, getenv, stdout)
	case "run":
		return jobsRun(ctx, args, getenv, stdout)
	case "history":
		return jobsHistory(ctx, args, getenv, stdout)
	}
	return fmt.Errorf("%w: unknown jobs command %q (want %s)", errUsage, verb, jobsVerbs)
}

// jobsAPI calls the HTTP API of a running herald.
type jobsAPI struct {
	base   string // "http://host:port"
	token  string
	client *http.Client
}

// jobsRequestTimeout bounds one API call, so that a wedged server does not
// hang the command forever.
const jobsRequestTimeout = 60 * time.Second

// addrFlag declares --addr on fs; call the returned function after parsing.
func addrFlag(fs *cmdFlags, getenv func(string) string) func() jobsAPI {
	addr := fs.String("addr", firstNonEmpty(getenv("HERALD_ADDR"), gateway.DefaultAddr),
		"herald's address, host:port or a URL (env HERALD_ADDR)")
	return func() jobsAPI {
		return jobsAPI{base: baseURL(*addr), token: getenv("HERALD_TOKEN"), client: &http.Client{Timeout: jobsRequestTimeout}}
	}
}

// baseURL turns a listen address into the URL a client dials: a URL is taken
// as is, and an unspecified host (":8645", "0.0.0.0:8645") means this host.
func baseURL(addr string) string {
	if strings.Contains(addr, "://") {
		return strings.TrimRight(addr, "/")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// apiError is an error answer of the API, {"error":{"code","message"}}. Its
// text is the server's message alone; a 400 is a usage error (exit 2).
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Message }

// Is makes a 400 answer match errUsage: the request as given is invalid.
func (e *apiError) Is(target error) bool {
	return target == errUsage && e.Status == http.StatusBadRequest
}

// oneLine puts s on one line (line breaks become spaces) of at most n bytes,
// cut at a rune boundary.
func oneLine(s string, n int) string {
	s = strings.TrimSpace(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s))
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// call sends body (nil for none) as JSON and decodes the answer into out (nil
// to ignore it; a *json.RawMessage keeps it as sent).
func (c jobsAPI) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("call herald at %s: %w (is `herald serve` running?)", c.base, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode}
		var body struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &body) == nil && body.Error.Message != "" {
			e.Code, e.Message = body.Error.Code, oneLine(body.Error.Message, 2000)
		} else {
			e.Message = fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, oneLine(string(b), 200))
		}
		if resp.StatusCode == http.StatusUnauthorized {
			e.Message += " (set HERALD_TOKEN)"
		}
		return e
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], b...)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: answer is not the JSON expected: %w", method, path, err)
	}
	return nil
}

// jobPath is the API path of the job named by ref (a name or an id).
func jobPath(ref string) string { return "/v1/jobs/" + url.PathEscape(ref) }

// printJSON prints a JSON answer indented, its fields in the server's order.
func printJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

// parseMixed parses flags and positional arguments in any order
// (`herald jobs show nightly --json`); everything after "--" is positional.
func parseMixed(fs *cmdFlags, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// jobRef reads the one positional argument of `herald jobs VERB NAME|ID`.
func jobRef(verb string, pos []string) (string, error) {
	if len(pos) != 1 || pos[0] == "" {
		return "", fmt.Errorf("%w: want `herald jobs %s NAME|ID`", errUsage, verb)
	}
	return pos[0], nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// jobsAdd is `herald jobs add`: POST /v1/jobs, then print the job as JSON.
//
// Exactly one action: --text (a message: a Go text/template, delivered to
// --platform/--chat), --exec and/or --arg (a command: argv is --exec split
// on white space — no shell quoting — followed by each --arg verbatim, so
// `--exec sh --arg -c --arg 'date; uptime'` passes a script with spaces), or
// --http-url (a request, with --http-method, --http-header, --http-body).
// Flags not given are left out of the request, so the server's defaults
// apply.
func jobsAdd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	const synopsis = "jobs add --name NAME --spec SPEC [--zone ZONE] (--text T | --exec CMD [--arg A ...] | --http-url U) [flags]"
	fs := quietFlags("jobs add", synopsis, stdout)
	api := addrFlag(fs, getenv)
	name := fs.String("name", "", "job name: letters, digits, '.', '_', '-' (required)")
	spec := fs.String("spec", "", "the `SPEC`: \"30 2 * * *\", \"@hourly\", \"every 2h\", \"at 2026-12-01T09:00\" (required)")
	zone := fs.String("zone", "", "IANA zone the spec is read in (default: the server zone)")
	anchor := fs.String("anchor", "", "origin of an interval's grid, an RFC 3339 instant (default: the creation instant)")
	text := fs.String("text", "", "message action: the text, a Go text/template `TEMPLATE` (e.g. \"Brief for {{.Local.Format \\\"Mon 2 Jan\\\"}}\")")
	execCmd := fs.String("exec", "", "exec action: the command line, split on white space (no shell quoting)")
	var execArgs, headers stringList
	fs.Var(&execArgs, "arg", "exec action: one more argument, verbatim (repeatable)")
	httpURL := fs.String("http-url", "", "http action: the URL to request")
	httpMethod := fs.String("http-method", "", "http action: the method (default GET)")
	httpBody := fs.String("http-body", "", "http action: the request body")
	fs.Var(&headers, "http-header", "http action: a header, `NAME: VALUE` (repeatable)")
	platform := fs.String("platform", "", "platform to deliver the output to (default console when --chat is given)")
	chat := fs.String("chat", "", "chat id to deliver the output to")
	catchup := fs.String("catchup", "", "after an outage: latest (default), skip or all")
	catchupCap := fs.Int("catchup-cap", 0, "how many missed occurrences --catchup all runs (default 10)")
	grace := fs.Duration("grace", 0, "how late an occurrence may start and count as on time (default clamp(period/2, 2m, 2h))")
	budget := fs.Duration("budget", 0, "run budget: the timeout of one execution (default 1h)")
	rerun := fs.Bool("rerun-interrupted", false, "re-run, once, an execution whose owner died")
	paused := fs.Bool("paused", false, "create the job paused")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (want herald %s)", errUsage, pos[0], synopsis)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *name == "" || *spec == "" {
		return fmt.Errorf("%w: --name and --spec are required (want herald %s)", errUsage, synopsis)
	}

	var actions []string
	var action cron.Action
	if set["text"] {
		actions = append(actions, "--text")
		action = cron.Action{Kind: cron.ActionMessage, Text: *text}
	}
	if set["exec"] || set["arg"] {
		actions = append(actions, "--exec")
		argv := append(strings.Fields(*execCmd), execArgs...)
		action = cron.Action{Kind: cron.ActionExec, Command: argv}
	}
	if set["http-url"] {
		actions = append(actions, "--http-url")
		action = cron.Action{Kind: cron.ActionHTTP, URL: *httpURL, Method: *httpMethod, Body: *httpBody}
		for _, h := range headers {
			k, v, ok := strings.Cut(h, ":")
			if !ok {
				return fmt.Errorf("%w: --http-header %q: want `Name: value`", errUsage, h)
			}
			if action.Headers == nil {
				action.Headers = map[string]string{}
			}
			action.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	} else if set["http-method"] || set["http-body"] || set["http-header"] {
		return fmt.Errorf("%w: --http-method, --http-body and --http-header need --http-url", errUsage)
	}
	switch len(actions) {
	case 0:
		return fmt.Errorf("%w: give an action: --text, --exec or --http-url", errUsage)
	case 1:
	default:
		return fmt.Errorf("%w: give one action, not %s", errUsage, strings.Join(actions, " and "))
	}

	req := map[string]any{"name": *name, "spec": *spec, "action": action}
	if set["zone"] {
		req["zone"] = *zone
	}
	if set["anchor"] {
		t, err := parseInstant("anchor", *anchor)
		if err != nil {
			return err
		}
		req["anchor"] = t.Format(time.RFC3339Nano)
	}
	if set["chat"] {
		req["chat_id"] = *chat
		if !set["platform"] {
			*platform, set["platform"] = "console", true
		}
	}
	if set["platform"] {
		req["platform"] = *platform
	}
	if set["catchup"] {
		req["catchup"] = *catchup
	}
	if set["catchup-cap"] {
		req["catchup_cap"] = *catchupCap
	}
	if set["grace"] {
		req["grace"] = grace.String()
	}
	if set["budget"] {
		req["budget"] = budget.String()
	}
	if set["rerun-interrupted"] {
		req["rerun_interrupted"] = *rerun
	}
	if set["paused"] {
		req["paused"] = *paused
	}
	var raw json.RawMessage
	if err := api().call(ctx, http.MethodPost, "/v1/jobs", req, &raw); err != nil {
		return err
	}
	return printJSON(stdout, raw)
}

// jobRow is what `herald jobs ls` and pause/resume read of a job.
type jobRow struct {
	ID            int64   `json:"id"`
	Name          string  `json:"name"`
	Spec          string  `json:"spec"`
	EffectiveZone string  `json:"effective_zone"`
	Paused        bool    `json:"paused"`
	NextRunLocal  *string `json:"next_run_local"`
	Missed        int     `json:"missed"`
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// jobsList is `herald jobs ls`: a table of the live jobs, or the API's JSON.
func jobsList(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := quietFlags("jobs ls", "jobs ls [--json]", stdout)
	api := addrFlag(fs, getenv)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: `herald jobs ls` takes no argument, got %q", errUsage, pos[0])
	}
	var raw json.RawMessage
	if err := api().call(ctx, http.MethodGet, "/v1/jobs", nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, raw)
	}
	var list struct {
		Jobs []jobRow `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("GET /v1/jobs: answer is not the JSON expected: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tSPEC\tZONE\tNEXT(local)\tPAUSED\tMISSED")
	for _, j := range list.Jobs {
		p := "no"
		if j.Paused {
			p = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\n", j.ID, j.Name, j.Spec, j.EffectiveZone, orDash(j.NextRunLocal), p, j.Missed)
	}
	return tw.Flush()
}

// jobsOne is `herald jobs show|rm|pause|resume NAME|ID`.
func jobsOne(ctx context.Context, verb string, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := quietFlags("jobs "+verb, "jobs "+verb+" NAME|ID", stdout)
	api := addrFlag(fs, getenv)
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ref, err := jobRef(verb, pos)
	if err != nil {
		return err
	}
	c := api()
	switch verb {
	case "show":
		var raw json.RawMessage
		if err := c.call(ctx, http.MethodGet, jobPath(ref), nil, &raw); err != nil {
			return err
		}
		return printJSON(stdout, raw)
	case "rm":
		if err := c.call(ctx, http.MethodDelete, jobPath(ref), nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "deleted job %s\n", ref)
		return nil
	}
	var j jobRow
	if err := c.call(ctx, http.MethodPatch, jobPath(ref), map[string]bool{"paused": verb == "pause"}, &j); err != nil {
		return err
	}
	if verb == "pause" {
		fmt.Fprintf(stdout, "paused job %d (%s)\n", j.ID, j.Name)
	} else {
		fmt.Fprintf(stdout, "resumed job %d (%s), next run %s\n", j.ID, j.Name, orDash(j.NextRunLocal))
	}
	return nil
}

// execRow is what `herald jobs history` and `run --wait` read of an
// execution.
type execRow struct {
	ID     int64   `json:"id"`
	Kind   string  `json:"kind"`
	Slot   string  `json:"slot"`
	State  string  `json:"state"`
	Cause  *string `json:"cause"`
	LateMS int64   `json:"late_ms"`
}

// terminal reports whether an execution state is final (SPEC §5).
func terminal(state string) bool {
	switch cron.ExecState(state) {
	case cron.ExecSucceeded, cron.ExecFailed, cron.ExecInterrupted, cron.ExecCancelled:
		return true
	}
	return false
}

// jobsRun is `herald jobs run NAME|ID [--wait D]`: start a manual run and
// print its execution. With --wait it polls until the execution ends and
// exits 1 unless it succeeded within the wait.
func jobsRun(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := quietFlags("jobs run", "jobs run NAME|ID [--wait DURATION]", stdout)
	api := addrFlag(fs, getenv)
	wait := fs.Duration("wait", 0, "wait up to this long for the execution to end; exit 1 unless it succeeded")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ref, err := jobRef("run", pos)
	if err != nil {
		return err
	}
	if *wait < 0 {
		return fmt.Errorf("%w: --wait %s is negative", errUsage, *wait)
	}
	c := api()
	var raw json.RawMessage
	if err := c.call(ctx, http.MethodPost, jobPath(ref)+"/run", nil, &raw); err != nil {
		return err
	}
	if *wait == 0 {
		return printJSON(stdout, raw)
	}
	var e execRow
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("POST %s/run: answer is not the JSON expected: %w", jobPath(ref), err)
	}
	rc := clock.Real{}
	deadline := rc.Now().Add(*wait)
	for !terminal(e.State) && rc.Now().Before(deadline) {
		if err := clock.Sleep(ctx, rc, 100*time.Millisecond); err != nil {
			return err
		}
		var list struct {
			Executions []json.RawMessage `json:"executions"`
		}
		if err := c.call(ctx, http.MethodGet, jobPath(ref)+"/executions?limit=1000", nil, &list); err != nil {
			return err
		}
		for _, r := range list.Executions {
			var x execRow
			if json.Unmarshal(r, &x) == nil && x.ID == e.ID {
				raw, e = r, x
				break
			}
		}
	}
	if err := printJSON(stdout, raw); err != nil {
		return err
	}
	switch {
	case !terminal(e.State):
		return fmt.Errorf("execution %d of job %s is still %s after %s", e.ID, ref, e.State, *wait)
	case cron.ExecState(e.State) != cron.ExecSucceeded:
		return fmt.Errorf("execution %d of job %s ended %s: %s", e.ID, ref, e.State, oneLine(orDash(e.Cause), 500))
	}
	return nil
}

// jobsHistory is `herald jobs history NAME|ID`: the job's executions, newest
// first, as a table (slots in UTC) or the API's JSON.
func jobsHistory(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := quietFlags("jobs history", "jobs history NAME|ID [--limit N] [--json]", stdout)
	api := addrFlag(fs, getenv)
	limit := fs.Int("limit", 20, "how many executions, newest first (1..1000)")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	ref, err := jobRef("history", pos)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := api().call(ctx, http.MethodGet, jobPath(ref)+"/executions?limit="+strconv.Itoa(*limit), nil, &raw); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, raw)
	}
	var list struct {
		Executions []execRow `json:"executions"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("GET executions: answer is not the JSON expected: %w", err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tSLOT\tSTATE\tCAUSE\tLATE")
	for _, e := range list.Executions {
		late := time.Duration(e.LateMS) * time.Millisecond
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Kind, e.Slot, e.State, oneLine(orDash(e.Cause), 200), late)
	}
	return tw.Flush()
}
