package nostr

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// This file holds the low-level JSON lexer shared by the event, filter and
// envelope parsers: whitespace, strings (validation and unescaping), integers,
// hex fields, and skipping of values the parsers do not interpret.
//
// String handling rules (NIP-01 plus RFC 8259):
//   - strings must be valid UTF-8; raw bytes < 0x20 are refused;
//   - escapes are \" \\ \/ \b \f \n \r \t and \uXXXX (either hex case);
//   - \u0000 is accepted and decodes to a NUL byte;
//   - a \u escape of a UTF-16 surrogate must be a high surrogate
//     (D800-DBFF) immediately followed by a \u escape of a low surrogate
//     (DC00-DFFF); the pair decodes to one code point. A lone surrogate is
//     refused: it has no UTF-8 form, so the event's canonical serialization
//     (and therefore its id) would depend on the implementation.

// maxNesting bounds the depth of nested arrays and objects inside values the
// parser skips (unknown keys), so a hostile message cannot exhaust the stack.
const maxNesting = 64

// maxUnknownKeys bounds the unknown keys of one event or filter object: they
// are checked for duplicates by comparison with each other, so their number
// must stay small.
const maxUnknownKeys = 64

// maxInput is the largest input the parser accepts: offsets are kept as
// uint32.
const maxInput = math.MaxUint32 / 2

// span locates a decoded string: bytes [off, off+n) of the source when dec is
// false, or of the parser's decode buffer when dec is true.
type span struct {
	off uint32
	n   uint32
	dec bool
}

// limits is Limits resolved so that "no limit" is a large number.
type limits struct {
	filters, filterValues, tags, tagElems, subIDLen, content int
}

func resolveLimits(l *Limits) limits {
	r := limits{math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt, math.MaxInt}
	if l == nil {
		return r
	}
	set := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	set(&r.filters, l.MaxFilters)
	set(&r.filterValues, l.MaxFilterValues)
	set(&r.tags, l.MaxTags)
	set(&r.tagElems, l.MaxTagElems)
	set(&r.subIDLen, l.MaxSubIDLen)
	set(&r.content, l.MaxContentBytes)
	return r
}

