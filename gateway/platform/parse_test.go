package platform_test

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"herald/gateway/platform"
	"herald/internal/split"
)

// secretWord is a secret no error message or String may ever show.
const secretWord = "s3cr3tW0rd"

func TestParseAcceptsEverySchemeAndRedactsSecrets(t *testing.T) {
	tests := []struct {
		name, spec string
		wantName   string
		wantScheme string
		wantURL    string
		wantLimit  split.Limit
	}{
		{"the console takes no address", "console=console:", "console", "console", "console:", split.Limit{}},
		{"surrounding space is trimmed", "  out=console:\t", "out", "console", "console:", split.Limit{}},
		{"a webhook keeps its other parameters and hides its secret",
			"hook=webhook:https://example.com/in?secret=whsec_" + secretWord + "&team=7",
			"hook", "webhook", "webhook:https://example.com/in?team=7&secret=REDACTED", split.Limit{Max: 16384, Unit: split.Bytes}},
		{"a raw secret is fine", "hook=webhook:https://example.com/in?secret=" + secretWord,
			"hook", "webhook", "webhook:https://example.com/in?secret=REDACTED", split.Limit{Max: 16384, Unit: split.Bytes}},
		{"several secrets sign for rotation", "hook=webhook:https://example.com/?secret=" + secretWord + "&secret=old" + secretWord,
			"hook", "webhook", "webhook:https://example.com/?secret=REDACTED&secret=REDACTED", split.Limit{Max: 16384, Unit: split.Bytes}},
		{"http is allowed on 127.0.0.1", "loop=webhook:http://127.0.0.1:9/x?secret=" + secretWord,
			"loop", "webhook", "webhook:http://127.0.0.1:9/x?secret=REDACTED", split.Limit{Max: 16384, Unit: split.Bytes}},
		{"http is allowed on ::1", "loop6=webhook:http://[::1]:9/x?secret=" + secretWord,
			"loop6", "webhook", "webhook:http://[::1]:9/x?secret=REDACTED", split.Limit{Max: 16384, Unit: split.Bytes}},
		{"http is allowed on localhost", "lh=webhook:http://localhost:9/?secret=" + secretWord,
			"lh", "webhook", "webhook:http://localhost:9/?secret=REDACTED", split.Limit{Max: 16384, Unit: split.Bytes}},
		{"fake telegram", "tg=fake:http://127.0.0.1:8080?profile=telegram",
			"tg", "fake", "fake:http://127.0.0.1:8080?profile=telegram", split.Limit{Max: 4096, Unit: split.UTF16}},
		{"fake discord", "dc=fake:http://127.0.0.1:8080?profile=discord",
			"dc", "fake", "fake:http://127.0.0.1:8080?profile=discord", split.Limit{Max: 2000, Unit: split.UTF16}},
		{"fake slack under a path prefix", "s_1-b=fake:http://127.0.0.1:8080/prefix/?profile=slack",
			"s_1-b", "fake", "fake:http://127.0.0.1:8080/prefix/?profile=slack", split.Limit{Max: 3900, Unit: split.UTF16}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := platform.Parse(tt.spec, platform.Options{})
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.spec, err)
			}
			if p.Name != tt.wantName || p.Scheme != tt.wantScheme {
				t.Errorf("got name %q scheme %q, want %q %q", p.Name, p.Scheme, tt.wantName, tt.wantScheme)
			}
			// The URL is shown as written, but for the secret: the order
			// of parameters does not matter to the check.
			if !sameURL(p.URL, tt.wantURL) {
				t.Errorf("URL = %q, want %q", p.URL, tt.wantURL)
			}
			if want := tt.wantName + "=" + p.URL; p.String() != want {
				t.Errorf("String() = %q, want %q", p.String(), want)
			}
			if strings.Contains(p.String(), secretWord) {
				t.Errorf("String() shows the secret: %q", p.String())
			}
			if got := p.Sender.Limit(); got != tt.wantLimit {
				t.Errorf("Limit() = %+v, want %+v", got, tt.wantLimit)
			}
		})
	}
}

