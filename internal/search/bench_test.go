package search

import (
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

// BenchmarkAnalyze: the analysis of one note of about 30 words, as the
// store's writer runs it for every event it indexes (and again for every
// event it removes).
func BenchmarkAnalyze(b *testing.B) {
	evs := map[string]*nostr.Event{
		"note":    {Kind: 1, Content: "morning coffee by the river, then a long walk to the old stone bridge and the market; https://example.com/photo.jpg #nostr", Tags: nostr.Tags{{"t", "nostr"}}},
		"profile": {Kind: 0, Content: `{"name":"alice","display_name":"Alice W","about":"relay operator, coffee, mountains","nip05":"alice@example.com"}`},
		"cjk":     {Kind: 1, Content: strings.Repeat("東京都の天気は晴れです。", 5)},
	}
	for _, name := range []string{"note", "profile", "cjk"} {
		ev := evs[name]
		b.Run("event="+name, func(b *testing.B) {
			var a Analyzer
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if a.Analyze(ev).Empty() {
					b.Fatal("no terms")
				}
			}
		})
	}
}

// BenchmarkParseQuery: a search string with an extension.
func BenchmarkParseQuery(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if q := ParseQuery("best nostr apps language:en"); len(q.Terms) != 3 {
			b.Fatal(q.Terms)
		}
	}
}