// parser is the state of one parse. It is pooled: its scratch slices are
// reused between parses, and nothing the caller receives points into them.
type parser struct {
	d   []byte // the input
	i   int    // read position in d
	lim limits

	dec  []byte // decoded (unescaped) string values
	kbuf []byte // decoded object keys

	// context reported in a ParseError
	typ        MsgType
	subID      span
	hasSubID   bool
	eventID    ID
	hasEventID bool

	ev eventState

	// filters being parsed (see codec_filter.go)
	filters []filterState
	ids     []ID
	authors []PubKey
	kinds   []int
	tagf    []tagState
	strs    []span

	// strictKeys refuses unknown filter keys (ParseFilterStrict).
	strictKeys bool
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

func getParser(data []byte, lim *Limits) *parser {
	p := parserPool.Get().(*parser)
	p.d = data
	p.i = 0
	p.lim = resolveLimits(lim)
	p.strictKeys = false
	p.dec = p.dec[:0]
	p.kbuf = p.kbuf[:0]
	p.typ = MsgUnknown
	p.hasSubID = false
	p.hasEventID = false
	p.filters = p.filters[:0]
	p.ids = p.ids[:0]
	p.authors = p.authors[:0]
	p.kinds = p.kinds[:0]
	p.tagf = p.tagf[:0]
	p.strs = p.strs[:0]
	p.ev.elems = p.ev.elems[:0]
	p.ev.tagEnds = p.ev.tagEnds[:0]
	p.ev.unknownKeys = p.ev.unknownKeys[:0]
	return p
}

// putParser returns p to the pool, dropping scratch buffers that grew large
// so that one huge message does not pin memory forever.
func putParser(p *parser) {
	const maxKeep = 1 << 16
	p.d = nil
	if cap(p.dec) > 1<<20 {
		p.dec = nil
	}
	if cap(p.kbuf) > 1<<12 {
		p.kbuf = nil
	}
	if cap(p.ev.elems) > maxKeep {
		p.ev.elems = nil
	}
	if cap(p.ev.tagEnds) > maxKeep {
		p.ev.tagEnds = nil
	}
	if cap(p.ev.unknownKeys) > 64 {
		p.ev.unknownKeys = nil
	}
	clear(p.ev.unknownKeys[:cap(p.ev.unknownKeys)])
	if cap(p.filters) > 1024 {
		p.filters = nil
	}
	clear(p.filters[:cap(p.filters)]) // drop references (Search spans hold none, but Filter may)
	if cap(p.ids) > maxKeep {
		p.ids = nil
	}
	if cap(p.authors) > maxKeep {
		p.authors = nil
	}
	if cap(p.kinds) > maxKeep {
		p.kinds = nil
	}
	if cap(p.tagf) > maxKeep {
		p.tagf = nil
	}
	if cap(p.strs) > maxKeep {
		p.strs = nil
	}
	parserPool.Put(p)
}

// ---- errors ----

// fail builds a ParseError carrying the context read so far.
func (p *parser) fail(msg string) *ParseError {
	e := &ParseError{Msg: msg, Type: p.typ, EventID: p.eventID, HasEventID: p.hasEventID}
	if p.hasSubID {
		e.SubID = string(p.bytes(p.subID))
	}
	return e
}

// failf is fail with formatting.
func (p *parser) failf(format string, args ...any) *ParseError {
	return p.fail(fmt.Sprintf(format, args...))
}

// limitf builds a ParseError for the exceeded bound b.
func (p *parser) limitf(b Bound, format string, args ...any) *ParseError {
	e := p.failf(format, args...)
	e.Bound = b
	return e
}

// syntax reports malformed JSON at the current position.
func (p *parser) syntax(what string) *ParseError {
	if p.i >= len(p.d) {
		return p.failf("invalid JSON: unexpected end of input, expected %s", what)
	}
	return p.failf("invalid JSON at byte %d: expected %s, found %s", p.i, what, quoteByte(p.d[p.i]))
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// quoteShort quotes s for an error message, truncated to a few dozen bytes.
func quoteShort(b []byte) string {
	const max = 32
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}

// ---- tokens ----

// ws skips JSON whitespace.
func (p *parser) ws() {
	for p.i < len(p.d) {
		switch p.d[p.i] {
		case ' ', '\n', '\r', '\t':
			p.i++
		default:
			return
		}
	}
}

// peek returns the byte at the read position, or 0 at the end of input.
func (p *parser) peek() byte {
	if p.i < len(p.d) {
		return p.d[p.i]
	}
	return 0
}

// expect consumes c (after whitespace) or fails.
func (p *parser) expect(c byte) *ParseError {
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == c {
		p.i++
		return nil
	}
	return p.syntax(strconv.QuoteRune(rune(c)))
}

// end checks that only whitespace remains.
func (p *parser) end() *ParseError {
	p.ws()
	if p.i != len(p.d) {
		return p.failf("invalid JSON: trailing data at byte %d", p.i)
	}
	return nil
}

// next consumes whitespace and then either ',' (returning true: another
// element follows) or the closing byte (returning false).
func (p *parser) next(closing byte) (bool, *ParseError) {
	p.ws()
	if p.i < len(p.d) {
		switch p.d[p.i] {
		case ',':
			p.i++
			p.ws()
			return true, nil
		case closing:
			p.i++
			return false, nil
		}
	}
	return false, p.syntax("',' or " + strconv.QuoteRune(rune(closing)))
}

// ---- strings ----

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plain8 reports whether none of the 8 bytes of w (little-endian load) needs
// attention inside a JSON string: no control byte, quote, backslash or
// non-ASCII byte.
func plain8(w uint64) bool {
	ctl := (w - 0x20*lsb) &^ w
	q := w ^ ('"' * lsb)
	q = (q - lsb) &^ q
	bs := w ^ ('\\' * lsb)
	bs = (bs - lsb) &^ bs
	return (ctl|q|bs|w)&msb == 0
}

func load8(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// lexString validates the JSON string whose opening quote is at p.i. It
// leaves p.i after the closing quote and returns the bounds of the raw
// contents (between the quotes) and whether they contain escapes.
func (p *parser) lexString() (start, end int, esc bool, err *ParseError) {
	d := p.d
	i := p.i + 1
	start = i
	for {
		for i+8 <= len(d) && plain8(load8(d, i)) {
			i += 8
		}
		if i >= len(d) {
			p.i = i
			return 0, 0, false, p.fail("invalid JSON: unterminated string")
		}
		c := d[i]
		switch {
		case c == '"':
			p.i = i + 1
			return start, i, esc, nil
		case c == '\\':
			esc = true
			n, msg := checkEscape(d, i)
			if msg != "" {
				p.i = i
				return 0, 0, false, p.failf("invalid string at byte %d: %s", i, msg)
			}
			i += n
		case c < 0x20:
			p.i = i
			return 0, 0, false, p.failf("invalid string at byte %d: raw control character 0x%02x (must be escaped)", i, c)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size <= 1 {
				p.i = i
				return 0, 0, false, p.failf("invalid string at byte %d: invalid UTF-8", i)
			}
			i += size
		}
	}
}

// checkEscape validates the escape sequence starting with the backslash at
// d[i] and returns its length, or an error message.
func checkEscape(d []byte, i int) (int, string) {
	if i+1 >= len(d) {
		return 0, "unterminated escape"
	}
	switch d[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, ""
	case 'u':
		r, ok := hex4(d, i+2)
		if !ok {
			return 0, `bad \u escape`
		}
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, `lone low surrogate in \u escape`
		case r >= 0xD800 && r <= 0xDBFF:
			if i+11 < len(d) && d[i+6] == '\\' && d[i+7] == 'u' {
				if r2, ok := hex4(d, i+8); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
					return 12, ""
				}
			}
			return 0, `lone high surrogate in \u escape`
		}
		return 6, ""
	}
	return 0, "bad escape " + quoteByte(d[i+1])
}

// hex4 decodes the four hex digits (either case) at d[i:].
func hex4(d []byte, i int) (rune, bool) {
	if i+4 > len(d) {
		return 0, false
	}
	var r rune
	for _, c := range d[i : i+4] {
		v := unhex[c]
		if v == 0xff {
			v = unhexUpper(c)
			if v == 0xff {
				return 0, false
			}
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func unhexUpper(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c - 'A' + 10
	}
	return 0xff
}

// unescape appends the decoded form of the raw string contents s (already
// validated by lexString) to dst.
func unescape(dst, s []byte) []byte {
	for {
		j := bytes.IndexByte(s, '\\')
		if j < 0 {
			return append(dst, s...)
		}
		dst = append(dst, s[:j]...)
		s = s[j:]
		switch s[1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(s, 2)
			if r >= 0xD800 && r <= 0xDBFF {
				r2, _ := hex4(s, 8)
				r = 0x10000 + (r-0xD800)<<10 + (r2 - 0xDC00)
				s = s[6:]
			}
			dst = utf8.AppendRune(dst, r)
			s = s[6:]
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[1])
		}
		s = s[2:]
	}
}

// str reads a JSON string value at p.i (the caller has checked the quote)
// and returns its span; escaped strings are decoded into p.dec.
func (p *parser) str() (span, *ParseError) {
	start, end, esc, err := p.lexString()
	if err != nil {
		return span{}, err
	}
	if !esc {
		return span{off: uint32(start), n: uint32(end - start)}, nil
	}
	off := len(p.dec)
	p.dec = unescape(p.dec, p.d[start:end])
	return span{off: uint32(off), n: uint32(len(p.dec) - off), dec: true}, nil
}

// bytes returns the bytes a span refers to (valid until the next parse).
func (p *parser) bytes(s span) []byte {
	if s.dec {
		return p.dec[s.off : s.off+s.n]
	}
	return p.d[s.off : s.off+s.n]
}

// key reads an object key at p.i and the ':' after it. The returned bytes
// are valid until the next call of key.
func (p *parser) key() ([]byte, *ParseError) {
	if p.peek() != '"' {
		return nil, p.syntax("string (object key)")
	}
	start, end, esc, err := p.lexString()
	if err != nil {
		return nil, err
	}
	k := p.d[start:end]
	if esc {
		p.kbuf = unescape(p.kbuf[:0], k)
		k = p.kbuf
	}
	if err := p.expect(':'); err != nil {
		return nil, err
	}
	p.ws()
	return k, nil
}

// ---- numbers ----

// uintVal reads a JSON integer in [0, max] with no sign, fraction, exponent
// or leading zeros. what names the field in error messages.
func (p *parser) uintVal(max uint64, what string) (uint64, *ParseError) {
	d := p.d
	i := p.i
	if i >= len(d) || d[i] < '0' || d[i] > '9' {
		if i < len(d) && d[i] == '-' {
			return 0, p.failf("%s must not be negative", what)
		}
		return 0, p.failf("%s must be an integer", what)
	}
	var v uint64
	if d[i] == '0' {
		i++
		if i < len(d) && d[i] >= '0' && d[i] <= '9' {
			return 0, p.failf("%s must not have leading zeros", what)
		}
	} else {
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			dv := uint64(d[i] - '0')
			if dv > max || v > (max-dv)/10 {
				return 0, p.failf("%s must be at most %d", what, max)
			}
			v = v*10 + dv
			i++
		}
	}
	if i < len(d) && (d[i] == '.' || d[i] == 'e' || d[i] == 'E') {
		return 0, p.failf("%s must be an integer (no fraction or exponent)", what)
	}
	p.i = i
	return v, nil
}

// skipNumber validates any JSON number at p.i.
func (p *parser) skipNumber() *ParseError {
	d := p.d
	i := p.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() bool {
		s := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > s
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		digits()
	default:
		p.i = i
		return p.syntax("digit")
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			p.i = i
			return p.syntax("digit")
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			p.i = i
			return p.syntax("digit")
		}
	}
	p.i = i
	return nil
}

