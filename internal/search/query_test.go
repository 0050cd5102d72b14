package search

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseQuery(t *testing.T) {
	f := func(s string, terms []string, exts []Extension, ignored []string) {
		t.Helper()
		q := ParseQuery(s)
		if !slices.Equal(q.Terms, terms) || !slices.Equal(q.Extensions, exts) || !slices.Equal(q.Ignored, ignored) {
			t.Errorf("ParseQuery(%q) = %q %v %q, want %q %v %q", s, q.Terms, q.Extensions, q.Ignored, terms, exts, ignored)
		}
	}
	f("", nil, nil, nil)
	f("best nostr apps", []string{"best", "nostr", "apps"}, nil, nil)
	f("Nostr NOSTR nostr", []string{"nostr"}, nil, nil)
	f("the of a", nil, nil, nil)
	f("orange language:en", []string{"orange"}, []Extension{{"language", "en"}}, nil)
	f("include:spam domain:example.com Sentiment:positive nsfw:false purple",
		[]string{"purple"},
		[]Extension{{"include", "spam"}, {"domain", "example.com"}, {"sentiment", "positive"}, {"nsfw", "false"}}, nil)
	// Unknown extensions are removed; things that only look alike are text.
	f("bitcoin foo:bar x_y-z:1", []string{"bitcoin"}, nil, []string{"foo:bar", "x_y-z:1"})
	f("12:30 :x x: a:b:c", []string{"12", "30"}, nil, []string{"a:b:c"})
	f("nostr:npub1"+strings.Repeat("q", 58), []string{"npub1" + strings.Repeat("q", 58)}, nil, nil)
	f("https://www.example.com/page", []string{"example", "com"}, nil, nil)
	f(`"exact phrase" -minus OR`, []string{"exact", "phrase", "minus"}, nil, nil)
	f("東京都", []string{"東京", "京都"}, nil, nil)
}

func TestParseQueryMaxTerms(t *testing.T) {
	var words []string
	for i := 0; i < MaxQueryTerms+5; i++ {
		words = append(words, "w"+strconv.Itoa(i), "w"+strconv.Itoa(i))
	}
	q := ParseQuery(strings.Join(words, " "))
	if len(q.Terms) != MaxQueryTerms || q.Dropped != 5 || q.Terms[0] != "w0" || q.Terms[MaxQueryTerms-1] != "w"+strconv.Itoa(MaxQueryTerms-1) {
		t.Fatalf("terms %q dropped %d", q.Terms, q.Dropped)
	}
}
