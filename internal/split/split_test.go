package split

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

var (
	limit64  = Limit{Max: 64, Unit: UTF16}
	limit100 = Limit{Max: 100, Unit: UTF16}
)

func TestLength(t *testing.T) {
	tests := []struct {
		name  string
		s     string
		u     Unit
		count int
	}{
		{"ASCII counts one per character in UTF-16", "hello", UTF16, 5},
		{"an emoji outside the BMP counts two UTF-16 units", "😀", UTF16, 2},
		{"an emoji outside the BMP counts one rune", "😀", Runes, 1},
		{"an emoji outside the BMP counts four bytes", "😀", Bytes, 4},
		{"a ZWJ family counts eleven UTF-16 units", "👩‍👩‍👧‍👦", UTF16, 11},
		{"CJK counts one UTF-16 unit and three bytes each", "日本", UTF16, 2},
		{"CJK counts three bytes each", "日本", Bytes, 6},
		{"an invalid byte counts as one replacement character", "a\xffb", UTF16, 3},
		{"an invalid byte counts as one rune", "a\xffb", Runes, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Length(tt.s, tt.u); got != tt.count {
				t.Errorf("Length(%q, %v) = %d, want %d", tt.s, tt.u, got, tt.count)
			}
		})
	}
}

func TestLimitErrors(t *testing.T) {
	tests := []struct {
		name  string
		limit Limit
		want  error
	}{
		{"a max below MinMax is too small", Limit{Max: MinMax - 1, Unit: UTF16}, ErrLimitTooSmall},
		{"a zero max is too small", Limit{Unit: Bytes}, ErrLimitTooSmall},
		{"an unset unit is unknown", Limit{Max: 4096}, ErrUnknownUnit},
		{"an out-of-range unit is unknown", Limit{Max: 4096, Unit: Bytes + 1}, ErrUnknownUnit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range []string{"", "short", strings.Repeat("long ", 2000)} {
				if _, err := Text(s, tt.limit); !errors.Is(err, tt.want) {
					t.Errorf("Text(%d bytes, %+v) error = %v, want %v", len(s), tt.limit, err, tt.want)
				}
			}
		})
	}
}

