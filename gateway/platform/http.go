package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"herald/internal/clock"
	"herald/outbox"
)

// MaxRetryAfter caps the wait a platform may ask for in a 429 or 503. A
// Telegram flood wait can last hours, so the cap is generous; it exists so a
// garbled header cannot park a chat for years or overflow a time.Duration.
const MaxRetryAfter = 24 * time.Hour

// maxResponseBytes bounds how much of a response body is read: platform
// answers are small, and a misbehaving endpoint must not fill our memory.
const maxResponseBytes = 64 << 10

// maxDescriptionBytes bounds the platform's words quoted in an error, which
// end up in the ledger and the logs.
const maxDescriptionBytes = 256

// newHTTPClient returns the client one adapter shares across all its sends.
//
// There is no client Timeout: the outbox puts a deadline on every send's ctx,
// and a second, independent timer would only blur which one fired.
// Redirects are not followed: Go turns a redirected POST into a GET that
// carries no message, and Standard Webhooks asks senders to treat a 3xx as a
// failure and have the URL updated.
func newHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		// Below the keep-alive timeout of common servers, so we rarely
		// write a request into a connection the server is closing (which
		// would make the send ambiguous for nothing).
		IdleConnTimeout:     30 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// writeState is how far a request got onto the wire, as httptrace saw it.
type writeState int

const (
	// notConnected: no connection was obtained, so nothing was sent.
	notConnected writeState = iota
	// connected: a connection was obtained and the request may be on its
	// way; we cannot tell how much of it left.
	connected
	// writeFailed: writing the request failed part-way, so the server never
	// had a whole request (the body is Content-Length delimited) and cannot
	// have acted on it.
	writeFailed
	// written: the whole request was handed to the connection.
	written
)

// wireTracker records a request's progress from httptrace callbacks, which
// run on the transport's goroutines.
type wireTracker struct {
	mu    sync.Mutex
	state writeState
}

func (w *wireTracker) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			// The transport re-sends a POST on a fresh connection only
			// when the first attempt provably wrote nothing, so a failed
			// write may be forgotten; a complete one never is.
			if w.state != written {
				w.state = connected
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			w.mu.Lock()
			defer w.mu.Unlock()
			switch {
			case info.Err == nil:
				w.state = written
			case w.state != written:
				w.state = writeFailed
			}
		},
	}
}

func (w *wireTracker) get() writeState {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state
}

// exchange is a response as far as it could be read.
type exchange struct {
	status int
	header http.Header
	body   []byte
	// bodyErr is set when the body could not be read whole: the response
	// was torn after its status line.
	bodyErr error
}

// post sends one POST and returns the platform's response, or a
// *outbox.SendError when no response came back. where is the context every
// error starts with ("send to fake/telegram chat \"c1\"").
//
// The class of a failure without a response depends on how far the request
// got (PLATFORMS.md, "Consequences"): only one that never left proves the
// send did not land. Once a connection was obtained we assume the request
// may have left, unless the transport reported that writing it failed —
// the callbacks run on the transport's goroutines and may lag the error we
// get, and in doubt the answer must be "ambiguous", never "retryable".
//
// header must never hold Idempotency-Key or X-Idempotency-Key: net/http then
// deems a POST replayable and re-sends it by itself after a lost response,
// a copy the ledger would never know about.
func post(ctx context.Context, client *http.Client, where, target string, header http.Header, body []byte) (*exchange, error) {
	if err := ctx.Err(); err != nil {
		return nil, sendErr(outbox.ClassRetryable, where, "not sent: %w", err)
	}
	var tr wireTracker
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, tr.trace()), http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		// A URL that parsed at configuration time does not fail here;
		// if it does, nothing was sent and nothing will ever be.
		return nil, sendErr(outbox.ClassPermanent, where, "build request: %w", stripURL(err))
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := client.Do(req)
	if err != nil {
		err = stripURL(err)
		switch tr.get() {
		case notConnected:
			return nil, sendErr(outbox.ClassRetryable, where, "connect failed, request not sent: %w", err)
		case writeFailed:
			return nil, sendErr(outbox.ClassRetryable, where, "request not sent whole: %w", err)
		case connected:
			return nil, sendErr(outbox.ClassAmbiguous, where, "connection lost while sending, request may have arrived: %w", err)
		default:
			return nil, sendErr(outbox.ClassAmbiguous, where, "request sent, no response: %w", err)
		}
	}
	defer resp.Body.Close()
	ex := &exchange{status: resp.StatusCode, header: resp.Header}
	ex.body, ex.bodyErr = io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if ex.bodyErr != nil {
		ex.bodyErr = stripURL(ex.bodyErr)
	}
	return ex, nil
}

