package nostr

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/petrel-relay/petrel/internal/suggest"
)

// This file parses NIP-01 filters, standalone (ParseFilter) and inside REQ,
// COUNT and NEG-OPEN messages, and writes them (AppendFilter).

// filterState is one filter being parsed: scalar fields are set in f, lists
// are ranges of the parser's shared scratch slices.
type filterState struct {
	f                Filter
	idsLo, idsHi     int
	authLo, authHi   int
	kindsLo, kindsHi int
	tagLo, tagHi     int
	search           span
	hasSearch        bool
	seenKeys         uint8
	seenTags         uint64
}

// tagState is one "#x" list: values are p.strs[lo:hi].
type tagState struct {
	name   byte
	lo, hi int
}

// Bits of filterState.seenKeys.
const (
	fkIDs = 1 << iota
	fkAuthors
	fkKinds
	fkSince
	fkUntil
	fkLimit
	fkSearch
)

// ParseFilter parses one filter object. lim may be nil (no limits).
//
// Keys: "ids" and "authors" hold 64-character lowercase hex strings (NIP-01
// no longer allows prefixes); "kinds" integers in [0, MaxKind]; "#x", with x
// one ASCII letter, strings (not checked as hex, even for #e and #p);
// "since", "until" and "limit" integers in [0, MaxTimestamp]; "search" a
// string. Present gets a bit for each of ids, authors and kinds that
// appears, even empty. Tags come out sorted by name.
//
// Refused, with a *ParseError: wrong types, a key given twice (also when
// spelled with \u escapes), a key starting with '#' that is not '#' and one
// letter (ignoring it would widen the filter), a list with more than
// lim.MaxFilterValues values (counted while reading; Bound is
// BoundFilterValues), strings breaking the ParseEvent string rules, and
// anything after the object but whitespace. Other unknown keys are skipped (at most 64 per filter); their
// values must be valid JSON.
//
// Strings in the result point into one private allocation, never into data.
func ParseFilter(data []byte, lim *Limits) (Filter, error) { return parseOneFilter(data, lim, false) }

// ParseFilterStrict is ParseFilter for people's input (the operator tools):
// an unknown key is an error instead of being skipped, so that a typo such
// as "kind" for "kinds" cannot widen the filter to every event. The relay
// keeps ParseFilter's leniency towards clients.
func ParseFilterStrict(data []byte, lim *Limits) (Filter, error) {
	return parseOneFilter(data, lim, true)
}

// parseOneFilter is ParseFilter, refusing unknown keys when strict.
func parseOneFilter(data []byte, lim *Limits, strict bool) (Filter, error) {
	if len(data) > maxInput {
		return Filter{}, &ParseError{Msg: "filter too large", Bound: BoundFilterBytes}
	}
	p := getParser(data, lim)
	defer putParser(p)
	p.strictKeys = strict
	p.ws()
	if err := p.filter(); err != nil {
		return Filter{}, err
	}
	if err := p.end(); err != nil {
		return Filter{}, err
	}
	var out [1]Filter
	p.finishFilters(out[:], nil)
	return out[0], nil
}

// filterKeys are the keys a filter may hold besides "#x" tag conditions.
var filterKeys = []string{"ids", "authors", "kinds", "since", "until", "limit", "search"}

// unknownFilterKey is the error of an unknown key in a strict filter,
// naming the key it probably meant.
func (p *parser) unknownFilterKey(k []byte) *ParseError {
	if best := suggest.Closest(strings.ToLower(string(k)), filterKeys, 2); best != "" {
		return p.failf("unknown filter key %s (did you mean %q?)", quoteShort(k), best)
	}
	return p.failf("unknown filter key %s (filters take ids, authors, kinds, since, until, limit, search and #x tags)", quoteShort(k))
}

