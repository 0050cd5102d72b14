package search

import (
	"strings"
	"unicode"
)

// MaxQueryTerms is the most distinct terms a query searches for; later
// terms are dropped (Query.Dropped counts them). It bounds the posting
// lists one query reads.
const MaxQueryTerms = 16

// Extensions are the NIP-50 extension keys: a "key:value" word with one of
// these keys is removed from the search string. petrel implements none of
// them (it has no spam filter, language detection, sentiment or NSFW
// classification), so they do not change the results.
var Extensions = []string{"include", "domain", "language", "sentiment", "nsfw"}

// Extension is one "key:value" word removed from a search string.
type Extension struct {
	Key   string // lowercased
	Value string
}

// Query is a parsed NIP-50 search string.
type Query struct {
	// Terms are the distinct terms to search for, in the order they
	// first appear, at most MaxQueryTerms. An event matches when it has
	// every term. No terms means the query matches nothing.
	Terms []string
	// Extensions are the known NIP-50 extensions that were removed.
	Extensions []Extension
	// Ignored are the words shaped like extensions petrel does not know
	// ("key:value"), removed as NIP-50 asks.
	Ignored []string
	// Dropped counts the distinct terms beyond MaxQueryTerms.
	Dropped int
}

// ParseQuery parses a NIP-50 search string (see the package
// documentation). It never fails: a string with nothing searchable gives
// a Query without terms.
func ParseQuery(s string) Query {
	var q Query
	var t Tokenizer
	var dropped map[string]struct{}
	for _, w := range strings.FieldsFunc(s, unicode.IsSpace) {
		if key, value, ok := extension(w); ok {
			if isKnownExtension(key) {
				q.Extensions = append(q.Extensions, Extension{Key: key, Value: value})
			} else {
				q.Ignored = append(q.Ignored, w)
			}
			continue
		}
		t.Each(w, func(tok []byte) bool {
			for _, have := range q.Terms {
				if have == string(tok) {
					return true
				}
			}
			if len(q.Terms) == MaxQueryTerms {
				if dropped == nil {
					dropped = make(map[string]struct{})
				}
				dropped[string(tok)] = struct{}{}
				q.Dropped = len(dropped)
				return true
			}
			q.Terms = append(q.Terms, string(tok))
			return true
		})
	}
	return q
}

// extension reports whether w has the shape "key:value" of a NIP-50
// extension: a key of ASCII letters, digits, "_" and "-" starting with a
// letter (at most 32 bytes), a colon, and a non-empty value. URLs and
// nostr: URIs are not extensions.
func extension(w string) (key, value string, ok bool) {
	colon := strings.IndexByte(w, ':')
	if colon <= 0 || colon > 32 || colon == len(w)-1 {
		return "", "", false
	}
	key, value = strings.ToLower(w[:colon]), w[colon+1:]
	if !('a' <= key[0] && key[0] <= 'z') {
		return "", "", false
	}
	for i := 1; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return "", "", false
		}
	}
	switch key {
	case "http", "https", "ws", "wss", "nostr":
		return "", "", false
	}
	return key, value, true
}

func isKnownExtension(key string) bool {
	for _, k := range Extensions {
		if k == key {
			return true
		}
	}
	return false
}