// stripURL drops the *url.Error wrapper net/http puts around its errors:
// the caller's context already names the platform and chat, and a URL's
// path can hold a token (Slack-style hook URLs do).
func stripURL(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// sendErr returns a *outbox.SendError of class c whose error reads
// "where: format…", wrapping any %w operand.
func sendErr(c outbox.ErrorClass, where, format string, args ...any) *outbox.SendError {
	return &outbox.SendError{Class: c, Err: fmt.Errorf("%s: "+format, append([]any{where}, args...)...)}
}

// errorReply is the union of the error bodies the platforms send: Telegram
// and the fake ("description", "parameters.retry_after"), Discord
// ("message", "retry_after", "global"), Slack ("error": a string).
type errorReply struct {
	Description string          `json:"description"`
	Message     string          `json:"message"`
	Error       json.RawMessage `json:"error"`
	RetryAfter  *float64        `json:"retry_after"`
	Parameters  struct {
		RetryAfter *float64 `json:"retry_after"`
	} `json:"parameters"`
	Global bool `json:"global"`
}

// failure classifies a response that is not a success (any status outside
// 2xx) as PLATFORMS.md "Consequences" and SPEC §4 say:
//
//	429                    rate_limited (the only 4xx that may be retried)
//	408, 3xx, 5xx, other   ambiguous: none of them proves the send did not land
//	any other 4xx          permanent (validation, auth, chat gone, 410 Gone)
//
// extra, if not empty, is appended to the platform's own description.
func failure(where string, ex *exchange, now time.Time, extra string) *outbox.SendError {
	var reply errorReply
	parsed := ex.bodyErr == nil && json.Unmarshal(ex.body, &reply) == nil
	desc := describe(ex, reply, parsed)
	if extra != "" {
		desc += " (" + extra + ")"
	}
	var class outbox.ErrorClass
	switch s := ex.status; {
	case s == http.StatusTooManyRequests:
		class = outbox.ClassRateLimited
	case s == http.StatusRequestTimeout:
		class = outbox.ClassAmbiguous
	case s >= 400 && s < 500:
		class = outbox.ClassPermanent
	default:
		class = outbox.ClassAmbiguous
	}
	se := sendErr(class, where, "status %d: %s", ex.status, desc)
	if ex.status == http.StatusTooManyRequests || ex.status == http.StatusServiceUnavailable {
		se.RetryAfter = retryAfter(ex, reply, parsed, now)
	}
	if class == outbox.ClassRateLimited {
		se.Global = (parsed && reply.Global) ||
			strings.EqualFold(ex.header.Get("X-RateLimit-Global"), "true") ||
			strings.EqualFold(ex.header.Get("X-RateLimit-Scope"), "global")
	}
	return se
}

// describe returns the platform's own words for a failure: the description
// field of a JSON error body, else a cleaned-up start of the body, else the
// status text.
func describe(ex *exchange, reply errorReply, parsed bool) string {
	if parsed {
		if d := reply.text(); d != "" {
			return clip(d)
		}
	}
	text := http.StatusText(ex.status)
	if text == "" {
		text = "unexpected status"
	}
	if ex.status >= 300 && ex.status < 400 {
		if loc := ex.header.Get("Location"); loc != "" {
			text += ", redirected to " + clip(Redact(loc)) + "; set the platform URL to the final address"
		}
	}
	if snippet := clip(string(ex.body)); snippet != "" {
		text += ": " + snippet
	}
	if ex.bodyErr != nil {
		text += " (response torn: " + ex.bodyErr.Error() + ")"
	}
	return text
}

// text returns the first description the body carries, in any of the
// platforms' shapes (herald's own API nests it: {"error":{"message"}}).
func (r errorReply) text() string {
	var flat string
	var nested struct {
		Message string `json:"message"`
	}
	switch {
	case r.Description != "":
		return r.Description
	case r.Message != "":
		return r.Message
	case json.Unmarshal(r.Error, &flat) == nil && flat != "":
		return flat
	case json.Unmarshal(r.Error, &nested) == nil && nested.Message != "":
		return nested.Message
	}
	return ""
}

// clip makes s fit for one log line: valid UTF-8, control characters as
// spaces, runs of spaces collapsed, at most maxDescriptionBytes.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if len(s) <= maxDescriptionBytes {
		return s
	}
	cut := maxDescriptionBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// retryAfter is the wait a 429 (or 503) asks for: the JSON retry_after in
// seconds, fractional and so more precise, when the body has one, else the
// Retry-After header; zero when neither gives a usable value.
func retryAfter(ex *exchange, reply errorReply, parsed bool, now time.Time) time.Duration {
	if parsed {
		for _, v := range []*float64{reply.RetryAfter, reply.Parameters.RetryAfter} {
			if v != nil {
				if d, ok := seconds(*v); ok {
					return d
				}
			}
		}
	}
	d, _ := parseRetryAfter(ex.header.Get("Retry-After"), now)
	return d
}

// parseRetryAfter reads a Retry-After header value (RFC 9110 §10.2.3):
// delay-seconds, or an HTTP-date measured from now (a date in the past means
// no wait). A decimal fraction is accepted too, since some platforms send
// one. ok is false for an empty or unreadable value.
func parseRetryAfter(v string, now time.Time) (d time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDecimal(v) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		return seconds(f)
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter), true
}

// isDecimal reports whether s is digits with at most one decimal point,
// which is all strconv.ParseFloat should see here ("NaN", "1e9", "0x10" are
// not waits).
func isDecimal(s string) bool {
	digits, dots := 0, 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case r == '.':
			dots++
		default:
			return false
		}
	}
	return digits > 0 && dots <= 1
}

// seconds converts a wait in seconds to a Duration, rounded up to the
// nanosecond and capped at MaxRetryAfter; negative and non-finite waits are
// refused.
func seconds(f float64) (time.Duration, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, false
	}
	if f >= MaxRetryAfter.Seconds() {
		return MaxRetryAfter, true
	}
	return time.Duration(math.Ceil(f * float64(time.Second))), true
}

// jsonBody encodes v without HTML escaping: message text goes out as the
// user wrote it ("<", ">", "&" would otherwise grow to six bytes each).
func jsonBody(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// messageID reads a platform message id from a JSON value that may be a
// string or a number (platforms differ); "" when it is neither.
func messageID(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// success reports whether status is 2xx.
func success(status int) bool { return status >= 200 && status < 300 }

// clockOrReal returns c, or the real clock when c is nil.
func clockOrReal(c clock.Clock) clock.Clock {
	if c == nil {
		return clock.Real{}
	}
	return c
}
