package search

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenizer limits.
const (
	// MinTokenRunes is the shortest token kept, in characters (CJK
	// characters excepted: a lone one is a token).
	MinTokenRunes = 2
	// MaxWordLen is the longest ordinary token kept, in bytes; longer runs
	// of letters and digits (hex ids, base64) are dropped.
	MaxWordLen = 40
	// MaxTermLen is the longest token of any kind, in bytes: bech32 nostr
	// entities are kept up to this length.
	MaxTermLen = 128
)

// Stopwords are the English words that are never tokens: Lucene's classic
// English stop set. Short function words carry no meaning for search and
// would be the longest posting lists.
var Stopwords = []string{
	"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in",
	"into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the",
	"their", "then", "there", "these", "they", "this", "to", "was", "will",
	"with",
}

var stopSet = func() map[string]struct{} {
	m := make(map[string]struct{}, len(Stopwords))
	for _, w := range Stopwords {
		m[w] = struct{}{}
	}
	return m
}()

// entityPrefixes are the NIP-19 bech32 prefixes that are indexed whole (up
// to MaxTermLen bytes) although longer than MaxWordLen. nsec is absent on
// purpose: a secret key is never indexed.
var entityPrefixes = []string{"npub1", "note1", "nprofile1", "nevent1", "naddr1", "nrelay1"}

// urlSchemes are the schemes whose URLs are reduced to their host name.
var urlSchemes = []string{"https://", "http://", "wss://", "ws://"}

// Tokenizer splits text into tokens (see the package documentation). The
// zero value is ready to use. It keeps a buffer between calls, so it is
// used by one goroutine at a time.
type Tokenizer struct {
	word []byte
}

// Each calls fn with every token of text, in order, until fn returns
// false. The token's bytes are valid only during the call.
func (t *Tokenizer) Each(text string, fn func(tok []byte) bool) {
	i := 0
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf && !isASCIIAlnum(c) {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		r = foldWidth(r)
		switch {
		case isCJK(r):
			var ok bool
			if i, ok = t.cjk(text, i, fn); !ok {
				return
			}
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if end, ok := t.url(text, i, fn); end > i {
				if !ok {
					return
				}
				i = end
				continue
			}
			var ok bool
			if i, ok = t.wordAt(text, i, fn); !ok {
				return
			}
		default:
			i += size
		}
	}
}

// Append appends the tokens of text to dst as strings.
func (t *Tokenizer) Append(dst []string, text string) []string {
	t.Each(text, func(tok []byte) bool {
		dst = append(dst, string(tok))
		return true
	})
	return dst
}

// Tokens returns the tokens of text. It is a convenience for tests and
// cold paths; it allocates.
func Tokens(text string) []string {
	var t Tokenizer
	return t.Append(nil, text)
}

func isASCIIAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// foldWidth maps full-width ASCII (U+FF01-U+FF5E) to ASCII.
func foldWidth(r rune) rune {
	if 0xFF01 <= r && r <= 0xFF5E {
		return r - 0xFEE0
	}
	return r
}

func isCJK(r rune) bool {
	switch {
	case r < 0x1100:
		return false
	case 0x4E00 <= r && r <= 0x9FFF, 0x3041 <= r && r <= 0x3096, 0x30A1 <= r && r <= 0x30FA, 0xAC00 <= r && r <= 0xD7A3:
		return true // the common Han, Hiragana, Katakana and Hangul blocks
	}
	return unicode.Is(unicode.Han, r) || unicode.Is(unicode.Hiragana, r) ||
		unicode.Is(unicode.Katakana, r) || unicode.Is(unicode.Hangul, r)
}

// isWordRune reports whether r continues a word: a letter, a digit or a
// combining mark, not CJK.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return isASCIIAlnum(byte(r))
	}
	return (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)) && !isCJK(r)
}

func isApostrophe(r rune) bool { return r == '\'' || r == '\u2019' }

