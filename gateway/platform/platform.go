// Package platform holds herald's platform adapters — the places a message
// is delivered to — and the parsing of the platform specs that configure
// them (SPEC §7).
//
// A platform is named and given as a URL, NAME=URL:
//
//	console:                                     Console: prints to stdout
//	webhook:https://host/path?secret=S           Webhook: Standard Webhooks 1.0
//	fake:http://127.0.0.1:PORT?profile=P         Fake: the stand-in platform
//
// by repeatable --platform flags (Parse) or HERALD_PLATFORMS="NAME=URL,…"
// (ParseList); a Registry maps the names to their outbox.Sender. With no
// configuration, herald delivers to the console (Default).
//
// # What a failure proves
//
// Every adapter returns a *outbox.SendError whose class says what the
// failure proves (PLATFORMS.md, "Consequences"; SPEC §4). Only a send that
// never left, a validation 4xx and a 429 prove that nothing landed:
//
//	failure                                        class
//	---------------------------------------------  ------------
//	no connection: dial, DNS, TLS handshake        retryable
//	writing the request failed part-way            retryable
//	a done ctx before sending                      retryable
//	connection obtained, then any error: timeout,  ambiguous
//	  ctx deadline, reset, EOF, no response
//	2xx whose body was torn                        ambiguous
//	2xx without a message id (fake only)           ambiguous
//	408, 5xx, 3xx (redirects are not followed)     ambiguous
//	429                                            rate_limited
//	any other 4xx: 400, 401, 403, 404, 410 …       permanent
//
// A 429's RetryAfter is the JSON retry_after (float seconds, Discord and the
// fake; Telegram's parameters.retry_after), else the Retry-After header,
// delay-seconds or an HTTP-date (RFC 9110 §10.2.3), capped at MaxRetryAfter;
// Global is Discord's "global": true. An ambiguous send is retried, and the
// next copy carries the marker or is deduplicated by the platform where it
// honours the key.
package platform

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"herald/internal/clock"
	"herald/outbox"
)

// DefaultName is the name of the zero-config console platform.
const DefaultName = "console"

// Schemes of a platform URL, the part before the first ":".
const (
	SchemeConsole = "console"
	SchemeWebhook = "webhook"
	SchemeFake    = "fake"
)

// Options are what adapters need from their surroundings. The zero value
// is production: the real clock and stdout.
type Options struct {
	// Clock stamps webhook-timestamp and dates an HTTP-date Retry-After.
	// Default clock.Real{}.
	Clock clock.Clock
	// Console is where the console platform prints. Default os.Stdout.
	Console io.Writer
}

func (o Options) console() io.Writer {
	if o.Console == nil {
		return os.Stdout
	}
	return o.Console
}

// Platform is one configured platform.
type Platform struct {
	// Name is the name chats are addressed by (POST /v1/messages "platform").
	Name string
	// Scheme is SchemeConsole, SchemeWebhook or SchemeFake.
	Scheme string
	// URL is the platform's URL with its secrets redacted: safe to log.
	URL string
	// Sender delivers to it.
	Sender outbox.Sender
}

// String returns NAME=URL, secrets redacted.
func (p Platform) String() string { return p.Name + "=" + p.URL }

// SpecError is a platform spec that cannot be used. Its message names the
// platform and what is wrong, and never holds a secret.
type SpecError struct {
	// Name is the platform's name; empty when the spec has no usable one.
	Name string
	// Spec is the spec as given, secrets redacted.
	Spec string
	// Reason says what is wrong.
	Reason string
}

// Error returns `platform "NAME": REASON`, or `platform spec "SPEC": REASON`
// when the spec has no usable name.
func (e *SpecError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("platform %q: %s", e.Name, e.Reason)
	}
	return fmt.Sprintf("platform spec %q: %s", e.Spec, e.Reason)
}

