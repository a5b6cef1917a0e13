package split

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// MustSplit splits s and checks every property the package promises of the
// result (see checkParts). It returns the texts.
func MustSplit(tb testing.TB, s string, limit Limit) []string {
	tb.Helper()
	texts, _ := mustSplitStats(tb, s, limit)
	return texts
}

// mustSplitStats is MustSplit, also returning the fallback cuts made.
func mustSplitStats(tb testing.TB, s string, limit Limit) ([]string, cutStats) {
	tb.Helper()
	parts, stats, err := splitParts(s, limit)
	if err != nil {
		tb.Fatalf("Parts(%d bytes, %+v): %v", len(s), limit, err)
	}
	if err := checkParts(s, limit, parts, stats.desperate > 0); err != nil {
		tb.Fatalf("Parts(%q, %+v): %v\nparts: %q", abbrev(s), limit, err, texts(parts))
	}
	if stats.lastResorts > 0 {
		tb.Fatalf("Parts(%q, %+v) fell back to a cut that ignores the rules", abbrev(s), limit)
	}
	got, err := Text(s, limit)
	if err != nil {
		tb.Fatalf("Text: %v", err)
	}
	return got, stats
}

func texts(parts []Part) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = p.Text
	}
	return out
}

func abbrev(s string) string {
	if len(s) <= 300 {
		return s
	}
	return s[:150] + "…" + s[len(s)-150:]
}

// checkParts returns what is wrong with parts as a split of s:
//   - a text within the limit is one part holding it unchanged;
//   - every part is non-empty and within the limit;
//   - Text is Prefix + s[Start:End] + Suffix, the ranges are in order, and
//     only whitespace lies outside them (the reconstruction property);
//   - Prefix and Suffix are only fence or emphasis markup, and what a part
//     closes the next reopens;
//   - no cut falls inside a grapheme cluster, except at a rune boundary
//     inside a cluster longer than Max/2;
//   - every fenced code block opened in a part is closed in it, except in the
//     last part if the original leaves its last block open. Exempt are splits
//     that had to make a desperate cut, and texts with a fence whose opening
//     line takes more than Max/4 to reopen, which is split as plain text (see
//     the package documentation).
func checkParts(s string, limit Limit, parts []Part, desperate bool) error {
	if Length(s, limit.Unit) <= limit.Max {
		if len(parts) != 1 || parts[0].Text != s || parts[0].Start != 0 || parts[0].End != len(s) {
			return fmt.Errorf("text within the limit came back as %q", texts(parts))
		}
		return nil
	}
	if len(parts) == 0 {
		return fmt.Errorf("text over the limit came back as no parts")
	}
	bounds := graphemeBounds(s)
	valid := utf8.ValidString(s)
	var rebuilt strings.Builder
	prev := 0
	for i, p := range parts {
		if p.Text == "" || p.Start >= p.End {
			return fmt.Errorf("part %d is empty (%d..%d)", i, p.Start, p.End)
		}
		if n := Length(p.Text, limit.Unit); n > limit.Max {
			return fmt.Errorf("part %d is %d %v long, over %d", i, n, limit.Unit, limit.Max)
		}
		if p.Start < prev || p.End > len(s) {
			return fmt.Errorf("part %d covers %d..%d after %d in %d bytes", i, p.Start, p.End, prev, len(s))
		}
		if gap := s[prev:p.Start]; !allSpace(gap) {
			return fmt.Errorf("part %d drops %q, which is not whitespace", i, gap)
		}
		rebuilt.WriteString(s[prev:p.Start])
		if !strings.HasPrefix(p.Text, p.Prefix) || !strings.HasSuffix(p.Text[len(p.Prefix):], p.Suffix) {
			return fmt.Errorf("part %d: text %q does not carry prefix %q and suffix %q", i, p.Text, p.Prefix, p.Suffix)
		}
		body := p.Text[len(p.Prefix) : len(p.Text)-len(p.Suffix)]
		if body != s[p.Start:p.End] {
			return fmt.Errorf("part %d: %q is not the original %q", i, body, s[p.Start:p.End])
		}
		rebuilt.WriteString(body)
		if err := checkMarkup(i, parts); err != nil {
			return err
		}
		for _, c := range []int{p.Start, p.End} {
			if err := checkCut(s, limit, bounds, c); err != nil {
				return fmt.Errorf("part %d: %w", i, err)
			}
		}
		if valid && !utf8.ValidString(p.Text) {
			return fmt.Errorf("part %d is not valid UTF-8", i)
		}
		prev = p.End
	}
	if tail := s[prev:]; !allSpace(tail) {
		return fmt.Errorf("the parts drop %q at the end, which is not whitespace", tail)
	}
	rebuilt.WriteString(s[prev:])
	if rebuilt.String() != s {
		return fmt.Errorf("the parts do not rebuild the original")
	}
	if desperate {
		return nil
	}
	return checkFences(s, limit, parts)
}