// TestTextExact pins the parts of small texts whose best split is clear.
func TestTextExact(t *testing.T) {
	a40, b15, c30 := strings.Repeat("a", 40), strings.Repeat("b", 15), strings.Repeat("c", 30)
	tests := []struct {
		name  string
		s     string
		limit Limit
		want  []string
	}{
		{
			name: "a short text comes back unchanged", limit: limit64,
			s: "  hello\n", want: []string{"  hello\n"},
		},
		{
			name: "an empty text comes back as one empty part", limit: limit64,
			s: "", want: []string{""},
		},
		{
			name: "a text exactly at the limit is one part", limit: limit64,
			s: strings.Repeat("x", 64), want: []string{strings.Repeat("x", 64)},
		},
		{
			name: "one character over the limit splits at the last space and drops it", limit: limit64,
			s:    strings.Repeat("word ", 12) + "tails", // 64 + 1 characters
			want: []string{strings.TrimSpace(strings.Repeat("word ", 12)), "tails"},
		},
		{
			name: "a paragraph break at least half way is preferred to a later line break", limit: limit64,
			s:    a40 + "\n\n" + b15 + "\n" + c30,
			want: []string{a40, b15 + "\n" + c30},
		},
		{
			name: "a line break is preferred to a paragraph break that leaves the part under half full", limit: limit64,
			s:    b15 + "\n\n" + a40 + "\n" + c30,
			want: []string{b15 + "\n\n" + a40, c30},
		},
		{
			name: "a line break at least half way is preferred to a later word boundary", limit: limit64,
			s:    a40 + "\n" + "bb bb bb bb bb bb bb bb bb",
			want: []string{a40, "bb bb bb bb bb bb bb bb bb"},
		},
		{
			name: "a whole run of blank lines and indentation at the cut is dropped", limit: limit64,
			s:    a40 + "  \n \n\n\t  " + c30 + "\n" + c30,
			want: []string{a40, c30 + "\n" + c30},
		},
		{
			name: "leading and trailing whitespace of a split text is dropped", limit: limit64,
			s:    "\n\n  " + a40 + "\n\n" + c30 + "\n\n\n",
			want: []string{a40, c30},
		},
		{
			name: "a surrogate pair straddling the limit in UTF-16 moves whole to the next part", limit: limit64,
			s:    strings.Repeat("a", 63) + "😀b",
			want: []string{strings.Repeat("a", 63), "😀b"},
		},
		{
			name: "an emoji that ends exactly at the limit stays in the part", limit: limit64,
			s:    strings.Repeat("a", 62) + "😀b",
			want: []string{strings.Repeat("a", 62) + "😀", "b"},
		},
		{
			name: "a ZWJ family emoji is never split", limit: limit64,
			s:    strings.Repeat("x", 60) + "👩‍👩‍👧‍👦" + "yy",
			want: []string{strings.Repeat("x", 60), "👩‍👩‍👧‍👦" + "yy"},
		},
		{
			name: "the same text in runes fits the family emoji in the first part", limit: Limit{Max: 64, Unit: Runes},
			s:    strings.Repeat("x", 57) + "👩‍👩‍👧‍👦" + "yy",
			want: []string{strings.Repeat("x", 57) + "👩‍👩‍👧‍👦", "yy"},
		},
		{
			name: "a combining mark stays with its base", limit: Limit{Max: 64, Unit: Runes},
			s:    strings.Repeat("x", 63) + "e\u0301z",
			want: []string{strings.Repeat("x", 63), "e\u0301z"},
		},
		{
			name: "a backslash escape is never split", limit: limit64,
			s:    strings.Repeat("x", 63) + `\*` + "y",
			want: []string{strings.Repeat("x", 63), `\*y`},
		},
		{
			name: "a single word of 10,000 characters splits at the limit", limit: Telegram,
			s:    strings.Repeat("w", 10000),
			want: []string{strings.Repeat("w", 4096), strings.Repeat("w", 4096), strings.Repeat("w", 1808)},
		},
		{
			name: "a code fence with a language is closed and reopened with it", limit: limit64,
			s: "```go\n" + "line one is here\nline two is here\nline three is here\n" + "line four is here\n```",
			want: []string{
				"```go\nline one is here\nline two is here\nline three is here\n```",
				"```go\nline four is here\n```",
			},
		},
		{
			name: "a code fence without a language is closed and reopened bare", limit: limit64,
			s: "```\n" + "line one is here\nline two is here\nline three is here\n" + "line four is here\n```",
			want: []string{
				"```\nline one is here\nline two is here\nline three is here\n```",
				"```\nline four is here\n```",
			},
		},
		{
			name: "a blank line inside a code block is the preferred cut and is dropped", limit: limit64,
			s: "~~~\n" + "func a() {\n\treturn 1 + 2 + 3\n}\n\n" + "func b() {\n\treturn 2\n}\n" + "func c() {}\nfunc d() {}\n~~~",
			want: []string{
				"~~~\nfunc a() {\n\treturn 1 + 2 + 3\n}\n~~~",
				"~~~\nfunc b() {\n\treturn 2\n}\nfunc c() {}\nfunc d() {}\n~~~",
			},
		},
		{
			name: "indentation inside a code block is kept at a cut", limit: limit64,
			s: "```py\n" + "def f():\n    x = 1111111111\n    y = 2222222222\n    return x + y\n```",
			want: []string{
				"```py\ndef f():\n    x = 1111111111\n    y = 2222222222\n```",
				"```py\n    return x + y\n```",
			},
		},
		{
			name: "text before a code block is cut off before the block", limit: limit64,
			s:    strings.Repeat("intro ", 6) + "\n```\n" + "some code\nmore code\neven more\n```",
			want: []string{strings.TrimSpace(strings.Repeat("intro ", 6)), "```\nsome code\nmore code\neven more\n```"},
		},
		{
			name: "a code block left open runs to the end and stays open in the last part, less trailing space", limit: limit64,
			s: "```sh\n" + strings.Repeat("echo hello\n", 7),
			want: []string{
				"```sh\n" + strings.TrimSuffix(strings.Repeat("echo hello\n", 5), "\n") + "\n```",
				"```sh\necho hello\necho hello",
			},
		},
		{
			name: "bold spanning the limit is moved whole to the next part", limit: limit64,
			s:    strings.Repeat("word ", 10) + "**bold text here**" + " end",
			want: []string{strings.TrimSpace(strings.Repeat("word ", 10)), "**bold text here** end"},
		},
		{
			name: "inline code spanning the limit is moved whole to the next part", limit: limit64,
			s:    strings.Repeat("word ", 10) + "`x := f(y, zz)`" + " and more text",
			want: []string{strings.TrimSpace(strings.Repeat("word ", 10)), "`x := f(y, zz)` and more text"},
		},
		{
			name: "bold longer than the limit is closed and reopened at a word", limit: limit64,
			s: "**" + strings.Repeat("bold ", 20) + "end**",
			want: []string{
				"**" + strings.TrimSpace(strings.Repeat("bold ", 12)) + "**",
				"**" + strings.Repeat("bold ", 8) + "end**",
			},
		},
		{
			name: "nested emphasis is closed innermost first and reopened outermost first", limit: limit64,
			s: "**a _" + strings.Repeat("nested ", 12) + "end_ b**",
			want: []string{
				"**a _" + strings.TrimSpace(strings.Repeat("nested ", 8)) + "_**",
				"**_" + strings.Repeat("nested ", 4) + "end_ b**",
			},
		},
		{
			name: "inline code longer than the limit is closed and reopened keeping its spaces", limit: limit64,
			s: "`" + strings.Repeat("code ", 20) + "`",
			want: []string{
				"`" + strings.Repeat("code ", 12) + "`",
				"`" + strings.TrimSpace(strings.Repeat("code ", 8)) + " `",
			},
		},
		{
			name: "a link that fits in half the limit is not split", limit: limit64,
			s:    strings.Repeat("x ", 20) + "[site](https://example.com/a)",
			want: []string{strings.TrimSpace(strings.Repeat("x ", 20)), "[site](https://example.com/a)"},
		},
		{
			name: "a link longer than the limit is split as plain text", limit: limit64,
			s: "[" + strings.Repeat("link text ", 10) + "](https://example.com)",
			want: []string{
				"[" + strings.TrimSpace(strings.Repeat("link text ", 6)),
				strings.Repeat("link text ", 4) + "](https://example.com)",
			},
		},
		{
			name: "a mid-line run of tildes never starts a part", limit: limit64,
			s:    strings.Repeat("a", 55) + " ~~~" + strings.Repeat("b", 20),
			want: []string{strings.Repeat("a", 55) + " ~~~bbbbb", strings.Repeat("b", 15)},
		},
		{
			name: "CRLF line breaks are dropped whole", limit: limit64,
			s:    a40 + "\r\n" + c30,
			want: []string{a40, c30},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MustSplit(t, tt.s, tt.limit)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Text(%q, %+v)\n got %q\nwant %q", tt.s, tt.limit, got, tt.want)
			}
		})
	}
}

