// Package split cuts a message text that is longer than a platform's limit
// into ordered parts, each within the limit, so that the outbox can send a
// long message as several.
//
// # Where a part ends
//
// A part ends at the best boundary that keeps it within the limit. Boundaries
// rank, best first:
//
//  1. a paragraph break (a blank line) outside any Markdown entity;
//  2. a line break outside any entity;
//  3. a blank line, then a line break, inside a fenced code block;
//  4. whitespace between words outside any entity;
//  5. a paragraph break, line break or whitespace inside an inline entity;
//  6. a grapheme cluster boundary (UAX #29, via github.com/rivo/uniseg)
//     outside entities, then whitespace or a grapheme cluster boundary within
//     a line of a code block, then a grapheme cluster boundary inside an
//     inline entity.
//
// A better-ranked boundary is taken only if the part it ends is at least half
// full; otherwise the next rank is tried, and only if no rank reaches half is
// the best-ranked boundary taken however early it is. Without that rule a short
// greeting paragraph would become a message of its own.
//
// A cut never falls inside a grapheme cluster (so never inside a UTF-16
// surrogate pair, an emoji ZWJ sequence, a flag, a base and its combining
// marks, or a Hangul syllable), nor between a backslash and the punctuation it
// escapes (Telegram MarkdownV2 and CommonMark escapes). The one exception is
// pathological: a single grapheme cluster longer than half of Max cannot share
// a part with the markup a part may need, so it is cut between runes.
//
// Whitespace at a cut is dropped: outside code, the whole run of spaces and
// line breaks between the two parts; inside a fenced code block, the line
// break and any blank lines after it, but not the next line's indentation;
// inside inline code, only a line break (it renders as a space), as other
// spaces there are the code's own. When a text must be split, whitespace at
// its very start and end is dropped too (unless dropping indentation would
// turn a line into a fence line). Nothing else is lost or changed: every
// [Part] records the byte range of the original that it carries and the
// Markdown it adds.
//
// # Markdown
//
// The rules follow PLATFORMS.md ("never inside a Markdown entity or code
// fence; close and reopen it, counting the added characters inside the
// limit"), because a Telegram 400 "can't parse entities" from a bad cut is a
// split bug, not a permanent failure of the message. Recognition is
// deliberately simple and conservative, covering what Telegram MarkdownV2,
// Discord and Slack share:
//
//   - Fenced code blocks as in CommonMark §4.5: a line of three or more ` or
//     ~ (up to three spaces of indentation, an info string such as "go",
//     which for ` may not contain `), closed by a line of at least as many of
//     the same character. A block left open runs to the end of the text, as in
//     CommonMark. A part that ends inside a block gets "\n" plus the opening
//     run (e.g. "\n```"), and the next part starts with the opening line again
//     (e.g. "```go\n").
//   - Inline code: a run of backticks closed by the next run of the same length.
//   - Emphasis: *x*, **x**, _x_, __x__, ~x~, ~~x~~ and ||x|| (spoiler), paired
//     innermost first; an opening marker must not be followed by whitespace and a
//     closing one not preceded by it, and _ does not open or close inside a
//     word. Unpaired markers are plain text.
//   - Links: [text](url), with no whitespace in url.
//
// A cut inside inline code or emphasis closes the open markers at the end of
// the part and reopens them at the start of the next (e.g. "**" and "**"),
// counted in the limit. A cut inside a link is not made while the link fits in
// half of Max, which guarantees it a part of its own if need be; a longer link
// (rare: 2048 characters for Telegram) is split as plain text and loses its
// target.
//
// Added markup is capped: if reopening a fence (its opening line plus "\n"), or
// the markers of the entities open at a cut, would take more than a quarter of
// Max, that block or entity is split as plain text. This keeps at least half of
// every part for the text itself.
//
// A cut is also never made where it would make the first line of the next
// part, or the last line of this one, open a fenced code block where the
// original has none (a line such as "```x" that ends before a backtick, or
// "~~~"), since that would turn the rest of the part into code: say a cut
// before a mid-line "```", or reopened strikethrough "~~" + "~". Only when no
// other boundary fits is such a cut made, which takes contrived text (a line
// longer than the part that starts with ``` and has its next backtick far on).
package split

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Unit is what a platform counts when it measures the length of a text.
type Unit int

// The zero Unit is invalid, so that a Limit whose Unit was left unset is
// refused instead of silently counted in some unit.
const (
	// UTF16 counts UTF-16 code units: a code point above U+FFFF, such as most
	// emoji, counts two. Telegram's sendMessage limit is defined in these
	// (PLATFORMS.md); Discord's and Slack's are counted in them to be safe.
	UTF16 Unit = iota + 1
	// Runes counts Unicode code points.
	Runes
	// Bytes counts UTF-8 bytes, which is what bounds a webhook body.
	Bytes
)