// checkMarkup checks that part i adds only markup, consistent with its
// neighbours: what it closes, the next part reopens.
func checkMarkup(i int, parts []Part) error {
	p := parts[i]
	if i == 0 && p.Prefix != "" {
		return fmt.Errorf("first part has prefix %q", p.Prefix)
	}
	if i == len(parts)-1 && p.Suffix != "" {
		return fmt.Errorf("last part has suffix %q", p.Suffix)
	}
	if i > 0 && parts[i-1].Suffix == "" && p.Prefix != "" {
		return fmt.Errorf("part %d reopens %q that part %d did not close", i, p.Prefix, i-1)
	}
	if p.Suffix == "" {
		return nil
	}
	next := parts[i+1].Prefix
	if strings.HasPrefix(p.Suffix, "\n") {
		run := p.Suffix[1:]
		if _, n, ok := fenceRun(run); !ok || n != len(run) {
			return fmt.Errorf("part %d closes with %q, not a fence", i, p.Suffix)
		}
		if !strings.HasPrefix(next, run) || !strings.HasSuffix(next, "\n") || strings.Count(next, "\n") != 1 {
			return fmt.Errorf("part %d closes fence %q but part %d reopens with %q", i, run, i+1, next)
		}
		return nil
	}
	if strings.Trim(p.Suffix, "*_~|`") != "" || len(next) != len(p.Suffix) {
		return fmt.Errorf("part %d closes with %q and part %d reopens with %q", i, p.Suffix, i+1, next)
	}
	return nil
}

// checkCut checks that byte offset c falls between grapheme clusters of s, or
// between runes inside a cluster too long for any part.
func checkCut(s string, limit Limit, bounds clusters, c int) error {
	lo, hi := bounds.around(c, 4*limit.Max)
	if lo == c {
		return nil
	}
	if c < len(s) && !utf8.RuneStart(s[c]) {
		return fmt.Errorf("cut at %d is inside a rune", c)
	}
	if Length(s[lo:hi], limit.Unit) <= limit.Max/2 {
		return fmt.Errorf("cut at %d is inside grapheme cluster %q", c, s[lo:hi])
	}
	return nil
}

// clusters holds, for every byte offset, the start of the grapheme cluster
// it falls in (the offset itself at a boundary).
type clusters []int32

func graphemeBounds(s string) clusters {
	b := make(clusters, len(s)+1)
	pos, state := 0, -1
	for pos < len(s) {
		var cl string
		cl, _, _, state = uniseg.FirstGraphemeClusterInString(s[pos:], state)
		for i := range len(cl) {
			b[pos+i] = int32(pos)
		}
		pos += len(cl)
	}
	b[len(s)] = int32(len(s))
	return b
}

// around returns the cluster that c is in or starts, [lo, hi), looking no
// further than span bytes past c.
func (b clusters) around(c, span int) (lo, hi int) {
	lo, hi = int(b[c]), c+1
	for hi < len(b)-1 && hi < c+span && int(b[hi]) == lo {
		hi++
	}
	return lo, min(hi, len(b)-1)
}

func checkFences(s string, limit Limit, parts []Part) error {
	all := parseFences(s)
	openEnd := len(all) > 0 && !all[len(all)-1].closed
	for _, f := range all {
		if Length(strings.TrimSuffix(s[f.start:f.lineEnd], "\r"), limit.Unit)+1 > limit.Max/4 {
			return nil
		}
	}
	for i, p := range parts {
		for _, f := range parseFences(p.Text) {
			if !f.closed && !(openEnd && i == len(parts)-1) {
				return fmt.Errorf("part %d leaves the fence %q open", i, p.Text[f.start:f.lineEnd])
			}
		}
	}
	return nil
}

func allSpace(s string) bool {
	for _, r := range s {
		if !isSpace(r) {
			return false
		}
	}
	return true
}

// mixedText returns a deterministic text of at least n bytes mixing what
// herald's messages hold: paragraphs, lists, emphasis, inline code, links,
// emoji, CJK, right-to-left text with marks, and fenced code blocks.
func mixedText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	words := []string{
		"the", "gateway", "delivers", "messages", "to", "every", "platform", "once",
		"retry", "outbox", "ledger", "Telegram", "Discord", "Slack", "webhook",
		"👩‍👩‍👧‍👦", "🇯🇵", "👍🏽", "😀", "café", "e\u0301te\u0301", "日本語のテキスト", "한국어",
		"مرحبًا", "שָׁלוֹם", "नमस्ते", "**bold words**", "_italic_", "`inline code`",
		"~~struck~~", "[a link](https://example.com/path_(x))", "snake_case_name",
		"2*3*4", "\\*escaped\\*", "||spoiler||",
	}
	var b strings.Builder
	for b.Len() < n {
		switch k := r.IntN(10); {
		case k == 0:
			lang := []string{"", "go", "python", "sh"}[r.IntN(4)]
			b.WriteString("```" + lang + "\n")
			for range 3 + r.IntN(40) {
				b.WriteString(strings.Repeat("    ", r.IntN(3)))
				for range 1 + r.IntN(12) {
					b.WriteString(words[r.IntN(15)] + " ")
				}
				b.WriteString("\n")
				if r.IntN(8) == 0 {
					b.WriteString("\n")
				}
			}
			b.WriteString("```\n\n")
		case k == 1:
			for range 2 + r.IntN(6) {
				b.WriteString("- " + words[r.IntN(len(words))] + " " + words[r.IntN(len(words))] + "\n")
			}
			b.WriteString("\n")
		default:
			for range 10 + r.IntN(120) {
				b.WriteString(words[r.IntN(len(words))])
				if r.IntN(15) == 0 {
					b.WriteString("\n")
				} else {
					b.WriteString(" ")
				}
			}
			b.WriteString("\n\n")
		}
	}
	return b.String()
}