// literal consumes the literal word (true, false, null) at p.i.
func (p *parser) literal(word string) bool {
	if len(p.d)-p.i >= len(word) && string(p.d[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return true
	}
	return false
}

// boolVal reads true or false.
func (p *parser) boolVal(what string) (bool, *ParseError) {
	switch {
	case p.literal("true"):
		return true, nil
	case p.literal("false"):
		return false, nil
	}
	return false, p.failf("%s must be a boolean", what)
}

// skipValue validates and skips any JSON value at p.i.
func (p *parser) skipValue(depth int) *ParseError {
	if depth > maxNesting {
		return p.fail("invalid JSON: nesting too deep")
	}
	switch c := p.peek(); c {
	case '"':
		_, _, _, err := p.lexString()
		return err
	case '{':
		p.i++
		p.ws()
		if p.peek() == '}' {
			p.i++
			return nil
		}
		for {
			if p.peek() != '"' {
				return p.syntax("string (object key)")
			}
			if _, _, _, err := p.lexString(); err != nil {
				return err
			}
			if err := p.expect(':'); err != nil {
				return err
			}
			p.ws()
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			more, err := p.next('}')
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
	case '[':
		p.i++
		p.ws()
		if p.peek() == ']' {
			p.i++
			return nil
		}
		for {
			if err := p.skipValue(depth + 1); err != nil {
				return err
			}
			more, err := p.next(']')
			if err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
	case 't':
		if p.literal("true") {
			return nil
		}
	case 'f':
		if p.literal("false") {
			return nil
		}
	case 'n':
		if p.literal("null") {
			return nil
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return p.skipNumber()
		}
	}
	return p.syntax("value")
}

// ---- hex ----

// unhex maps a lowercase hex digit to its value and everything else to 0xff.
var unhex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c-'a') + 10
	}
	return t
}()