// String names the unit for error messages.
func (u Unit) String() string {
	switch u {
	case UTF16:
		return "UTF-16 code units"
	case Runes:
		return "runes"
	case Bytes:
		return "bytes"
	}
	return fmt.Sprintf("Unit(%d)", int(u))
}

func (u Unit) valid() bool { return u == UTF16 || u == Runes || u == Bytes }

// Limit is a platform's maximum text length per message: Max, counted in Unit.
//
// The outbox passes a Max smaller than the platform's to leave room for the
// redelivery marker it prefixes to a part; every part is within Max as given.
type Limit struct {
	Max  int
	Unit Unit
}

// Platform limits (PLATFORMS.md). Webhooks have none of their own: Standard
// Webhooks only advises keeping a payload under 20 kB, so the caller picks a
// Limit in Bytes that leaves room for its JSON envelope.
var (
	// Telegram is sendMessage's limit: 4096 characters of text after entity
	// parsing, counted in UTF-16 code units (Telegram Bot API, sendMessage).
	// The raw Markdown is counted, which is conservative: parsing only removes
	// characters.
	Telegram = Limit{Max: 4096, Unit: UTF16}
	// Discord is the 2000-character limit on a message's content (Discord API,
	// Create Message). UTF-16 units are never fewer than code points, so
	// counting them is conservative.
	Discord = Limit{Max: 2000, Unit: UTF16}
	// Slack keeps a chat.postMessage text at 3900 UTF-16 units: Slack truncates
	// above 40,000 characters and advises staying at or under 4,000 (Slack Web
	// API, chat.postMessage); 3900 leaves a margin under that.
	Slack = Limit{Max: 3900, Unit: UTF16}
)

// MinMax is the smallest Limit.Max accepted. Below it, the markup a part may
// need (a reopened fence "```go\n" and its closing "\n```") would leave too
// little room for text to make sensible progress.
const MinMax = 64

var (
	// ErrLimitTooSmall is returned when Limit.Max is below MinMax.
	ErrLimitTooSmall = errors.New("limit too small to split into")
	// ErrUnknownUnit is returned when Limit.Unit is not UTF16, Runes or Bytes.
	ErrUnknownUnit = errors.New("unknown length unit")
)

// Length returns the length of s in u. Each byte of s that is not part of
// valid UTF-8 counts as one rune and one UTF-16 unit, as the U+FFFD a JSON
// encoder replaces it with would. Length panics on a Unit other than UTF16,
// Runes or Bytes, since that is a programming error.
func Length(s string, u Unit) int {
	switch u {
	case Bytes:
		return len(s)
	case Runes:
		return utf8.RuneCountInString(s)
	case UTF16:
		n := 0
		for _, r := range s {
			if r > 0xFFFF {
				n += 2
			} else {
				n++
			}
		}
		return n
	}
	panic(fmt.Sprintf("split: length in %v", u))
}

// Part is one message of a split text.
//
// Text is what to send: Prefix + original[Start:End] + Suffix, where Start and
// End are byte offsets into the original text, and Prefix and Suffix are only
// Markdown added to reopen and close a fenced code block or inline entities
// (both empty when the cut needed none). Between one part's End and the next
// part's Start, and before the first Start and after the last End, the
// original holds only whitespace that was dropped at a cut.
type Part struct {
	Text           string
	Start, End     int
	Prefix, Suffix string
}

// Parts splits s into ordered parts, each at most limit.Max long in
// limit.Unit, by the rules in the package documentation. A text within the
// limit, including the empty text, comes back as one Part holding it
// unchanged. The result depends only on s and limit.
//
// Errors: ErrUnknownUnit, and ErrLimitTooSmall when limit.Max < MinMax, both
// whatever the length of s.
func Parts(s string, limit Limit) ([]Part, error) {
	parts, _, err := splitParts(s, limit)
	return parts, err
}

// splitParts is Parts, also returning the fallback cuts it had to make.
func splitParts(s string, limit Limit) ([]Part, cutStats, error) {
	if !limit.Unit.valid() {
		return nil, cutStats{}, fmt.Errorf("split text: unit %v: %w", limit.Unit, ErrUnknownUnit)
	}
	if limit.Max < MinMax {
		return nil, cutStats{}, fmt.Errorf("split text: max %d %v is below %d: %w", limit.Max, limit.Unit, MinMax, ErrLimitTooSmall)
	}
	if Length(s, limit.Unit) <= limit.Max {
		return []Part{{Text: s, Start: 0, End: len(s)}}, cutStats{}, nil
	}
	sp := newSplitter(s, limit)
	parts := sp.split()
	return parts, sp.stats, nil
}

// Text splits s like Parts and returns only the texts to send.
func Text(s string, limit Limit) ([]string, error) {
	parts, err := Parts(s, limit)
	if err != nil {
		return nil, err
	}
	texts := make([]string, len(parts))
	for i, p := range parts {
		texts[i] = p.Text
	}
	return texts, nil
}