// nameRE is what a platform name may be: it appears in URLs, logs and the
// ledger, so it is kept to lowercase letters, digits, "_" and "-".
var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Parse parses one NAME=URL spec, as the --platform flag takes it, and
// builds its adapter.
func Parse(spec string, opts Options) (Platform, error) {
	spec = strings.TrimSpace(spec)
	name, raw, ok := strings.Cut(spec, "=")
	fail := func(name, format string, args ...any) (Platform, error) {
		return Platform{}, &SpecError{Name: name, Spec: Redact(spec), Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case spec == "":
		return fail("", "empty (want NAME=URL)")
	case !ok || strings.Contains(name, ":"):
		// A ":" before the first "=" is a URL that lost its name.
		return fail("", "want NAME=URL")
	case name == "":
		return fail("", "empty name (want NAME=URL)")
	case !nameRE.MatchString(name):
		return fail("", "invalid name %q (want [a-z0-9][a-z0-9_-]*)", name)
	}
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok {
		return fail(name, "no scheme in %q (want console:, webhook:URL or fake:URL)", Redact(raw))
	}
	p := Platform{Name: name, Scheme: scheme, URL: Redact(raw)}
	switch scheme {
	case SchemeConsole:
		if rest != "" {
			return fail(name, "console takes no address or options, got %q", Redact(raw))
		}
		p.Sender = NewConsole(opts.console())
	case SchemeWebhook:
		s, err := NewWebhook(rest, opts)
		if err != nil {
			return fail(name, "%v", err)
		}
		p.Sender = s
	case SchemeFake:
		s, err := NewFake(rest, opts)
		if err != nil {
			return fail(name, "%v", err)
		}
		p.Sender = s
	default:
		return fail(name, "unknown scheme %q (want console, webhook, fake)", scheme)
	}
	return p, nil
}

// ParseList parses HERALD_PLATFORMS: NAME=URL specs separated by commas.
// Blank entries are skipped, so a trailing comma is harmless; a URL cannot
// hold a literal comma here (percent-encode it as %2C, or use --platform).
// Names must be unique.
func ParseList(list string, opts Options) (*Registry, error) {
	r := NewRegistry()
	for _, spec := range strings.Split(list, ",") {
		if strings.TrimSpace(spec) == "" {
			continue
		}
		if err := r.AddSpec(spec, opts); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// Registry maps platform names to their platforms. Build it at start-up;
// once built it is safe for concurrent reads.
type Registry struct {
	byName map[string]Platform
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{byName: map[string]Platform{}} }

// Default returns the zero-config registry: the console, named DefaultName.
func Default(opts Options) *Registry {
	r := NewRegistry()
	r.byName[DefaultName] = Platform{Name: DefaultName, Scheme: SchemeConsole, URL: "console:", Sender: NewConsole(opts.console())}
	return r
}

// Add adds p. A name may be defined once.
func (r *Registry) Add(p Platform) error {
	switch {
	case !nameRE.MatchString(p.Name):
		return &SpecError{Spec: p.String(), Reason: fmt.Sprintf("invalid name %q (want [a-z0-9][a-z0-9_-]*)", p.Name)}
	case p.Sender == nil:
		return &SpecError{Name: p.Name, Spec: p.String(), Reason: "no sender"}
	}
	if _, dup := r.byName[p.Name]; dup {
		return &SpecError{Name: p.Name, Spec: p.String(), Reason: "defined twice (names must be unique)"}
	}
	r.byName[p.Name] = p
	return nil
}

// AddSpec parses spec (NAME=URL) and adds it.
func (r *Registry) AddSpec(spec string, opts Options) error {
	p, err := Parse(spec, opts)
	if err != nil {
		return err
	}
	if err := r.Add(p); err != nil {
		closeIdle(p.Sender)
		return err
	}
	return nil
}

// Lookup returns the Sender of the platform called name.
func (r *Registry) Lookup(name string) (outbox.Sender, bool) {
	p, ok := r.byName[name]
	return p.Sender, ok
}

// Platform returns the platform called name.
func (r *Registry) Platform(name string) (Platform, bool) {
	p, ok := r.byName[name]
	return p, ok
}

// Names returns the platform names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.byName))
	for n := range r.byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Len returns the number of platforms.
func (r *Registry) Len() int { return len(r.byName) }

// String lists the platforms as NAME=URL, sorted by name, comma-separated,
// secrets redacted: what the start-up log line shows.
func (r *Registry) String() string {
	parts := make([]string, 0, len(r.byName))
	for _, n := range r.Names() {
		parts = append(parts, r.byName[n].String())
	}
	return strings.Join(parts, ",")
}

// Close closes the idle pooled connections of every adapter. Sends still
// work afterwards; they dial anew.
func (r *Registry) Close() {
	for _, p := range r.byName {
		closeIdle(p.Sender)
	}
}

func closeIdle(s outbox.Sender) {
	if c, ok := s.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// redacted replaces a secret in String output and errors.
const redacted = "REDACTED"

var (
	// secretParamRE matches the value of a secret= query parameter.
	secretParamRE = regexp.MustCompile(`(?i)([?&;]secret=)[^&]*`)
	// userinfoRE matches the password of user:password@ in a URL.
	userinfoRE = regexp.MustCompile(`(//[^/?#@:]*:)[^/?#@]*@`)
)

// Redact returns s, a platform URL or spec, with every secret= value and
// URL password replaced by REDACTED. It works on text, not on a parsed URL,
// so that it also covers specs that do not parse. A mistyped secret may hold
// a comma or a "#", so a secret= value runs to the next "&": redact a list
// entry by entry, or lose what follows the first secret.
func Redact(s string) string {
	s = secretParamRE.ReplaceAllString(s, "${1}"+redacted)
	return userinfoRE.ReplaceAllString(s, "${1}"+redacted+"@")
}
