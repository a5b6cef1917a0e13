package split

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// fence is a fenced code block (CommonMark §4.5). Offsets are bytes into the
// text.
type fence struct {
	start   int  // first byte of the opening run, after any indentation
	lineEnd int  // end of the opening line, before its line break
	openEnd int  // first byte of the content, after the opening line break
	lastNL  int  // line break before the closing line; len(s) when unclosed
	end     int  // first byte after the closing run; len(s) when unclosed
	char    byte // '`' or '~'
	run     int  // length of the opening run
	closed  bool

	// Set by the splitter when the block is carried across cuts.
	prefix, suffix       string
	prefixLen, suffixLen int
}

// parseFences finds the fenced code blocks of s in order. It is linear in
// len(s): a block left open runs to the end (CommonMark), so no line is
// scanned twice looking for a closing line.
func parseFences(s string) []fence {
	var out []fence
	var cur fence
	open := false
	for ls := 0; ls < len(s); {
		le := len(s)
		if i := strings.IndexByte(s[ls:], '\n'); i >= 0 {
			le = ls + i
		}
		line := s[ls:le]
		if open {
			if ind, n, ok := fenceRun(line); ok && line[ind] == cur.char && n >= cur.run && blank(line[ind+n:]) {
				cur.lastNL = ls - 1
				if cur.lastNL > cur.lineEnd && s[cur.lastNL-1] == '\r' {
					cur.lastNL--
				}
				cur.end = ls + ind + n
				cur.closed = true
				out = append(out, cur)
				open = false
			}
		} else if ind, n, ok := fenceRun(line); ok && (line[ind] == '~' || !strings.Contains(line[ind+n:], "`")) {
			cur = fence{start: ls + ind, lineEnd: le, openEnd: min(le+1, len(s)), char: line[ind], run: n}
			open = true
		}
		ls = le + 1
	}
	if open {
		cur.lastNL, cur.end = len(s), len(s)
		out = append(out, cur)
	}
	return out
}

// fenceRun reports whether line starts like a fence line: up to three spaces,
// then three or more '`' or '~'. It returns the indentation and run length.
func fenceRun(line string) (indent, run int, ok bool) {
	for indent < 3 && indent < len(line) && line[indent] == ' ' {
		indent++
	}
	if indent == len(line) || (line[indent] != '`' && line[indent] != '~') {
		return 0, 0, false
	}
	c := line[indent]
	run = 1
	for indent+run < len(line) && line[indent+run] == c {
		run++
	}
	return indent, run, run >= 3
}

func blank(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' && s[i] != '\r' {
			return false
		}
	}
	return true
}

type nodeKind uint8

const (
	nodeLink nodeKind = iota + 1
	nodeEmph
	nodeCode
)

// node is an inline entity: a link, emphasis or inline code span. Nodes are
// kept small (indices are int32) because marker-dense text has many.
type node struct {
	start, end int
	// mlen is the length of the marker that opens and closes emphasis or
	// inline code: s[start:start+mlen], the same at both ends.
	mlen int32
	kind nodeKind

	parent int32 // enclosing node, or -1
	// eff is the nearest node around and including this one that constrains
	// a cut: a link, or an entity whose markers are carried. -1 if none.
	eff int32
	// entUp is the nearest carried entity strictly around this node, -1 if
	// none; entSelf is this node if it is a carried entity, else entUp.
	entUp, entSelf int32
	// markup is the length of the markers that a cut inside this carried
	// entity adds on each side: its own and those of the carried entities
	// around it. Markers are ASCII, so bytes are units in every Unit.
	markup int32
	// pre and suf are the first bytes of the reopening and closing markup.
	pre, suf head
}

// delimiter tokens that may pair as emphasis.
const (
	tokNone = iota
	tokStar1
	tokStar2
	tokUnder1
	tokUnder2
	tokTilde1
	tokTilde2
	tokPipe2
	numToks
)

func delimTok(c byte, n int) int {
	switch {
	case c == '*' && n == 1:
		return tokStar1
	case c == '*' && n == 2:
		return tokStar2
	case c == '_' && n == 1:
		return tokUnder1
	case c == '_' && n == 2:
		return tokUnder2
	case c == '~' && n == 1:
		return tokTilde1
	case c == '~' && n == 2:
		return tokTilde2
	case c == '|' && n == 2:
		return tokPipe2
	}
	return tokNone
}