// sameURL compares two URLs with their query parameters in any order.
func sameURL(a, b string) bool {
	split := func(s string) (string, []string) {
		base, q, _ := strings.Cut(s, "?")
		ps := strings.Split(q, "&")
		slices.Sort(ps)
		return base, ps
	}
	ab, aq := split(a)
	bb, bq := split(b)
	return ab == bb && slices.Equal(aq, bq)
}

func TestParseRejectsBadSpecsWithExactMessages(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{"an empty spec", "", `platform spec "": empty (want NAME=URL)`},
		{"a URL without a name", "console:", `platform spec "console:": want NAME=URL`},
		{"an empty name", "=console:", `platform spec "=console:": empty name (want NAME=URL)`},
		{"an uppercase name", "TG=console:", `platform spec "TG=console:": invalid name "TG" (want [a-z0-9][a-z0-9_-]*)`},
		{"a name starting with a dash", "-x=console:", `platform spec "-x=console:": invalid name "-x" (want [a-z0-9][a-z0-9_-]*)`},
		{"a name with a space", "my tg=console:", `platform spec "my tg=console:": invalid name "my tg" (want [a-z0-9][a-z0-9_-]*)`},
		{"a misspelt scheme", "tg=telegrm:https://api.telegram.org", `platform "tg": unknown scheme "telegrm" (want console, webhook, fake)`},
		{"no scheme at all", "tg=localhost", `platform "tg": no scheme in "localhost" (want console:, webhook:URL or fake:URL)`},
		{"a console with an address", "c=console:stdout", `platform "c": console takes no address or options, got "console:stdout"`},
		{"a webhook without a secret", "w=webhook:https://example.com/in",
			`platform "w": webhook URL has no secret (add ?secret=whsec_… as the receiver gave it; requests are signed with it)`},
		{"a webhook with an empty secret", "w=webhook:https://example.com/in?secret=",
			`platform "w": webhook secret is empty`},
		{"a webhook over http off loopback", "w=webhook:http://example.com/in?secret=" + secretWord,
			`platform "w": webhook URL must be https (http:// is allowed only for loopback hosts, for tests), got host "example.com"`},
		{"a webhook over http to a name that is not localhost", "w=webhook:http://127.0.0.1.nip.io/in?secret=" + secretWord,
			`platform "w": webhook URL must be https (http:// is allowed only for loopback hosts, for tests), got host "127.0.0.1.nip.io"`},
		{"a webhook over ftp", "w=webhook:ftp://example.com/?secret=" + secretWord, `platform "w": webhook URL scheme "ftp": want https`},
		{"a webhook without a URL", "w=webhook:", `platform "w": webhook URL is empty`},
		{"a webhook URL that is not absolute", "w=webhook:example.com/in?secret=" + secretWord,
			`platform "w": webhook URL "example.com/in?secret=REDACTED" is not an absolute http(s) URL`},
		{"a webhook URL without a host", "w=webhook:https:///in?secret=" + secretWord,
			`platform "w": webhook URL "https:///in?secret=REDACTED" has no host`},
		{"a webhook URL that does not parse", "w=webhook:https://exa mple.com/?secret=" + secretWord,
			`platform "w": webhook URL "https://exa mple.com/?secret=REDACTED": invalid character " " in host name`},
		{"a secret cut short by a #", "w=webhook:https://example.com/?secret=ab#" + secretWord,
			`platform "w": webhook URL has a fragment (#…); percent-encode a "#" in a parameter as %23`},
		{"a webhook URL with a password", "w=webhook:https://u:" + secretWord + "@example.com/?secret=" + secretWord,
			`platform "w": webhook URL "https://u:REDACTED@example.com/?secret=REDACTED" must not carry user:password@; authenticate with the secret`},
		{"a whsec_ secret that is not base64", "w=webhook:https://example.com/?secret=whsec_" + secretWord + "!",
			`platform "w": webhook secret is not valid base64 after whsec_: illegal data at byte 10`},
		{"an empty whsec_ secret", "w=webhook:https://example.com/?secret=whsec_",
			`platform "w": webhook secret holds no key after whsec_`},
		{"the second of two secrets is bad", "w=webhook:https://example.com/?secret=" + secretWord + "&secret=",
			`platform "w": webhook secret 2 is empty`},
		{"a bad percent-escape in a secret", "w=webhook:https://example.com/?secret=" + secretWord + "%zz",
			`platform "w": webhook URL: parameter secret has a bad percent-escape`},
		{"a fake without a profile", "f=fake:http://127.0.0.1:1", `platform "f": fake URL has no profile (want ?profile=telegram|discord|slack)`},
		{"a fake with an empty profile", "f=fake:http://127.0.0.1:1?profile=", `platform "f": fake URL has no profile (want ?profile=telegram|discord|slack)`},
		{"a fake with an unknown profile", "f=fake:http://127.0.0.1:1?profile=whatsapp",
			`platform "f": fake URL has unknown profile "whatsapp" (want telegram|discord|slack)`},
		{"a fake with two profiles", "f=fake:http://127.0.0.1:1?profile=slack&profile=discord",
			`platform "f": fake URL has 2 profiles (want one of telegram|discord|slack)`},
		{"a fake with a misspelt parameter", "f=fake:http://127.0.0.1:1?profile=slack&profle=discord",
			`platform "f": fake URL has unknown parameter "profle" (want profile=telegram|discord|slack)`},
		{"a fake over ftp", "f=fake:ftp://127.0.0.1:1?profile=slack", `platform "f": fake URL scheme "ftp": want http or https`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := platform.Parse(tt.spec, platform.Options{})
			if err == nil {
				t.Fatalf("Parse(%q) = %v, want error %q", tt.spec, p, tt.want)
			}
			if err.Error() != tt.want {
				t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.spec, err, tt.want)
			}
			if strings.Contains(err.Error(), secretWord) {
				t.Errorf("error shows the secret: %s", err)
			}
			var se *platform.SpecError
			if !errors.As(err, &se) {
				t.Errorf("error is %T, want *platform.SpecError", err)
			} else if strings.Contains(se.Spec, secretWord) {
				t.Errorf("SpecError.Spec shows the secret: %q", se.Spec)
			}
		})
	}
}

