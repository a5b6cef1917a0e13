package split

import (
	"strings"
	"testing"
)

// FuzzText splits arbitrary text at limits from MinMax up and checks every
// property in checkParts: parts within Max and non-empty, no cut inside a
// grapheme cluster or surrogate pair, fences closed in each part, and the
// original rebuilt from the parts. Small limits make short inputs split.
func FuzzText(f *testing.F) {
	seeds := []string{
		"",
		"plain ASCII words that go on for a while " + strings.Repeat("and on ", 20),
		strings.Repeat("x", 63) + "😀" + strings.Repeat("y", 10),
		strings.Repeat("👩‍👩‍👧‍👦🇯🇵👍🏽e\u0301", 30),
		strings.Repeat("日本語のテキスト", 20),
		strings.Repeat("مَرْحَبًا שָׁלוֹם नमस्ते ", 20),
		"para one\n\npara two is longer\nwith lines\n\n" + strings.Repeat("word ", 40),
		"```go\n" + strings.Repeat("fmt.Println(\"hello\")\n", 10) + "```\n\nafter",
		"~~~\n" + strings.Repeat("code line\n\n", 10) + "~~~",
		"````\n```\ninner\n```\n" + strings.Repeat("more\n", 20) + "````",
		"```sh\n" + strings.Repeat("unclosed\n", 20),
		"    ```not a fence\n" + strings.Repeat("text ", 30),
		"**" + strings.Repeat("bold ", 30) + "** and `" + strings.Repeat("code ", 30) + "`",
		"**a _" + strings.Repeat("nested ", 20) + "_ b** ~~" + strings.Repeat("gone ", 20) + "~~",
		"||" + strings.Repeat("spoiler ", 20) + "||",
		"[" + strings.Repeat("link ", 30) + "](https://example.com/a_(b))",
		strings.Repeat(`\*not bold\* `, 20),
		"~~" + strings.Repeat("a ~b ", 20) + "c~ d~~",
		"`x\n" + strings.Repeat("``y ", 30) + "`",
		"```x `y` " + strings.Repeat("z", 100),
		strings.Repeat(" ", 100),
		"a\r\n\r\n" + strings.Repeat("crlf line\r\n", 20),
		strings.Repeat("a", 40) + "\u0301" + strings.Repeat("\u0301", 100),
		mixedText(1, 3000),
	}
	for i, s := range seeds {
		f.Add(s, uint16(i*37), uint8(i))
	}
	f.Fuzz(func(t *testing.T, s string, max uint16, unit uint8) {
		limit := Limit{Max: MinMax + int(max%512), Unit: Unit(1 + unit%3)}
		MustSplit(t, s, limit)
	})
}