// parseInline appends the inline entities of s[r0:r1], a stretch outside
// fenced code blocks, to sp.nodes. It is linear in r1-r0.
func (sp *splitter) parseInline(r0, r1 int) {
	s := sp.s
	// Backtick runs, found with escapes honoured everywhere (Telegram
	// MarkdownV2 escapes ` and \ even inside code), and for each the next run
	// of the same length: where inline code opened by it would close.
	type btRun struct{ pos, n int32 }
	var runs []btRun
	for i := r0; i < r1; {
		switch {
		case s[i] == '\\' && i+1 < r1 && isPunct(s[i+1]):
			i += 2
		case s[i] == '`':
			j := i
			for j < r1 && s[j] == '`' {
				j++
			}
			runs = append(runs, btRun{int32(i), int32(j - i)})
			i = j
		default:
			i++
		}
	}
	nextSame := make([]int32, len(runs))
	last := make(map[int32]int32)
	for k := len(runs) - 1; k >= 0; k-- {
		nextSame[k] = -1
		if j, ok := last[runs[k].n]; ok {
			nextSame[k] = j
		}
		last[runs[k].n] = int32(k)
	}

	type opener struct{ pos, tok int32 }
	var stack []opener
	var open [numToks]int
	rk := 0
	for i := r0; i < r1; {
		c := s[i]
		switch {
		case c == '\\' && i+1 < r1 && isPunct(s[i+1]):
			i += 2
		case c == '`':
			for rk < len(runs) && int(runs[rk].pos) < i {
				rk++
			}
			if rk == len(runs) || int(runs[rk].pos) != i {
				i++ // cannot happen: both passes skip the same escapes
				continue
			}
			r := runs[rk]
			if j := nextSame[rk]; j >= 0 {
				end := int(runs[j].pos + r.n)
				sp.nodes = append(sp.nodes, node{start: i, end: end, kind: nodeCode, mlen: r.n})
				i, rk = end, int(j)+1
			} else {
				i, rk = i+int(r.n), rk+1
			}
		case c == '[':
			if end, ok := linkEnd(s, i, r1); ok && Length(s[i:end], sp.unit) <= sp.max/2 {
				sp.nodes = append(sp.nodes, node{start: i, end: end, kind: nodeLink})
				i = end
			} else {
				i++
			}
		case c == '*' || c == '_' || c == '~' || c == '|':
			j := i + 1
			for j < r1 && s[j] == c {
				j++
			}
			tok := delimTok(c, j-i)
			if tok == tokNone {
				i = j
				continue
			}
			prev, pn := utf8.DecodeLastRuneInString(s[:i])
			next, nn := utf8.DecodeRuneInString(s[j:r1])
			canOpen := nn > 0 && !unicode.IsSpace(next)
			canClose := pn > 0 && !unicode.IsSpace(prev)
			if c == '_' {
				// Intraword _ is not emphasis (snake_case, URLs).
				canOpen = canOpen && !(pn > 0 && isAlnum(prev))
				canClose = canClose && !(nn > 0 && isAlnum(next))
			}
			switch {
			case canClose && open[tok] > 0:
				k := len(stack) - 1
				for int(stack[k].tok) != tok {
					open[stack[k].tok]--
					k--
				}
				open[tok]--
				sp.nodes = append(sp.nodes, node{start: int(stack[k].pos), end: j, kind: nodeEmph, mlen: int32(j - i)})
				stack = stack[:k]
			case canOpen:
				stack = append(stack, opener{int32(i), int32(tok)})
				open[tok]++
			}
			i = j
		default:
			i++
		}
	}
}

// linkEnd returns the end of a link [text](url) starting at s[i] == '[',
// within s[:r1]. The text may not contain an unescaped [ and the url no
// whitespace; parentheses in the url must balance.
func linkEnd(s string, i, r1 int) (int, bool) {
	j := i + 1
	for ; j < r1; j++ {
		switch s[j] {
		case '\\':
			if j+1 < r1 && isPunct(s[j+1]) {
				j++
			}
			continue
		case '[':
			return 0, false
		}
		if s[j] == ']' {
			break
		}
	}
	if j == i+1 || j+1 >= r1 || s[j] != ']' || s[j+1] != '(' {
		return 0, false
	}
	depth := 0
	for k := j + 2; k < r1; k++ {
		switch s[k] {
		case '\\':
			if k+1 < r1 && isPunct(s[k+1]) {
				k++
			}
		case ' ', '\t', '\n', '\r':
			return 0, false
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return k + 1, true
			}
			depth--
		}
	}
	return 0, false
}