func TestParseListBuildsARegistry(t *testing.T) {
	list := "tg=fake:http://127.0.0.1:1?profile=telegram, hook=webhook:https://example.com/?secret=" + secretWord + ",,a=console:,"
	r, err := platform.ParseList(list, platform.Options{})
	if err != nil {
		t.Fatalf("ParseList: %v", err)
	}
	t.Cleanup(r.Close)
	if got, want := r.Names(), []string{"a", "hook", "tg"}; !slices.Equal(got, want) {
		t.Errorf("Names() = %q, want %q", got, want)
	}
	if r.Len() != 3 {
		t.Errorf("Len() = %d, want 3", r.Len())
	}
	want := "a=console:,hook=webhook:https://example.com/?secret=REDACTED,tg=fake:http://127.0.0.1:1?profile=telegram"
	if r.String() != want {
		t.Errorf("String() = %q, want %q", r.String(), want)
	}
	for _, name := range r.Names() {
		if s, ok := r.Lookup(name); !ok || s == nil {
			t.Errorf("Lookup(%q) = %v, %v", name, s, ok)
		}
	}
	if _, ok := r.Lookup("nope"); ok {
		t.Error(`Lookup("nope") found a platform`)
	}
	if p, ok := r.Platform("hook"); !ok || p.Scheme != platform.SchemeWebhook {
		t.Errorf(`Platform("hook") = %v, %v`, p, ok)
	}
}

