package search

import (
	"slices"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	f := func(text string, want ...string) {
		t.Helper()
		got := Tokens(text)
		if !slices.Equal(got, want) {
			t.Errorf("Tokens(%q) = %q, want %q", text, got, want)
		}
	}
	f("")
	f("   \t\n")
	f("Hello, World!", "hello", "world")
	f("GM nostr #Bitcoin @fiatjaf", "gm", "nostr", "bitcoin", "fiatjaf")
	// Stopwords and one-character tokens go.
	f("the cat is on a mat", "cat", "mat")
	f("I x 1 22 333", "22", "333")
	// Digits and letters stay together; punctuation splits.
	f("btc21 2024-01-02 v1.2", "btc21", "2024", "01", "02", "v1")
	f("snake_case kebab-case", "snake", "case", "kebab", "case")
	// Apostrophes between letters join.
	f("don't it’s 'quoted' rock'n'roll", "dont", "its", "quoted", "rocknroll")
	// Unicode letters, lowercased; combining marks stay in the word.
	f("Ünïcödé STRAẞE Ελληνικά", "ünïcödé", "straße", "ελληνικά")
	f("नमस्ते दुनिया", "नमस्ते", "दुनिया")
	f("e\u0301te", "e\u0301te")
	// Full-width ASCII folds to ASCII.
	f("Ｂｉｔｃｏｉｎ！", "bitcoin")
	// CJK: bigrams; a lone character is a token.
	f("東京都", "東京", "京都")
	f("日本 語", "日本", "語")
	f("ビットコイン", "ビッ", "ット", "トコ", "コイ", "イン")
	f("서울에서", "서울", "울에", "에서")
	f("abc東京def", "abc", "東京", "def")
	// Long runs are not words; entities are kept whole.
	f(strings.Repeat("ab", 21), []string{}...)
	f(strings.Repeat("a", 40), strings.Repeat("a", 40))
	f("note "+strings.Repeat("f", 64), "note")
	npub := "npub1" + strings.Repeat("q", 58)
	f("nostr:"+npub, npub)
	f("NOSTR:"+strings.ToUpper(npub)+" bare "+npub, npub, "bare", npub)
	f("nostr:nsec1"+strings.Repeat("q", 58), []string{}...)
	f("nostr: is nice", "nostr", "nice")
	f("nostr:", "nostr")
	f("nprofile1"+strings.Repeat("p", 119), "nprofile1"+strings.Repeat("p", 119))
	f("nprofile1"+strings.Repeat("p", 120), []string{}...)
	f("nprofile1"+strings.Repeat("p", 200), []string{}...)
	// URLs reduce to their host's words.
	f("see https://www.Example.com/some/Path?q=word#frag now", "see", "example", "com", "now")
	f("http://user:pw@sub.host-name.org:8080/x", "sub", "host", "name", "org")
	f("wss://relay.damus.io", "relay", "damus", "io")
	f("(https://a.bc.de)", "bc", "de")
	f("https://", []string{}...)
	f("https:/notaurl", "https", "notaurl")
	f("http://例え.jp/パス", "例え", "jp")
	f("httpsx://host", "httpsx", "host")
}

func TestTokensEarlyStop(t *testing.T) {
	var tok Tokenizer
	n := 0
	tok.Each("one two three 東京都 https://four.five", func([]byte) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("Each went on after false: %d calls", n)
	}
	for _, text := range []string{"東京都大阪", "https://one.two.three", "x 日"} {
		n = 0
		tok.Each(text, func([]byte) bool { n++; return false })
		if n != 1 {
			t.Fatalf("Each(%q) went on after false: %d calls", text, n)
		}
	}
}

func TestStopwordsAreDropped(t *testing.T) {
	for _, w := range Stopwords {
		if len(w) > 5 {
			t.Fatalf("stopword %q longer than the check in keep", w)
		}
		if got := Tokens(w + " " + strings.ToUpper(w)); len(got) != 0 {
			t.Errorf("stopword %q gave %q", w, got)
		}
	}
}