// filter reads one filter object at p.i and appends it to p.filters.
func (p *parser) filter() *ParseError {
	if p.peek() != '{' {
		return p.fail("filter must be a JSON object")
	}
	p.i++
	p.filters = append(p.filters, filterState{})
	fs := &p.filters[len(p.filters)-1]
	fs.idsLo, fs.idsHi = len(p.ids), len(p.ids)
	fs.authLo, fs.authHi = len(p.authors), len(p.authors)
	fs.kindsLo, fs.kindsHi = len(p.kinds), len(p.kinds)
	fs.tagLo, fs.tagHi = len(p.tagf), len(p.tagf)
	p.ws()
	if p.peek() == '}' {
		p.i++
		return nil
	}
	var unknown []string
	for {
		k, err := p.key()
		if err != nil {
			return err
		}
		if err := p.filterMember(fs, k, &unknown); err != nil {
			return err
		}
		more, err := p.next('}')
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	fs.idsHi, fs.authHi, fs.kindsHi, fs.tagHi = len(p.ids), len(p.authors), len(p.kinds), len(p.tagf)
	// Sort the tag lists by name (insertion sort: there are at most 52).
	t := p.tagf[fs.tagLo:fs.tagHi]
	for i := 1; i < len(t); i++ {
		for j := i; j > 0 && t[j].name < t[j-1].name; j-- {
			t[j], t[j-1] = t[j-1], t[j]
		}
	}
	for i := 1; i < len(t); i++ {
		if t[i].name == t[i-1].name {
			return p.failf("duplicate key \"#%c\"", t[i].name)
		}
	}
	return nil
}

// filterMember reads the value of key k into fs.
func (p *parser) filterMember(fs *filterState, k []byte, unknown *[]string) *ParseError {
	var bit uint8
	switch string(k) {
	case "ids":
		bit = fkIDs
	case "authors":
		bit = fkAuthors
	case "kinds":
		bit = fkKinds
	case "since":
		bit = fkSince
	case "until":
		bit = fkUntil
	case "limit":
		bit = fkLimit
	case "search":
		bit = fkSearch
	default:
		if len(k) > 0 && k[0] == '#' {
			if len(k) != 2 || !isASCIILetter(k[1]) {
				return p.failf("unsupported tag filter %s: tag filters are # and one letter a-z or A-Z", quoteShort(k))
			}
			m := uint64(1) << letterBit(k[1])
			if fs.seenTags&m != 0 {
				return p.failf("duplicate key %q", k)
			}
			fs.seenTags |= m
			return p.tagFilter(k[1])
		}
		if p.strictKeys {
			return p.unknownFilterKey(k)
		}
		for _, u := range *unknown {
			if u == string(k) {
				return p.failf("duplicate key %s", quoteShort(k))
			}
		}
		if len(*unknown) >= maxUnknownKeys {
			return p.failf("too many unknown keys (max %d)", maxUnknownKeys)
		}
		*unknown = append(*unknown, string(k))
		return p.skipValue(0)
	}
	if fs.seenKeys&bit != 0 {
		return p.failf("duplicate key %q", k)
	}
	fs.seenKeys |= bit
	f := &fs.f
	switch bit {
	case fkIDs:
		f.Present |= PresentIDs
		return p.hexList("ids", func() *ParseError {
			p.ids = append(p.ids, ID{})
			return p.hexField(p.ids[len(p.ids)-1][:], "ids value")
		})
	case fkAuthors:
		f.Present |= PresentAuthors
		return p.hexList("authors", func() *ParseError {
			p.authors = append(p.authors, PubKey{})
			return p.hexField(p.authors[len(p.authors)-1][:], "authors value")
		})
	case fkKinds:
		f.Present |= PresentKinds
		return p.hexList("kinds", func() *ParseError {
			v, err := p.uintVal(MaxKind, "kinds value")
			if err != nil {
				return err
			}
			p.kinds = append(p.kinds, int(v))
			return nil
		})
	case fkSince:
		v, err := p.uintVal(MaxTimestamp, "since")
		f.Since, f.HasSince = int64(v), true
		return err
	case fkUntil:
		v, err := p.uintVal(MaxTimestamp, "until")
		f.Until, f.HasUntil = int64(v), true
		return err
	case fkLimit:
		v, err := p.uintVal(MaxTimestamp, "limit")
		f.Limit, f.HasLimit = int(v), true
		return err
	case fkSearch:
		if p.peek() != '"' {
			return p.fail("search must be a string")
		}
		s, err := p.str()
		fs.search, fs.hasSearch = s, true
		return err
	}
	return nil
}

// hexList reads a JSON array calling elem for each value, counting values
// against Limits.MaxFilterValues. (It is used for every list, not only hex.)
func (p *parser) hexList(what string, elem func() *ParseError) *ParseError {
	return p.list(what, 0, elem)
}

// list is hexList for a list named what, or "#"+tag when tag is not 0 (the
// name is only built for an error).
func (p *parser) list(what string, tag byte, elem func() *ParseError) *ParseError {
	name := func() string {
		if tag != 0 {
			return "#" + string(rune(tag))
		}
		return what
	}
	if p.peek() != '[' {
		return p.failf("%s must be an array", name())
	}
	p.i++
	p.ws()
	if p.peek() == ']' {
		p.i++
		return nil
	}
	for n := 0; ; n++ {
		if n >= p.lim.filterValues {
			return p.limitf(BoundFilterValues, "too many values in %s (max %d)", name(), p.lim.filterValues)
		}
		if err := elem(); err != nil {
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
}

// tagFilter reads the value list of "#name".
func (p *parser) tagFilter(name byte) *ParseError {
	lo := len(p.strs)
	err := p.list("", name, func() *ParseError {
		if p.peek() != '"' {
			return p.failf("#%c values must be strings", name)
		}
		s, err := p.str()
		if err != nil {
			return err
		}
		p.strs = append(p.strs, s)
		return nil
	})
	if err != nil {
		return err
	}
	p.tagf = append(p.tagf, tagState{name: name, lo: lo, hi: len(p.strs)})
	return nil
}

func isASCIILetter(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

func letterBit(c byte) uint {
	if c >= 'a' {
		return uint(c-'a') + 26
	}
	return uint(c - 'A')
}

// finishFilters builds the parsed filters into out (len(out) ==
// len(p.filters)). All lists of all filters share one allocation per
// element type, and all strings (plus extra, returned as a string) share one
// byte allocation.
func (p *parser) finishFilters(out []Filter, extra []byte) string {
	var ids []ID
	var authors []PubKey
	var kinds []int
	var tagf []TagFilter
	var vals []string
	if len(p.ids) > 0 {
		ids = make([]ID, len(p.ids))
		copy(ids, p.ids)
	}
	if len(p.authors) > 0 {
		authors = make([]PubKey, len(p.authors))
		copy(authors, p.authors)
	}
	if len(p.kinds) > 0 {
		kinds = make([]int, len(p.kinds))
		copy(kinds, p.kinds)
	}
	if len(p.tagf) > 0 {
		tagf = make([]TagFilter, len(p.tagf))
	}
	if len(p.strs) > 0 {
		vals = make([]string, len(p.strs))
	}

	// One byte arena for every string.
	size := len(extra)
	for _, s := range p.strs {
		size += int(s.n)
	}
	for i := range p.filters {
		size += int(p.filters[i].search.n)
	}
	var arena []byte
	if size > 0 {
		arena = make([]byte, 0, size)
	}
	str := func(b []byte) string {
		if len(b) == 0 {
			return ""
		}
		off := len(arena)
		arena = append(arena, b...)
		return unsafe.String(&arena[off], len(b))
	}
	for i, s := range p.strs {
		vals[i] = str(p.bytes(s))
	}
	for i, t := range p.tagf {
		tagf[i].Name = t.name
		if t.hi > t.lo {
			tagf[i].Values = vals[t.lo:t.hi:t.hi]
		}
	}
	for i := range p.filters {
		fs := &p.filters[i]
		f := fs.f
		if fs.idsHi > fs.idsLo {
			f.IDs = ids[fs.idsLo:fs.idsHi:fs.idsHi]
		}
		if fs.authHi > fs.authLo {
			f.Authors = authors[fs.authLo:fs.authHi:fs.authHi]
		}
		if fs.kindsHi > fs.kindsLo {
			f.Kinds = kinds[fs.kindsLo:fs.kindsHi:fs.kindsHi]
		}
		if fs.tagHi > fs.tagLo {
			f.Tags = tagf[fs.tagLo:fs.tagHi:fs.tagHi]
		}
		if fs.hasSearch {
			f.Search = str(p.bytes(fs.search))
		}
		out[i] = f
	}
	return str(extra)
}

// AppendFilter appends f as a compact JSON filter object to dst and returns
// the extended slice. Lists are written when present (an empty list as []),
// tag lists in f.Tags order, and since, until and limit when their Has flag
// is set. ParseFilter of the result gives back f (with Tags sorted).
func AppendFilter(dst []byte, f *Filter) []byte {
	dst = append(dst, '{')
	n := 0
	key := func(k string) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, '"')
		dst = append(dst, k...)
		dst = append(dst, '"', ':')
	}
	if f.HasIDs() {
		key("ids")
		dst = append(dst, '[')
		for i := range f.IDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = appendHex(dst, f.IDs[i][:])
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	}
	if f.HasAuthors() {
		key("authors")
		dst = append(dst, '[')
		for i := range f.Authors {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			dst = appendHex(dst, f.Authors[i][:])
			dst = append(dst, '"')
		}
		dst = append(dst, ']')
	}
	if f.HasKinds() {
		key("kinds")
		dst = append(dst, '[')
		for i, k := range f.Kinds {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(k), 10)
		}
		dst = append(dst, ']')
	}
	for _, t := range f.Tags {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, '"', '#', t.Name, '"', ':')
		dst = append(dst, '[')
		for i, v := range t.Values {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, v)
		}
		dst = append(dst, ']')
	}
	if f.HasSince {
		key("since")
		dst = strconv.AppendInt(dst, f.Since, 10)
	}
	if f.HasUntil {
		key("until")
		dst = strconv.AppendInt(dst, f.Until, 10)
	}
	if f.HasLimit {
		key("limit")
		dst = strconv.AppendInt(dst, int64(f.Limit), 10)
	}
	if f.Search != "" {
		key("search")
		dst = AppendString(dst, f.Search)
	}
	return append(dst, '}')
}
