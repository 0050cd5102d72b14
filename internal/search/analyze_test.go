package search

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/petrel-relay/petrel/internal/nostr"
)

func termMap(d *Doc) map[string]int {
	m := make(map[string]int)
	for _, t := range d.Terms {
		m[string(t.Text)] = t.Freq
	}
	return m
}

func TestAnalyze(t *testing.T) {
	f := func(ev *nostr.Event, want map[string]int, wantLen int) {
		t.Helper()
		d := Analyze(ev)
		got := termMap(d)
		if fmt.Sprint(got) != fmt.Sprint(want) || d.Len != wantLen {
			t.Errorf("kind %d %q %v: terms %v len %d, want %v len %d", ev.Kind, ev.Content, ev.Tags, got, d.Len, want, wantLen)
		}
		if !slices.IsSortedFunc(d.Terms, func(a, b Term) int { return strings.Compare(string(a.Text), string(b.Text)) }) {
			t.Errorf("terms not sorted: %v", got)
		}
		if d.Empty() != (len(want) == 0) {
			t.Errorf("Empty() = %v", d.Empty())
		}
	}
	ev := func(kind int, content string, tags ...nostr.Tag) *nostr.Event {
		return &nostr.Event{Kind: kind, Content: content, Tags: tags}
	}
	f(ev(1, "Apple apple pear"), map[string]int{"apple": 2, "pear": 1}, 3)
	f(ev(1, "apple", nostr.Tag{"t", "Apple"}, nostr.Tag{"t"}, nostr.Tag{"p", "apple"}), map[string]int{"apple": 3}, 3)
	f(ev(30023, "body text", nostr.Tag{"d", "slug"}, nostr.Tag{"title", "Great Title"}, nostr.Tag{"summary", "short summary"}),
		map[string]int{"great": 2, "title": 2, "short": 1, "summary": 1, "body": 1, "text": 1}, 8)
	f(ev(1, "", nostr.Tag{"subject", "Re: hello"}), map[string]int{"re": 2, "hello": 2}, 4)
	// Profiles: JSON fields only.
	f(ev(0, `{"name":"Alice","display_name":"Alice W","about":"I like pebbles","nip05":"alice@example.com","website":"https://ignored.org"}`),
		map[string]int{"alice": 5, "like": 1, "pebbles": 1, "example": 1, "com": 1}, 9)
	f(ev(0, `{"name":"bob","displayName":"Bobby","about":42}`), map[string]int{"bob": 2, "bobby": 2}, 4)
	f(ev(0, `not json name`), map[string]int{}, 0)
	f(ev(0, `{"name":"broken`), map[string]int{}, 0)
	f(ev(41, `{"name":"channel name","about":"talk"}`), map[string]int{"channel": 2, "name": 2, "talk": 1}, 5)
	// Content that is not prose is not indexed; tags still are.
	for _, k := range []int{3, 4, 5, 6, 7, 13, 16, 62, 1059, 10002, 30000, 30003} {
		f(ev(k, "secret words here"), map[string]int{}, 0)
	}
	f(ev(30001, "secret", nostr.Tag{"title", "My list"}), map[string]int{"my": 2, "list": 2}, 4)
	f(ev(30010, "some words"), map[string]int{"some": 1, "words": 1}, 2)
	f(ev(1063, "caption words"), map[string]int{"caption": 1, "words": 1}, 2)
}

func TestAnalyzeCaps(t *testing.T) {
	// Frequencies clamp at MaxFreq; the length does not.
	d := Analyze(&nostr.Event{Kind: 1, Content: strings.Repeat("word ", 300)})
	if len(d.Terms) != 1 || d.Terms[0].Freq != MaxFreq || d.Len != 300 {
		t.Fatalf("terms %v len %d", termMap(d), d.Len)
	}
	// At most MaxDocTokens tokens, tags first.
	var b strings.Builder
	for i := 0; i < MaxDocTokens+100; i++ {
		fmt.Fprintf(&b, "w%d ", i)
	}
	d = Analyze(&nostr.Event{Kind: 1, Content: b.String(), Tags: nostr.Tags{{"title", "first"}}})
	m := termMap(d)
	if len(d.Terms) != MaxDocTokens || m["first"] != 2 || m["w0"] != 1 || m[fmt.Sprintf("w%d", MaxDocTokens-2)] != 1 || m[fmt.Sprintf("w%d", MaxDocTokens-1)] != 0 {
		t.Fatalf("%d terms, len %d", len(d.Terms), d.Len)
	}
}

func TestDocMatches(t *testing.T) {
	d := Analyze(&nostr.Event{Kind: 1, Content: "orange purple green"})
	f := func(q string, want bool) {
		t.Helper()
		pq := ParseQuery(q)
		if got := d.Matches(&pq); got != want {
			t.Errorf("Matches(%q) = %v, want %v", q, got, want)
		}
	}
	f("orange", true)
	f("ORANGE purple", true)
	f("orange language:en", true)
	f("orange blue", false)
	f("", false)
	f("the", false)
	f("language:en", false)
	if d.Freq("purple") != 1 || d.Freq("blue") != 0 {
		t.Fatal("Freq")
	}
}

func TestAnalyzerReuse(t *testing.T) {
	var a Analyzer
	evs := []*nostr.Event{
		{Kind: 1, Content: "alpha beta gamma delta"},
		{Kind: 1, Content: "x"},
		{Kind: 0, Content: `{"name":"zed"}`},
		{Kind: 1, Content: "beta beta"},
	}
	for _, ev := range evs {
		got := termMap(a.Analyze(ev))
		want := termMap(Analyze(ev))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("reused analyzer: %v, fresh: %v", got, want)
		}
	}
}