// TestTextScripts checks that text in many scripts splits only between
// grapheme clusters and, where there are spaces, between words.
func TestTextScripts(t *testing.T) {
	tests := []struct {
		name  string
		unit  string
		limit Limit
		// whole reports whether a part's text consists of whole units.
		whole func(part string) bool
	}{
		{
			name: "ZWJ family emoji split only between families", unit: "👩‍👩‍👧‍👦", limit: limit64,
			whole: func(p string) bool {
				return strings.Count(p, "👩‍👩‍👧‍👦")*len("👩‍👩‍👧‍👦") == len(p)
			},
		},
		{
			name: "flags split only between flags", unit: "🇯🇵", limit: limit64,
			whole: func(p string) bool { return strings.Count(p, "🇯🇵")*len("🇯🇵") == len(p) },
		},
		{
			name: "skin-toned emoji split only between emoji", unit: "👍🏽", limit: Limit{Max: 65, Unit: UTF16},
			whole: func(p string) bool { return strings.Count(p, "👍🏽")*len("👍🏽") == len(p) },
		},
		{
			name: "combining marks split only after the mark", unit: "e\u0301", limit: Limit{Max: 65, Unit: Runes},
			whole: func(p string) bool { return strings.Count(p, "e\u0301")*len("e\u0301") == len(p) },
		},
		{
			name: "decomposed Hangul jamo split only between syllables", unit: "\u1112\u1161\u11ab", limit: Limit{Max: 64, Unit: Bytes},
			whole: func(p string) bool { return strings.Count(p, "\u1112\u1161\u11ab")*9 == len(p) },
		},
		{
			name: "CJK without spaces splits between characters", unit: "日本語", limit: limit64,
			whole: utf8.ValidString,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := strings.Repeat(tt.unit, 200)
			got := MustSplit(t, s, tt.limit)
			for i, p := range got {
				if !tt.whole(p) {
					t.Errorf("part %d %q is not made of whole %q", i, p, tt.unit)
				}
			}
		})
	}

	words := []struct {
		name string
		word string
	}{
		{"Arabic with harakat splits between words", "مَرْحَبًا"},
		{"Hebrew with niqqud splits between words", "שָׁלוֹם"},
		{"Devanagari splits between words", "नमस्ते"},
		{"Latin with combining marks splits between words", "re\u0301sume\u0301"},
	}
	for _, tt := range words {
		t.Run(tt.name, func(t *testing.T) {
			s := strings.TrimSpace(strings.Repeat(tt.word+" ", 100))
			for _, limit := range []Limit{limit64, {Max: 64, Unit: Bytes}, {Max: 64, Unit: Runes}} {
				for i, p := range MustSplit(t, s, limit) {
					if strings.Trim(strings.ReplaceAll(p, tt.word, ""), " ") != "" || strings.HasPrefix(p, " ") || strings.HasSuffix(p, " ") {
						t.Errorf("%v: part %d %q is not whole words", limit.Unit, i, p)
					}
				}
			}
		})
	}
}

