package split

import (
	"strings"
	"testing"
)

// BenchmarkText splits 1 MB texts at Telegram's limit: a realistic mix, and
// shapes that would expose quadratic behaviour (one huge word, one huge
// grapheme cluster, dense markers, one huge code block, one long line).
func BenchmarkText(b *testing.B) {
	const size = 1 << 20
	texts := []struct {
		name string
		s    string
	}{
		{"mixed", mixedText(42, size)},
		{"one word", strings.Repeat("w", size)},
		{"one grapheme cluster", "e" + strings.Repeat("\u0301", size/2)},
		{"dense markers", strings.Repeat("*a _b `c` ~d~ [e](f) \\* ", size/24)},
		{"one code block", "```go\n" + strings.Repeat("x := 1 // a line of code\n", size/25) + "```"},
		{"one line of spaced words", strings.Repeat("word ", size/5)},
	}
	for _, tt := range texts {
		b.Run(tt.name, func(b *testing.B) {
			b.SetBytes(int64(len(tt.s)))
			for b.Loop() {
				if _, err := Text(tt.s, Telegram); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTextLarge checks the properties on the benchmark's 1 MB texts, so a
// fast result is also a right one.
func TestTextLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB texts")
	}
	const size = 1 << 20
	for _, tt := range []struct{ name, s string }{
		{"a mixed 1 MB text splits by the rules", mixedText(42, size)},
		{"a 1 MB single grapheme cluster splits at runes", "e" + strings.Repeat("\u0301", size/2)},
		{"a 1 MB text of dense markers splits by the rules", strings.Repeat("*a _b `c` ~d~ [e](f) \\* ", size/24)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			MustSplit(t, tt.s, Telegram)
		})
	}
}