// isPunct reports ASCII punctuation, the characters a backslash escapes in
// CommonMark and Telegram MarkdownV2.
func isPunct(c byte) bool {
	return c >= '!' && c <= '/' || c >= ':' && c <= '@' || c >= '[' && c <= '`' || c >= '{' && c <= '~'
}

func isAlnum(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// head holds the first bytes of a line, enough to tell whether it starts
// like a fence line: up to three spaces and three fence characters.
type head struct {
	b [6]byte
	n uint8
}

func (h head) add(s string) head {
	for i := 0; i < len(s) && int(h.n) < len(h.b); i++ {
		h.b[h.n] = s[i]
		h.n++
	}
	return h
}

func (h head) addHead(o head) head {
	for i := 0; i < int(o.n) && int(h.n) < len(h.b); i++ {
		h.b[h.n] = o.b[i]
		h.n++
	}
	return h
}

// like reports whether the line starts with up to three spaces and then
// three of c, or, if c is 0, three of either '`' or '~'.
func (h head) like(c byte) bool {
	i := 0
	for i < 3 && i < int(h.n) && h.b[i] == ' ' {
		i++
	}
	if i+3 > int(h.n) {
		return false
	}
	if c == 0 {
		c = h.b[i]
		if c != '`' && c != '~' {
			return false
		}
	}
	return h.b[i] == c && h.b[i+1] == c && h.b[i+2] == c
}

// isSpace reports the characters a cut may drop and a word ends at. No-break
// spaces are left out: they ask not to be broken at.
func isSpace(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x85, 0x1680, 0x2028, 0x2029, 0x205F, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200A && r != 0x2007
}

// clusterSpace reports whether a grapheme cluster is whitespace and whether it
// is a line break. A space followed by a combining mark is one cluster and not
// whitespace: dropping it would lose the mark's base.
func clusterSpace(cl string) (ws, nl bool) {
	if cl == "\n" || cl == "\r\n" {
		return true, true
	}
	r, n := utf8.DecodeRuneInString(cl)
	return n == len(cl) && isSpace(r), false
}

// lineHead follows the start of a line, byte by byte, to tell whether the
// line would open a fenced code block (CommonMark §4.5): up to three spaces,
// then three or more ~, or three or more ` with no ` after them on the line.
type lineHead struct {
	st     uint8
	spaces uint8
	ch     byte
	run    int
}

const (
	headSpaces = iota // in the indentation
	headRun           // in a run of ` or ~
	headAfter         // past three or more `: plain if a ` follows
	headPlain         // decided: not a fence line
	headFence         // decided: a ~ fence line
)

func (h *lineHead) feed(c byte) {
	switch h.st {
	case headSpaces:
		switch {
		case c == ' ' && h.spaces < 3:
			h.spaces++
		case c == '`' || c == '~':
			h.st, h.ch, h.run = headRun, c, 1
		default:
			h.st = headPlain
		}
	case headRun:
		switch {
		case c == h.ch:
			h.run++
		case h.run < 3:
			h.st = headPlain
		case h.ch == '~':
			h.st = headFence
		default:
			h.st = headAfter
			h.feed(c)
		}
	case headAfter:
		if c == '`' {
			h.st = headPlain
		}
	}
}

func (h *lineHead) feedString(s string) {
	for i := 0; i < len(s) && !h.decided(); i++ {
		h.feed(s[i])
	}
}

func (h *lineHead) feedBytes(b []byte) {
	for i := 0; i < len(b) && !h.decided(); i++ {
		h.feed(b[i])
	}
}

func (h lineHead) decided() bool { return h.st == headPlain || h.st == headFence }

// fence reports whether the line, if it ended here, would open a fence.
func (h lineHead) fence() bool {
	return h.st == headFence || h.st == headAfter || h.st == headRun && h.run >= 3
}