// TestTextPlatforms splits long mixed texts at each platform's limit.
func TestTextPlatforms(t *testing.T) {
	platforms := []struct {
		name  string
		limit Limit
	}{
		{"Telegram", Telegram},
		{"Discord", Discord},
		{"Slack", Slack},
		{"a webhook in bytes", Limit{Max: 16000, Unit: Bytes}},
	}
	for _, pl := range platforms {
		for _, size := range []int{8200, 30000} {
			for seed := range uint64(4) {
				s := mixedText(seed, size)
				t.Run(pl.name+" splits a mixed text of "+strconv.Itoa(len(s))+" bytes", func(t *testing.T) {
					got, stats := mustSplitStats(t, s, pl.limit)
					if stats.desperate > 0 {
						t.Errorf("made a cut that opens a fence")
					}
					total := Length(s, pl.limit.Unit)
					if min := (total + pl.limit.Max - 1) / pl.limit.Max; len(got) < min {
						t.Fatalf("%d parts, fewer than the %d needed", len(got), min)
					}
					// Parts should be reasonably full: no more than twice the minimum.
					if max := 2*(total/pl.limit.Max) + 2; len(got) > max {
						t.Errorf("%d parts for %d %v, more than %d", len(got), total, pl.limit.Unit, max)
					}
				})
			}
		}
	}
}

// TestTextLongCodeBlock splits code blocks of 300 lines at Discord's limit:
// every part is one closed block, and no line of code is cut.
func TestTextLongCodeBlock(t *testing.T) {
	var code strings.Builder
	for i := range 300 {
		fmt.Fprintf(&code, "\tfmt.Println(%d, \"some output\") // line %d\n", i, i)
	}
	for _, info := range []string{"go", ""} {
		name := "a long code block with language " + strconv.Quote(info) + " is closed and reopened with it"
		t.Run(name, func(t *testing.T) {
			s := "Here is the code:\n\n```" + info + "\n" + code.String() + "```\n\nThat was it."
			got := MustSplit(t, s, Discord)
			var lines []string
			for i, p := range got {
				if i > 0 && !strings.HasPrefix(p, "```"+info+"\n") || i < len(got)-1 && !strings.HasSuffix(p, "\n```") {
					t.Errorf("part %d is not one closed block: %q…%q", i, p[:20], p[len(p)-20:])
				}
				for _, l := range strings.Split(p, "\n") {
					if strings.HasPrefix(l, "\tfmt") {
						lines = append(lines, l+"\n")
					}
				}
			}
			if strings.Join(lines, "") != code.String() {
				t.Error("the code lines of the parts are not the original lines")
			}
			// The introduction is short of half a part, so it keeps company
			// with the start of the block rather than going alone.
			if !strings.HasPrefix(got[0], "Here is the code:\n\n```"+info+"\n\tfmt") {
				t.Errorf("first part starts %q, want the introduction and the block", got[0][:40])
			}
			if last := got[len(got)-1]; !strings.HasSuffix(last, "\n```\n\nThat was it.") {
				t.Errorf("last part ends %q, want the block's end and the closing line", last[len(last)-40:])
			}
		})
	}
}