// decodeHexLower decodes lowercase hex src into dst (len(src) ==
// 2*len(dst)) and reports whether src was valid. dst may be partly written
// when it was not. (A SWAR version measured no faster than this table.)
func decodeHexLower(dst, src []byte) bool {
	_ = src[2*len(dst)-1]
	bad := byte(0)
	for i := range dst {
		hi, lo := unhex[src[2*i]], unhex[src[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo&0x0f
	}
	return bad&0xf0 == 0
}

// hexField reads a JSON string holding exactly 2*len(dst) lowercase hex
// characters into dst.
func (p *parser) hexField(dst []byte, what string) *ParseError {
	d := p.d
	n := 2 * len(dst)
	if p.peek() != '"' {
		return p.failf("%s must be a string", what)
	}
	// Fast path: the common, unescaped form.
	if p.i+n+1 < len(d) && d[p.i+n+1] == '"' && decodeHexLower(dst, d[p.i+1:p.i+1+n]) {
		p.i += n + 2
		return nil
	}
	s, err := p.str()
	if err != nil {
		return err
	}
	b := p.bytes(s)
	if len(b) != n || !decodeHexLower(dst, b) {
		return p.failf("%s must be %d lowercase hex characters", what, n)
	}
	return nil
}

// hexBytes reads a JSON string of hex (either case, even length) and returns
// the decoded bytes in a new slice.
func (p *parser) hexBytes(what string) ([]byte, *ParseError) {
	if p.peek() != '"' {
		return nil, p.failf("%s must be a hex string", what)
	}
	s, err := p.str()
	if err != nil {
		return nil, err
	}
	b := p.bytes(s)
	if len(b)%2 != 0 {
		return nil, p.failf("%s must be hex of even length", what)
	}
	out := make([]byte, len(b)/2)
	for i := range out {
		hi, lo := hexDigit(b[2*i]), hexDigit(b[2*i+1])
		if hi|lo > 0x0f {
			return nil, p.failf("%s must be hex", what)
		}
		out[i] = hi<<4 | lo
	}
	return out, nil
}

func hexDigit(c byte) byte {
	if v := unhex[c]; v != 0xff {
		return v
	}
	return unhexUpper(c)
}
