package search

import (
	"bytes"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// FuzzTokenize checks the tokenizer's invariants on any input: tokens are
// valid UTF-8, non-empty, lowercase, within the length limits, never
// stopwords, and tokenizing the tokens again gives the same tokens (so a
// query made of an event's tokens finds the event). Analyze and ParseQuery
// must not panic either.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"", "Hello, World!", "don't stop", "東京都 ビットコイン 서울", "Ｂｉｔｃｏｉｎ",
		"https://www.example.com/x?y#z", "nostr:npub1" + strings.Repeat("q", 58), "nostr:nsec1qq",
		"e\u0301te नमस्ते", "http://u@h:1", "a'b ''' x’y", "\xff\xfe broken utf8", "language:en bitcoin foo:bar",
		`{"name":"alice","about":"hi there"}`, "12:30 v1.2.3", "wss://relay.damus.io/ 日",
		"abcdefgh abcdefg abcdefghi abcdefgh abcdefgh0 abcdefgha ab a abcdefgi", "zz z zzzzzzzzz zzzzzzzz é e ée",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		var tok Tokenizer
		toks := tok.Append(nil, text)
		for _, w := range toks {
			if w == "" || !utf8.ValidString(w) || len(w) > MaxTermLen || utf8.RuneCountInString(w) < 1 {
				t.Fatalf("bad token %q from %q", w, text)
			}
			if w != strings.ToLower(w) && lowerIdempotent(w) {
				t.Fatalf("token %q not lowercase (from %q)", w, text)
			}
			if _, stop := stopSet[w]; stop {
				t.Fatalf("stopword %q from %q", w, text)
			}
			if strings.ContainsFunc(w, unicode.IsSpace) {
				t.Fatalf("token %q has space", w)
			}
		}
		again := tok.Append(nil, strings.Join(toks, " "))
		if strings.Join(again, "\x00") != strings.Join(toks, "\x00") {
			t.Fatalf("tokens of %q: %q; tokens of those: %q", text, toks, again)
		}
		q := ParseQuery(text)
		if len(q.Terms) > MaxQueryTerms {
			t.Fatalf("%d terms", len(q.Terms))
		}
		d := Analyze(&nostr.Event{Kind: 1, Content: text, Tags: nostr.Tags{{"t", text}}})
		if d.Len < len(d.Terms) {
			t.Fatalf("len %d < %d terms", d.Len, len(d.Terms))
		}
		// The terms are the distinct tokens in bytewise order (finish
		// sorts by an 8-byte prefix key first), each counted with its
		// weights: 2 for the tag, 1 for the content.
		for i := 1; i < len(d.Terms); i++ {
			if bytes.Compare(d.Terms[i-1].Text, d.Terms[i].Text) >= 0 {
				t.Fatalf("terms out of order or repeated: %q then %q", d.Terms[i-1].Text, d.Terms[i].Text)
			}
		}
		if 2*len(toks) <= MaxDocTokens {
			want := make(map[string]int)
			for _, w := range toks {
				want[w] += 3
			}
			if len(want) != len(d.Terms) || d.Len != 3*len(toks) {
				t.Fatalf("%d terms, len %d; want %d, %d (tokens %q)", len(d.Terms), d.Len, len(want), 3*len(toks), toks)
			}
			for _, term := range d.Terms {
				if f := want[string(term.Text)]; term.Freq != min(f, MaxFreq) {
					t.Fatalf("term %q: freq %d, want %d", term.Text, term.Freq, min(f, MaxFreq))
				}
			}
		}
		Analyze(&nostr.Event{Kind: 0, Content: text})
	})
}

// lowerIdempotent reports whether lowercasing w once more changes nothing
// rune by rune (a few Unicode letters lowercase to other cased letters).
func lowerIdempotent(w string) bool {
	for _, r := range w {
		if unicode.ToLower(r) != r {
			return true
		}
	}
	return false
}