func TestPartsRecordWhatWasAdded(t *testing.T) {
	s := "```go\nline one is here\nline two is here\nline three is here\nline four is here\n```"
	parts, err := Parts(s, limit64)
	if err != nil {
		t.Fatal(err)
	}
	want := []Part{
		{
			Text:  "```go\nline one is here\nline two is here\nline three is here\n```",
			Start: 0, End: 58, Suffix: "\n```",
		},
		{
			Text:  "```go\nline four is here\n```",
			Start: 59, End: len(s), Prefix: "```go\n",
		},
	}
	if !slices.Equal(parts, want) {
		t.Errorf("Parts(%q)\n got %+v\nwant %+v", s, parts, want)
	}
}

// TestTextNeverOpensAFence checks texts where a careless cut would make a
// line of a part look like a fence line and turn the rest into code.
func TestTextNeverOpensAFence(t *testing.T) {
	tests := []struct {
		name string
		s    string
	}{
		{"a cut is not made before a mid-line run of backticks", strings.Repeat("a", 55) + " ```go " + strings.Repeat("b", 20)},
		{"dropped indentation does not turn an indented line into a fence", strings.Repeat("a", 50) + "\n    ```go\n" + strings.Repeat("b ", 20)},
		{"a line starting with backticks is cut only after a later backtick", "x\n```" + strings.Repeat("y", 40) + "`" + strings.Repeat(" z", 30)},
		{"a valid short cut is taken over a long one that opens a fence", "x\n```" + strings.Repeat("y", 100) + "`"},
		{"inline code with a triple-backtick marker is reopened only where its line closes it", "text ```a\nb\nc``` more " + strings.Repeat("word ", 12)},
		{"a one-line triple-backtick code span longer than the limit is closed and reopened", "```" + strings.Repeat("code ", 30) + "```"},
		{"strikethrough reopened after a tilde does not make a tilde fence", "~~" + strings.Repeat("struck ", 15) + "~~ " + strings.Repeat("~tilde ", 10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, stats := mustSplitStats(t, tt.s, limit64)
			if stats.desperate > 0 {
				t.Fatalf("made a cut that opens a fence: %q", got)
			}
			parts, _ := Parts(tt.s, limit64)
			if err := checkFences(tt.s, limit64, parts); err != nil {
				t.Fatalf("%v: %q", err, got)
			}
			if tt.name == "a valid short cut is taken over a long one that opens a fence" && got[0] != "x" {
				t.Errorf("first part %q, want %q", got[0], "x")
			}
		})
	}
}

// TestTextRandomTokens checks the properties on random texts made of the
// pieces that trip splitters up. FuzzText explores further.
func TestTextRandomTokens(t *testing.T) {
	tokens := []string{
		"a", "word ", "aaaaaaaaaaaaaaaaaaaa", " ", "\t", "    ", "\n", "\n\n", "\r\n",
		"*", "**", "_", "__", "~", "~~", "~~~", "`", "``", "```", "```go\n", "||", "[", "](", ")", "\\",
		"😀", "👩‍👩‍👧‍👦", "🇯🇵", "👍🏽", "e\u0301", "\u0301", "\u200d", "日本", "שָׁ", "\xff",
	}
	seed := uint64(20240601)
	r := rand.New(rand.NewPCG(seed, seed))
	t.Logf("seed %d", seed)
	for range 3000 {
		var b strings.Builder
		for range r.IntN(200) {
			b.WriteString(tokens[r.IntN(len(tokens))])
		}
		MustSplit(t, b.String(), Limit{Max: MinMax + r.IntN(100), Unit: Unit(1 + r.IntN(3))})
	}
}

func TestTextIsDeterministic(t *testing.T) {
	s := mixedText(7, 20000)
	first := MustSplit(t, s, Discord)
	for range 3 {
		if again := MustSplit(t, s, Discord); !slices.Equal(first, again) {
			t.Fatal("the same text split differently")
		}
	}
}
