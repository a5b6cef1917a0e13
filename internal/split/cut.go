package split

import (
	"cmp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// splitter holds a text that must be split and what was parsed from it.
type splitter struct {
	stats cutStats
	s     string
	unit  Unit
	max   int
	// cap is the most markup, in unit, that one cut may add to either of
	// its parts, so that a part always keeps half of max for text.
	cap int

	fences      []fence // carried fenced code blocks, in order
	fenceStarts []int   // starts of all fenced code blocks, carried or not
	fenceEnds   []int
	nodes       []node // inline entities by start; a parent precedes its children

	// Memos for runEnd and nextTick, which cuts ask about in increasing
	// order along a line, so that a long line is read once.
	runLo, runHi   int
	tickLo, tickHi int
}

// runEnd returns the end of the run of s[i] starting at i.
func (sp *splitter) runEnd(i int) int {
	s := sp.s
	if i < sp.runLo || i >= sp.runHi || s[i] != s[sp.runLo] {
		j := i + 1
		for j < len(s) && s[j] == s[i] {
			j++
		}
		sp.runLo, sp.runHi = i, j
	}
	return sp.runHi
}

// nextTick returns the first backtick or line break at or after i, or len(s).
func (sp *splitter) nextTick(i int) int {
	s := sp.s
	if i < sp.tickLo || i > sp.tickHi {
		j := i
		for j < len(s) && s[j] != '`' && s[j] != '\n' {
			j++
		}
		sp.tickLo, sp.tickHi = i, j
	}
	return sp.tickHi
}

func newSplitter(s string, l Limit) *splitter {
	sp := &splitter{s: s, unit: l.Unit, max: l.Max, cap: l.Max / 4, tickLo: -1, tickHi: -1}
	// Every entity spends two marker characters, or "](" for a link. Sizing
	// the slice once spares marker-dense text the copies of append's growth;
	// the cap bounds what text full of unpaired markers wastes.
	markers := strings.Count(s, "`") + strings.Count(s, "*") + strings.Count(s, "_") + strings.Count(s, "~") + strings.Count(s, "|")
	sp.nodes = make([]node, 0, min(markers/2+strings.Count(s, "]("), len(s)/8+16))
	r0 := 0
	for _, f := range parseFences(s) {
		sp.fenceStarts = append(sp.fenceStarts, f.start)
		sp.fenceEnds = append(sp.fenceEnds, f.end)
		sp.parseInline(r0, f.start)
		r0 = f.end
		f.prefix = strings.TrimSuffix(s[f.start:f.lineEnd], "\r") + "\n"
		f.suffix = "\n" + s[f.start:f.start+f.run]
		f.prefixLen, f.suffixLen = Length(f.prefix, sp.unit), Length(f.suffix, sp.unit)
		if f.prefixLen <= sp.cap && f.suffixLen <= sp.cap {
			sp.fences = append(sp.fences, f)
		}
	}
	sp.parseInline(r0, len(s))
	sp.linkNodes()
	return sp
}

// linkNodes orders the inline entities, links each to the one around it and
// works out what a cut inside each must add.
func (sp *splitter) linkNodes() {
	slices.SortFunc(sp.nodes, func(a, b node) int {
		if c := cmp.Compare(a.start, b.start); c != 0 {
			return c
		}
		return cmp.Compare(b.end, a.end)
	})
	var stack []int32
	for i := range sp.nodes {
		nd := &sp.nodes[i]
		for len(stack) > 0 && sp.nodes[stack[len(stack)-1]].end <= nd.start {
			stack = stack[:len(stack)-1]
		}
		nd.parent, nd.eff, nd.entUp = -1, -1, -1
		if len(stack) > 0 {
			up := stack[len(stack)-1]
			nd.parent, nd.eff, nd.entUp = up, sp.nodes[up].eff, sp.nodes[up].entSelf
		}
		nd.entSelf = nd.entUp
		var base int32
		var pre, suf head
		if nd.entUp >= 0 {
			up := &sp.nodes[nd.entUp]
			base, pre, suf = up.markup, up.pre, up.suf
		}
		nd.markup = base
		switch {
		case nd.kind == nodeLink:
			nd.eff = int32(i)
		case int(base)+int(nd.mlen) <= sp.cap:
			m := sp.marker(nd)
			nd.eff, nd.entSelf = int32(i), int32(i)
			nd.markup = base + nd.mlen
			nd.pre = pre.add(m)
			nd.suf = (head{}).add(m).addHead(suf)
		}
		stack = append(stack, int32(i))
	}
}

func (sp *splitter) split() []Part {
	s := sp.s
	p := sp.leadingSpace()
	prefix := ""
	var parts []Part
	for p < len(s) {
		c, final := sp.next(p, prefix)
		if final {
			parts = append(parts, Part{Text: prefix + s[p:c.a], Start: p, End: c.a, Prefix: prefix})
			break
		}
		suffix, reopen := sp.markup(c)
		parts = append(parts, Part{Text: prefix + s[p:c.a] + suffix, Start: p, End: c.a, Prefix: prefix, Suffix: suffix})
		p, prefix = c.b, reopen
	}
	return parts
}

// leadingSpace returns where the first part starts: after the text's leading
// whitespace, unless dropping it would make the text start like a fence line
// ("    ```" is not a fence; "```" is).
func (sp *splitter) leadingSpace() int {
	s := sp.s
	b, state := 0, -1
	for b < len(s) {
		cl, _, _, st := uniseg.FirstGraphemeClusterInString(s[b:], state)
		if ws, _ := clusterSpace(cl); !ws {
			break
		}
		b, state = b+len(cl), st
	}
	if b == len(s) || (head{}).add(s[b:min(b+6, len(s))]).like(0) && !sp.isFenceStart(b) {
		return 0
	}
	return b
}

// markup returns what a cut adds: the suffix that closes the part and the
// prefix that reopens the next.
func (sp *splitter) markup(c cand) (suffix, prefix string) {
	if c.fence >= 0 {
		f := &sp.fences[c.fence]
		return f.suffix, f.prefix
	}
	var markers []string
	for e := int32(c.ent); e >= 0; e = sp.nodes[e].entUp {
		markers = append(markers, sp.marker(&sp.nodes[e]))
	}
	suffix = strings.Join(markers, "") // innermost closes first
	slices.Reverse(markers)
	return suffix, strings.Join(markers, "")
}

// marker returns the marker that opens and closes an emphasis or inline code
// node.
func (sp *splitter) marker(nd *node) string { return sp.s[nd.start : nd.start+int(nd.mlen)] }

func (sp *splitter) isFenceStart(b int) bool {
	_, ok := slices.BinarySearch(sp.fenceStarts, b)
	return ok
}

func (sp *splitter) isFenceEnd(a int) bool {
	_, ok := slices.BinarySearch(sp.fenceEnds, a)
	return ok
}

func (sp *splitter) length(s string) int {
	if len(s) == 1 && s[0] < utf8.RuneSelf {
		return 1
	}
	return Length(s, sp.unit)
}

// Boundary tiers, best first (see the package documentation).
const (
	tierPara = iota
	tierLine
	tierFencePara
	tierFenceLine
	tierWord
	tierInlinePara
	tierInlineLine
	tierInlineWord
	tierGrapheme
	tierFenceWord
	tierFenceGrapheme
	tierInlineGrapheme
	tierRune      // inside a grapheme cluster longer than max/2
	tierBlank     // between two whitespace clusters, dropping nothing
	tierDesperate // would make a line look like a fence line
	numTiers
)

// cand is a place to end a part.
type cand struct {
	ok    bool
	a, b  int // the part ends at a, the next starts at b; s[a:b] is dropped whitespace
	n     int // length of s[p:a], the part's own text
	fence int // carried fence the cut is inside, or -1
	ent   int // innermost carried inline entity the cut is inside, or -1
}

type ctxKind uint8

const (
	inBlocked ctxKind = iota // no cut may fall here
	inPlain
	inEmph
	inCode
	inFence
)

// where is the Markdown context of a boundary.
type where struct {
	kind  ctxKind
	fence int
	ent   int
}

var plainWhere = where{kind: inPlain, fence: -1, ent: -1}

// scan looks for the best end of one part.
type scan struct {
	sp     *splitter
	p      int
	budget int // max less the part's prefix
	best   [numTiers]cand

	fi    int   // first carried fence not yet behind the scan
	ni    int   // first node not yet entered
	stack []int // nodes around the scan position, innermost last

	ls       int      // start of the current line
	head     lineHead // the current line so far in this part, markup included
	lineText bool     // whether the current line has had a non-space

	run runState
}

// runState is a run of whitespace that a cut may drop.
type runState struct {
	active bool
	fence  bool // inside a code block: starts at a line break, keeps indentation
	a, n   int
	nl     int // line breaks in the run
	bAt    int // inside a code block: start of the line after the last break
	x      where
	head   lineHead // the line ending at a
}

// cutStats counts the fallback cuts one split made, so tests can see them.
type cutStats struct {
	// lastResorts counts cuts made with nothing but the limit in mind. The
	// rules leave a boundary in every window, so tests expect zero.
	lastResorts int
	// desperate counts cuts that make a line look like a fence line, taken
	// because no other boundary was left.
	desperate int
}

// next scans from p, where a part with the given prefix starts, and returns
// where the part should end. final reports that the rest of the text fits;
// the part then ends at the end of its last non-space.
func (sp *splitter) next(p int, prefix string) (cand, bool) {
	sc := &scan{sp: sp, p: p, budget: sp.max - Length(prefix, sp.unit), ls: p}
	if !strings.HasSuffix(prefix, "\n") {
		sc.head.feedString(prefix)
	}
	sc.seek(p)
	s := sp.s
	n, pos, state := 0, p, -1
	textEnd := len(s)
	// Past window, the part is over budget whatever the unit (a unit is at
	// most 4 bytes), so clusters need not be followed to their end there: a
	// cluster of combining marks as long as the text must not be rescanned
	// for every part. 256 bytes of lookahead always let the cluster at pos,
	// and whether it is whitespace, be told.
	window := p + 4*sc.budget + 64
	var prevWS, prevNL bool
	for pos < len(s) {
		var cl string
		cl, _, _, state = uniseg.FirstGraphemeClusterInString(s[pos:min(len(s), max(window, pos+256))], state)
		ws, nl := clusterSpace(cl)
		if pos > p {
			sc.boundary(pos, n, prevWS, prevNL, ws, nl, len(cl))
		}
		if n > sc.budget && !sc.run.active {
			break
		}
		w := sp.length(cl)
		if w > sp.max/2 && n < sc.budget {
			sc.runes(pos, cl, n)
		}
		n += w
		pos += len(cl)
		switch {
		case nl:
			sc.ls, sc.head, sc.lineText = pos, lineHead{}, false
			if sc.run.active {
				sc.run.nl++
				sc.run.bAt = pos
			}
		default:
			sc.head.feedString(cl)
			if !ws {
				sc.lineText = true
				textEnd = pos
			}
		}
		prevWS, prevNL = ws, nl
	}
	if pos == len(s) {
		if n <= sc.budget {
			return cand{ok: true, a: textEnd, b: len(s)}, true
		}
		if sc.run.active && !sc.run.fence {
			sc.endRun(len(s), plainWhere, true)
		}
	}
	return sc.choose(), false
}

// seek sets up the context pointers for a scan starting at p.
func (sc *scan) seek(p int) {
	sp := sc.sp
	sc.fi = sort.Search(len(sp.fences), func(i int) bool { return sp.fences[i].end > p })
	sc.ni = sort.Search(len(sp.nodes), func(i int) bool { return sp.nodes[i].start >= p })
	// The last node to start before p is inside every node around p, or
	// after them; walk out to the innermost one still open at p.
	k := int32(sc.ni - 1)
	for k >= 0 && sp.nodes[k].end <= p {
		k = sp.nodes[k].parent
	}
	for ; k >= 0; k = sp.nodes[k].parent {
		sc.stack = append(sc.stack, int(k))
	}
	slices.Reverse(sc.stack)
}

// where returns the context of boundary c. Calls must come in increasing c.
func (sc *scan) where(c int) where {
	sp := sc.sp
	s := sp.s
	for sc.fi < len(sp.fences) && sp.fences[sc.fi].end <= c {
		sc.fi++
	}
	for {
		for len(sc.stack) > 0 && sp.nodes[sc.stack[len(sc.stack)-1]].end <= c {
			sc.stack = sc.stack[:len(sc.stack)-1]
		}
		if sc.ni < len(sp.nodes) && sp.nodes[sc.ni].start < c {
			sc.stack = append(sc.stack, sc.ni)
			sc.ni++
			continue
		}
		break
	}
	blocked := where{kind: inBlocked, fence: -1, ent: -1}
	if c < len(s) && s[c-1] == '\\' && isPunct(s[c]) {
		return blocked
	}
	if sc.fi < len(sp.fences) && sp.fences[sc.fi].start < c {
		f := &sp.fences[sc.fi]
		// Not in the opening line, and not so that a part holds an empty
		// block or the next starts with the closing line.
		if c <= f.openEnd || c >= f.lastNL {
			return blocked
		}
		return where{kind: inFence, fence: sc.fi, ent: -1}
	}
	if len(sc.stack) == 0 {
		return plainWhere
	}
	e := int(sp.nodes[sc.stack[len(sc.stack)-1]].eff)
	if e < 0 {
		return plainWhere
	}
	nd := &sp.nodes[e]
	// Never inside a marker, and never so that a part holds an empty entity.
	if nd.kind == nodeLink || c <= nd.start+int(nd.mlen) || c >= nd.end-int(nd.mlen) {
		return blocked
	}
	if nd.kind == nodeCode {
		return where{kind: inCode, fence: -1, ent: e}
	}
	return where{kind: inEmph, fence: -1, ent: e}
}

// boundary weighs the boundary c between the cluster before it and the one
// after it, nextLen bytes long; n is the length of s[p:c].
func (sc *scan) boundary(c, n int, prevWS, prevNL, nextWS, nextNL bool, nextLen int) {
	x := sc.where(c)
	if sc.run.active {
		if !nextWS {
			sc.endRun(c, x, false)
		}
		return
	}
	if n > sc.budget {
		return
	}
	switch x.kind {
	case inPlain, inEmph:
		switch {
		case nextWS && !prevWS:
			sc.startRun(c, n, x, false)
		case !nextWS && !prevWS:
			t := tierGrapheme
			if x.kind == inEmph {
				t = tierInlineGrapheme
			}
			sc.offerInline(t, c, c, n, x, sc.head, false)
		case nextWS && prevWS:
			sc.offerInline(tierBlank, c, c, n, x, sc.head, false)
		}
	case inCode:
		// Inline code is literal: only a line break, which renders as a
		// space, is dropped; a part must not end or start with the break,
		// where the reopened marker would stand alone on its line.
		nd := &sc.sp.nodes[x.ent]
		switch {
		case nextNL:
			if c+nextLen < nd.end-int(nd.mlen) {
				sc.offerInline(tierInlineLine, c, c+nextLen, n, x, sc.head, false)
			}
		case prevNL:
		case prevWS && !nextWS:
			sc.offerInline(tierInlineWord, c, c, n, x, sc.head, false)
		default:
			sc.offerInline(tierInlineGrapheme, c, c, n, x, sc.head, false)
		}
	case inFence:
		switch {
		case !sc.lineText:
			// At a line's start or in its indentation.
		case nextNL:
			sc.startRun(c, n, x, true)
		case prevWS && !nextWS:
			sc.offerFence(tierFenceWord, c, n, x)
		default:
			sc.offerFence(tierFenceGrapheme, c, n, x)
		}
	}
}

// runes weighs the rune boundaries inside cl, a grapheme cluster at pos too
// long to fit in a part with its markup.
func (sc *scan) runes(pos int, cl string, n int) {
	m, prev, h := n, 0, sc.head
	for i := range cl {
		if i == 0 {
			continue
		}
		m += Length(cl[prev:i], sc.sp.unit)
		h.feedString(cl[prev:i])
		prev = i
		if m > sc.budget {
			return
		}
		switch x := sc.where(pos + i); x.kind {
		case inBlocked:
		case inFence:
			sc.offerFence(tierRune, pos+i, m, x)
		default:
			sc.offerInline(tierRune, pos+i, pos+i, m, x, h, false)
		}
	}
}

func (sc *scan) startRun(c, n int, x where, fenced bool) {
	sc.run = runState{active: true, fence: fenced, a: c, n: n, bAt: c, x: x, head: sc.head}
}

// endRun offers the whitespace run that ends at b, whose context is x.
func (sc *scan) endRun(b int, x where, final bool) {
	r := sc.run
	sc.run.active = false
	if r.fence {
		// x is blocked when the next non-blank line closes the block.
		if x.kind != inFence || x.fence != r.x.fence {
			return
		}
		t := tierFenceLine
		if r.nl >= 2 {
			t = tierFencePara
		}
		sc.put(t, r.a, r.bAt, r.n, r.x)
		return
	}
	if x.kind != r.x.kind || x.ent != r.x.ent {
		return
	}
	para, line, word := tierPara, tierLine, tierWord
	if r.x.kind == inEmph {
		para, line, word = tierInlinePara, tierInlineLine, tierInlineWord
	}
	t := word
	switch {
	case r.nl >= 2:
		t = para
	case r.nl == 1:
		t = line
	}
	sc.offerInline(t, r.a, b, r.n, r.x, r.head, final)
}

// offerInline offers a cut outside code blocks. h is the part's last line
// up to a; final means nothing follows b.
func (sc *scan) offerInline(t, a, b, n int, x where, h lineHead, final bool) {
	if a <= sc.p || !sc.fits(n, x) {
		return
	}
	if !sc.endOK(a, x, h) || !final && !sc.startOK(b, x) {
		t = tierDesperate
	}
	sc.put(t, a, b, n, x)
}

// endOK reports whether the part's last line, closed by the cut's markup,
// would open a fenced block only where the original has one.
func (sc *scan) endOK(a int, x where, h lineHead) bool {
	if x.kind == inEmph || x.kind == inCode {
		// A code marker, the only one with backticks, is innermost, so it
		// leads the suffix and its head tells all (see lineHead).
		suf := sc.sp.nodes[x.ent].suf
		h.feedBytes(suf.b[:suf.n])
	}
	return !h.fence() || x.kind == inPlain && sc.sp.isFenceEnd(a)
}

// startOK reports whether the next part's first line, after the reopened
// markup, would open a fenced block only where the original has one.
func (sc *scan) startOK(b int, x where) bool {
	var h lineHead
	if x.kind == inEmph || x.kind == inCode {
		pre := sc.sp.nodes[x.ent].pre
		h.feedBytes(pre.b[:pre.n])
	}
	s := sc.sp.s
	for i := b; i < len(s) && s[i] != '\n' && !h.decided(); {
		switch {
		case h.st == headRun && s[i] == h.ch:
			j := sc.sp.runEnd(i)
			h.run += j - i
			i = j
		case h.st == headAfter:
			if k := sc.sp.nextTick(i); k < len(s) && s[k] == '`' {
				h.st = headPlain
			}
			i = len(s)
		default:
			h.feed(s[i])
			i++
		}
	}
	return !h.fence() || x.kind == inPlain && sc.sp.isFenceStart(b)
}

// offerFence offers a cut inside a line of a code block. Neither the
// shortened line ending the part nor the rest starting the next may look
// like the block's closing line.
func (sc *scan) offerFence(t, c, n int, x where) {
	if c <= sc.p || !sc.fits(n, x) {
		return
	}
	s := sc.sp.s
	ch := sc.sp.fences[x.fence].char
	if (head{}).add(s[sc.ls:min(c, sc.ls+6)]).like(ch) || (head{}).add(s[c:min(c+6, len(s))]).like(ch) {
		t = tierDesperate
	}
	sc.put(t, c, c, n, x)
}

func (sc *scan) fits(n int, x where) bool {
	switch x.kind {
	case inFence:
		n += sc.sp.fences[x.fence].suffixLen
	case inEmph, inCode:
		n += int(sc.sp.nodes[x.ent].markup)
	}
	return n <= sc.budget
}

func (sc *scan) put(t, a, b, n int, x where) {
	if a <= sc.p || !sc.fits(n, x) || sc.best[t].ok && sc.best[t].a > a {
		return
	}
	c := cand{ok: true, a: a, b: b, n: n, fence: -1, ent: -1}
	switch x.kind {
	case inFence:
		c.fence = x.fence
	case inEmph, inCode:
		c.ent = x.ent
	}
	sc.best[t] = c
}

// choose takes the best tier whose cut fills at least half the part, or
// failing that the best tier with any cut. A desperate cut is taken only
// when there is no other.
func (sc *scan) choose() cand {
	for _, c := range sc.best[:tierDesperate] {
		if c.ok && c.n >= sc.budget/2 {
			return c
		}
	}
	for t, c := range sc.best {
		if c.ok {
			if t == tierDesperate {
				sc.sp.stats.desperate++
			}
			return c
		}
	}
	return sc.lastResort()
}

// lastResort cuts at the last rune boundary that fits, adding no markup.
func (sc *scan) lastResort() cand {
	sc.sp.stats.lastResorts++
	s := sc.sp.s
	a, n := sc.p, 0
	for i, r := range s[sc.p:] {
		size := utf8.RuneLen(r)
		if r == utf8.RuneError {
			_, size = utf8.DecodeRuneInString(s[sc.p+i:])
		}
		w := Length(s[sc.p+i:sc.p+i+size], sc.sp.unit)
		if n+w > sc.budget && a > sc.p {
			break
		}
		a, n = sc.p+i+size, n+w
	}
	return cand{ok: true, a: a, b: a, n: n, fence: -1, ent: -1}
}