func TestParseListRejects(t *testing.T) {
	tests := []struct {
		name, list, want string
	}{
		{"a name used twice", "a=console:,a=fake:http://127.0.0.1:1?profile=slack", `platform "a": defined twice (names must be unique)`},
		{"a bad entry among good ones", "a=console:,b=telegrm:x", `platform "b": unknown scheme "telegrm" (want console, webhook, fake)`},
		{"an entry without a name", "a=console:,webhook:https://example.com/?secret=" + secretWord,
			`platform spec "webhook:https://example.com/?secret=REDACTED": want NAME=URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := platform.ParseList(tt.list, platform.Options{})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("ParseList(%q) error = %v, want %q", tt.list, err, tt.want)
			}
		})
	}
}

func TestAnEmptyListIsAnEmptyRegistry(t *testing.T) {
	r, err := platform.ParseList("  ", platform.Options{})
	if err != nil || r.Len() != 0 || len(r.Names()) != 0 {
		t.Fatalf("ParseList(blank) = %v names %q, %v; want an empty registry", r, r.Names(), err)
	}
}

func TestRegistryAddSpecAddsToTheList(t *testing.T) {
	r, err := platform.ParseList("a=console:", platform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AddSpec("b=fake:http://127.0.0.1:1?profile=discord", platform.Options{}); err != nil {
		t.Fatalf("AddSpec: %v", err)
	}
	if err := r.AddSpec("a=console:", platform.Options{}); err == nil || err.Error() != `platform "a": defined twice (names must be unique)` {
		t.Fatalf("AddSpec of a duplicate: %v", err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names() = %q", got)
	}
}

func TestDefaultIsTheConsole(t *testing.T) {
	r := platform.Default(platform.Options{})
	if got := r.Names(); !slices.Equal(got, []string{platform.DefaultName}) || platform.DefaultName != "console" {
		t.Fatalf("Default names = %q", got)
	}
	p, _ := r.Platform("console")
	if _, ok := p.Sender.(*platform.Console); !ok || p.String() != "console=console:" {
		t.Errorf("Default platform = %v (%T)", p, p.Sender)
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"webhook:https://h/p?secret=abc&x=1", "webhook:https://h/p?secret=REDACTED&x=1"},
		{"webhook:https://h/p?x=1&secret=abc", "webhook:https://h/p?x=1&secret=REDACTED"},
		{"webhook:https://h/p?secret=abc#frag", "webhook:https://h/p?secret=REDACTED"},
		{"webhook:https://h/p?secret=a,b&c=d", "webhook:https://h/p?secret=REDACTED&c=d"},
		{"webhook:https://h/p?SECRET=abc", "webhook:https://h/p?SECRET=REDACTED"},
		{"webhook:https://h/p?secret=a&secret=b", "webhook:https://h/p?secret=REDACTED&secret=REDACTED"},
		{"webhook:https://user:pw@h/?x=1", "webhook:https://user:REDACTED@h/?x=1"},
		{"webhook:https://h/p?mysecret=abc", "webhook:https://h/p?mysecret=abc"},
		{"fake:http://127.0.0.1:1?profile=slack", "fake:http://127.0.0.1:1?profile=slack"},
		{"console:", "console:"},
	}
	for _, tt := range tests {
		if got := platform.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRegistryAddRefusesWhatParseWouldNot(t *testing.T) {
	r := platform.NewRegistry()
	console := platform.NewConsole(io.Discard)
	tests := []struct {
		name string
		p    platform.Platform
		want string
	}{
		{"an invalid name", platform.Platform{Name: "Bad Name", URL: "console:", Sender: console},
			`platform spec "Bad Name=console:": invalid name "Bad Name" (want [a-z0-9][a-z0-9_-]*)`},
		{"no sender", platform.Platform{Name: "x", URL: "console:"}, `platform "x": no sender`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := r.Add(tt.p); err == nil || err.Error() != tt.want {
				t.Fatalf("Add = %v, want %q", err, tt.want)
			}
		})
	}
	if r.Len() != 0 {
		t.Errorf("the registry holds %q", r.Names())
	}
}