// wordAt reads the word starting at i (a letter or digit), emits it if it
// is a token, and returns the index after it and whether to go on.
func (t *Tokenizer) wordAt(text string, i int, fn func([]byte) bool) (int, bool) {
	w := t.word[:0]
	runes := 0
	prevLetter := false
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf {
			if isASCIIAlnum(c) {
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				w = append(w, c)
				runes++
				prevLetter = c > '9'
				i++
				continue
			}
			if c == '\'' && prevLetter && i+1 < len(text) && nextIsLetter(text[i+1:]) {
				i++
				continue
			}
			break
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		r = foldWidth(r)
		if isApostrophe(r) && prevLetter && i+size < len(text) && nextIsLetter(text[i+size:]) {
			i += size
			continue
		}
		if !isWordRune(r) {
			break
		}
		w = utf8.AppendRune(w, unicode.ToLower(r))
		runes++
		prevLetter = unicode.IsLetter(r)
		i += size
	}
	t.word = w
	// "nostr:" before an entity is a URI scheme, not a word.
	if string(w) == "nostr" && i+1 < len(text) && text[i] == ':' && nextIsLetter(text[i+1:]) {
		return i, true
	}
	if keep(w, runes) {
		return i, fn(w)
	}
	return i, true
}

func nextIsLetter(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	r = foldWidth(r)
	return unicode.IsLetter(r) && !isCJK(r)
}

// keep reports whether the word w (runes characters) is a token.
func keep(w []byte, runes int) bool {
	if runes < MinTokenRunes {
		return false
	}
	if len(w) > MaxWordLen && !(len(w) <= MaxTermLen && isEntity(w)) {
		return false
	}
	if len(w) <= 5 { // every stopword is short
		if _, stop := stopSet[string(w)]; stop {
			return false
		}
	}
	return true
}

func isEntity(w []byte) bool {
	for _, p := range entityPrefixes {
		if len(w) > len(p) && string(w[:len(p)]) == p {
			return true
		}
	}
	return false
}

// cjk emits the bigrams of the run of CJK characters at i (or the lone
// character), and returns the index after the run.
func (t *Tokenizer) cjk(text string, i int, fn func([]byte) bool) (int, bool) {
	prev := ""
	n := 0
	var pair [8]byte
	for i < len(text) {
		r, size := utf8.DecodeRuneInString(text[i:])
		if !isCJK(r) {
			break
		}
		cur := text[i : i+size]
		if n > 0 && !fn(append(append(pair[:0], prev...), cur...)) {
			return i, false
		}
		prev = cur
		n++
		i += size
	}
	if n == 1 {
		return i, fn(append(pair[:0], prev...))
	}
	return i, true
}

// url reduces a URL starting at i to the words of its host name. It returns
// i when there is no URL at i.
func (t *Tokenizer) url(text string, i int, fn func([]byte) bool) (int, bool) {
	c := text[i] | 0x20
	if c != 'h' && c != 'w' {
		return i, true
	}
	rest := text[i:]
	scheme := ""
	for _, s := range urlSchemes {
		if len(rest) >= len(s) && strings.EqualFold(rest[:len(s)], s) {
			scheme = s
			break
		}
	}
	if scheme == "" {
		return i, true
	}
	start := i + len(scheme)
	end := start
	hostEnd := -1
	for end < len(text) {
		r, size := utf8.DecodeRuneInString(text[end:])
		if unicode.IsSpace(r) || r == '"' || r == '<' || r == '>' || r == '\'' || unicode.IsControl(r) || r == utf8.RuneError && size == 1 {
			break
		}
		if hostEnd < 0 && (r == '/' || r == '?' || r == '#') {
			hostEnd = end
		}
		end += size
	}
	if hostEnd < 0 {
		hostEnd = end
	}
	host := text[start:hostEnd]
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		host = host[at+1:]
	}
	if colon := strings.IndexByte(host, ':'); colon >= 0 {
		host = host[:colon]
	}
	if len(host) >= 4 && strings.EqualFold(host[:4], "www.") {
		host = host[4:]
	}
	// The host's labels are words; nothing in the host can be a URL.
	for j := 0; j < len(host); {
		r, size := utf8.DecodeRuneInString(host[j:])
		r = foldWidth(r)
		switch {
		case isCJK(r):
			var ok bool
			if j, ok = t.cjk(host, j, fn); !ok {
				return end, false
			}
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			var ok bool
			if j, ok = t.wordAt(host, j, fn); !ok {
				return end, false
			}
		default:
			j += size
		}
	}
	return end, true
}
